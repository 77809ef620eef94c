//! Judging a `Bash` command line: parsed by [`crate::shell`], every simple command judged
//! in every working directory it may run in.
//!
//! Invariants:
//! - A line passes only when it parses, no deny-side rule matches any of its simple
//!   commands or paths, and every simple command is either in the safe set
//!   ([`crate::programs`]) or matched by an `auto_mode.allow` `Bash` rule. Environment
//!   prefixes and redirections are judged by the judge's own rules whatever `Bash` rule
//!   matched (a redirection's file may still be covered by an `auto_mode.allow` edit rule), and
//!   an allow rule does not cover a command with a glob its program does not take as files.
//! - Wrappers (`nice`, `timeout`, `xargs -0` after `find -print0`, [`crate::wrappers`]) are
//!   taken off; the wrapped command is judged, and the user's rules see both it and the whole.
//! - A glob word must be taken as files by its program; a redirection to a glob is refused.
//! - The line is parsed in the context's shell; a shell other than sh and zsh flags the call.
//! - A background run (`run_in_background`) of a line that runs project code is flagged.
//! - Working directories are tracked through `cd`: a state is (directory, did the last
//!   command succeed); `&&` runs the next pipeline in the succeeded states, `||` in the failed
//!   ones, `;` and newlines in all. A command other than `cd` may succeed or fail. A `cd`
//!   inside a pipeline may or may not change the directory (bash runs pipeline parts in
//!   subshells, zsh runs the last one in the shell). At most [`MAX_DIRECTORIES`] directories
//!   are tracked.

use crate::context::{Context, Shell};
use crate::decisive::{self, Written};
use crate::fields::BashFields;
use crate::options::Arg;
use crate::programs;
use crate::rules::Facts;
use crate::scope::{Effects, Scope};
use crate::shell::{self, Command, Dialect, Join, RedirOp, Unsupported, Word};
use crate::user_rules::{deny_side, ALL_ONLY_READS};
use crate::verdict::{show, Decision};
use crate::wrappers;

/// Longest command line judged.
pub(crate) const MAX_COMMAND_BYTES: usize = 16 * 1024;

/// Most working directories a line may be in at one point.
pub(crate) const MAX_DIRECTORIES: usize = 8;

/// Environment variables a command may be prefixed with (`CI=1 npm test`): they change
/// output, not what runs.
pub(crate) const ENV_NAMES: [&str; 9] = [
    "CI",
    "NODE_ENV",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "FORCE_COLOR",
    "NO_COLOR",
    "TZ",
    "LANG",
    "LC_ALL",
];

/// One simple command, judged.
struct Report {
    words: Vec<String>,
    /// The wrapped command's words when wrappers were taken off (`timeout 60 npm test`:
    /// `npm test`), for the user's rules.
    inner: Option<Vec<String>>,
    /// A word of the command is a glob.
    globbed: bool,
    /// Environment prefixes and redirections: `Ok(citation)` when they pass.
    fixed: Result<Option<String>, String>,
    /// The safe set's verdict on the program and its arguments.
    verdict: Result<(), String>,
    effects: Effects,
    /// How many of `effects.writes`, at their start, are the redirections' files.
    redirected: usize,
    /// Every file an output redirection names, whether the judge accepts the write or not:
    /// the conversation's history counts them all ([`writes`]).
    redirect_targets: Vec<String>,
}

/// Judges the `command` of a `Bash` call, with what its other fields ask.
pub(crate) fn judge(command: &str, ctx: &Context, fields: BashFields) -> Decision {
    let line = match readable_line(command, ctx) {
        Ok(line) => line,
        Err(flag) => return flag,
    };
    let reports = match analyze(&line, ctx) {
        Ok(reports) => reports,
        Err(why) => return Decision::flag(why),
    };
    let facts = facts_of(&reports);
    if let Some(decision) = deny_side(&facts, ctx).or_else(|| session_flag(ctx)) {
        return decision;
    }
    if let Some(flag) = background_flag(fields, &reports) {
        return flag;
    }
    match judge_commands(reports, ctx) {
        Ok(Some((path, text))) => {
            let rule = if text.is_empty() {
                String::new()
            } else {
                format!(" (`{}`)", show(&text))
            };
            Decision::pass(format!("allowed by the user's rule {path}{rule}")).cite(path)
        }
        Ok(None) => Decision::pass("runs only commands the judge knows to be harmless here"),
        Err(flag) => flag,
    }
}

/// The command parsed, when the judge can read it: a shell whose syntax it knows, at most
/// 16 KiB, ASCII without control characters but newline and tab, not empty, and no syntax
/// the parser does not follow; otherwise the flag that says which.
fn readable_line(command: &str, ctx: &Context) -> Result<shell::Line, Decision> {
    let dialect = match &ctx.shell {
        Shell::Sh => Dialect::Sh,
        Shell::Zsh => Dialect::Zsh,
        Shell::Other(name) => {
            return Err(Decision::flag(format!(
                "the commands run in `{}`, a shell whose syntax the judge does not read",
                show(name)
            )))
        }
    };
    if command.len() > MAX_COMMAND_BYTES {
        return Err(Decision::flag(format!(
            "the command is {} bytes long, more than the 16 KiB the judge reads",
            command.len()
        )));
    }
    if let Some(c) = command.chars().find(|c| !c.is_ascii()) {
        return Err(Decision::flag(format!(
            "the command contains the non-ASCII character U+{:04X}; look-alike and invisible characters can disguise what runs",
            u32::from(c)
        )));
    }
    if let Some(c) = command
        .chars()
        .find(|c| c.is_ascii_control() && !matches!(c, '\n' | '\t'))
    {
        return Err(Decision::flag(format!(
            "the command contains the control character U+{:04X}",
            u32::from(c)
        )));
    }
    if command.trim().is_empty() {
        return Err(Decision::flag("the command is empty"));
    }
    shell::parse_in(command, dialect).map_err(|Unsupported(what)| {
        Decision::flag(format!(
            "the command has {what}, which the judge does not follow"
        ))
    })
}

/// What the line does, for the user's deny and ask rules: its commands, the directories it
/// reads and the files it writes (sorted, without repeats).
fn facts_of(reports: &[Report]) -> Facts<'_> {
    let mut facts = Facts {
        tool: "Bash",
        ..Facts::default()
    };
    for report in reports {
        facts.commands.push(report.words.clone());
        facts.commands.extend(report.inner.iter().cloned());
        facts.read_dirs.extend(report.effects.reads.iter().cloned());
        facts.writes.extend(report.effects.writes.iter().cloned());
        facts.implicit_edit |= report.effects.implicit_edit;
    }
    for paths in [&mut facts.read_dirs, &mut facts.writes] {
        paths.sort();
        paths.dedup();
    }
    facts
}

/// A flag for every shell command the session's settings ask to be checked.
fn session_flag(ctx: &Context) -> Option<Decision> {
    if ctx.restricted {
        return Some(Decision::flag(format!(
            "the session is restricted: {ALL_ONLY_READS}, and a shell command is not one"
        )));
    }
    ctx.classify_all_shell.then(|| {
        Decision::flag(
            "the user's settings ask for every shell command to be checked (classify_all_shell)",
        )
    })
}

/// A line run in the background may not run code: a program left running can re-run what is
/// written later, with no call left to judge.
fn background_flag(fields: BashFields, reports: &[Report]) -> Option<Decision> {
    if !fields.background {
        return None;
    }
    let report = reports.iter().find(|report| report.effects.runs_code)?;
    Some(Decision::flag(format!(
        "runs `{}` in the background; a program left running can re-run what is written later, with no call left to judge",
        show(report.words.first().map_or("", String::as_str))
    )))
}

/// Judges each command of the line in order: its environment prefixes and redirections,
/// then a user's allow rule or the safe set, then whether it runs what this conversation (or
/// another command of the line) wrote. When every command passes: the first citation (a
/// file and a rule's text; the text is empty where the prefixes or redirections cite a file
/// alone), if any; otherwise the first flag.
fn judge_commands(
    reports: Vec<Report>,
    ctx: &Context,
) -> Result<Option<(String, String)>, Decision> {
    // Another command of the line may write what a later (or concurrent) one runs.
    let mut same_line = Written::default();
    for path in line_writes(&reports) {
        same_line.record("Bash", &path);
    }
    let mut cited: Option<(String, String)> = None;
    for report in reports {
        match report.fixed {
            Err(why) => return Err(Decision::flag(why)),
            Ok(Some(path)) => {
                cited.get_or_insert((path, String::new()));
            }
            Ok(None) => {}
        }
        // An allow rule does not cover what a glob expands to unless the judge's own rules
        // take the glob as files.
        let allowed = ctx.allow.iter().find(|entry| {
            entry.rule.as_ref().is_some_and(|rule| {
                rule.allows_command(&report.words)
                    || report
                        .inner
                        .as_ref()
                        .is_some_and(|inner| rule.allows_command(inner))
            })
        });
        let allowed = allowed.filter(|_| !report.globbed || report.verdict.is_ok());
        if let Some(entry) = allowed {
            cited.get_or_insert((entry.path.clone(), entry.text.clone()));
            continue;
        }
        report.verdict.map_err(Decision::flag)?;
        if !(ctx.written.is_empty() && same_line.is_empty()) {
            let expand = |command: &str| writes(command, ctx);
            // A wrapper (`timeout 120 pytest`) runs what it wraps: the inner program decides.
            let runs = report.inner.as_ref().unwrap_or(&report.words);
            decisive::check_run(runs, &ctx.written, Some(&same_line), &expand)
                .map_err(Decision::flag)?;
        }
    }
    Ok(cited)
}

/// The files a `Bash` command line writes, as the judge resolves them, for the conversation's
/// history ([`crate::history`]): what a past call may have changed. Empty for a line the
/// judge cannot read (it was flagged, so it was blocked).
pub(crate) fn writes(command: &str, ctx: &Context) -> Vec<String> {
    if command.len() > MAX_COMMAND_BYTES || !command.is_ascii() {
        return Vec::new();
    }
    let dialect = match &ctx.shell {
        Shell::Sh => Dialect::Sh,
        Shell::Zsh => Dialect::Zsh,
        // Every line is flagged in a shell the judge does not read: it wrote nothing.
        Shell::Other(_) => return Vec::new(),
    };
    match shell::parse_in(command, dialect) {
        Ok(line) => {
            analyze(&line, ctx).map_or_else(|_| Vec::new(), |reports| line_writes(&reports))
        }
        Err(_) => Vec::new(),
    }
}

/// What the line's commands write: their redirections' files (even those the judge refuses)
/// and the files the safe set's programs write, except git's own (`git add` and `git commit`
/// name files they do not change). A command the safe set does not know (passed by a user's
/// rule, or flagged) counts as writing every operand it names.
fn line_writes(reports: &[Report]) -> Vec<String> {
    let mut out = Vec::new();
    for report in reports {
        out.extend(report.redirect_targets.iter().cloned());
        if report.words.first().is_none_or(|program| program != "git") {
            let programs = report
                .effects
                .writes
                .get(report.redirected..)
                .unwrap_or_default();
            out.extend(programs.iter().cloned());
        }
        if report.verdict.is_err() {
            out.extend(
                report
                    .words
                    .iter()
                    .skip(1)
                    .filter(|word| !word.starts_with('-'))
                    .cloned(),
            );
        }
    }
    out
}

/// Judges every simple command in the working directories it may run in.
fn analyze(line: &shell::Line, ctx: &Context) -> Result<Vec<Report>, String> {
    let mut reports = Vec::new();
    // (working directory, did the last command succeed)
    let mut states: Vec<(Option<String>, bool)> = vec![(ctx.cwd.clone(), true)];
    for list in line {
        states = run_pipeline(&list.first, &states, ctx, &mut reports)?;
        for (join, pipeline) in &list.rest {
            let wanted = *join == Join::And;
            let (running, skipped): (Vec<_>, Vec<_>) =
                states.into_iter().partition(|(_, ok)| *ok == wanted);
            let mut next = run_pipeline(pipeline, &running, ctx, &mut reports)?;
            next.extend(skipped);
            states = dedup(next)?;
        }
    }
    Ok(reports)
}

fn run_pipeline(
    pipeline: &[Command],
    states: &[(Option<String>, bool)],
    ctx: &Context,
    reports: &mut Vec<Report>,
) -> Result<Vec<(Option<String>, bool)>, String> {
    let mut cwds: Vec<Option<String>> = Vec::new();
    for (cwd, _) in states {
        if !cwds.contains(cwd) {
            cwds.push(cwd.clone());
        }
    }
    if cwds.is_empty() {
        // Never runs in this model; still judged, where the line started.
        cwds.push(ctx.cwd.clone());
    }
    let scope = Scope { ctx, cwds };
    let mut targets: Vec<String> = Vec::new();
    let mut any_cd = false;
    for (at, command) in pipeline.iter().enumerate() {
        let before = at.checked_sub(1).map(|before| &pipeline[before]);
        let report = judge_command(command, before, &scope);
        if let Some(cd) = &report.effects.cd {
            any_cd = true;
            targets.extend(cd.iter().cloned());
        }
        reports.push(report);
    }
    let mut next = Vec::new();
    if any_cd && pipeline.len() == 1 {
        next.extend(targets.into_iter().map(|t| (Some(t), true)));
        next.extend(scope.cwds.iter().map(|c| (c.clone(), false)));
    } else {
        let mut all = scope.cwds.clone();
        all.extend(targets.into_iter().map(Some));
        for cwd in all {
            next.push((cwd.clone(), true));
            next.push((cwd, false));
        }
    }
    dedup(next)
}

fn dedup(states: Vec<(Option<String>, bool)>) -> Result<Vec<(Option<String>, bool)>, String> {
    let mut out: Vec<(Option<String>, bool)> = Vec::with_capacity(states.len());
    let mut dirs = 0;
    for state in states {
        if out.contains(&state) {
            continue;
        }
        if !out.iter().any(|(cwd, _)| *cwd == state.0) {
            dirs += 1;
            if dirs > MAX_DIRECTORIES {
                return Err(format!(
                    "the command may be in more than {MAX_DIRECTORIES} working directories, more than the judge follows"
                ));
            }
        }
        out.push(state);
    }
    Ok(out)
}

/// One simple command; `before` is the previous command of its pipeline (what feeds
/// `xargs`).
fn judge_command(command: &Command, before: Option<&Command>, scope: &Scope<'_>) -> Report {
    let mut effects = Effects::default();
    let words: Vec<String> = command.words.iter().map(Word::display).collect();
    let fixed = judge_prefixes(command, scope, &mut effects);
    let redirected = effects.writes.len();
    let mut inner = None;
    let verdict = match wrappers::unwrap(&command.words, before) {
        Err(why) => Err(why),
        Ok(unwrapped) => {
            if unwrapped.wrapped {
                inner = Some(unwrapped.words.iter().map(Word::display).collect());
            }
            match unwrapped.words.split_first() {
                None => Ok(()),
                Some((program, args)) => {
                    let judged = programs::judge(program, args, scope, &mut effects);
                    effects.sort_globbed();
                    judged.and_then(|()| {
                        // A glob a program did not take as files would hand it names the
                        // judge never saw (as a pattern, a message, an option value).
                        match unwrapped
                            .words
                            .iter()
                            .find(|w| w.glob && !effects.took_glob(&w.text))
                        {
                            Some(word) => Err(format!(
                                "uses a glob (`{}`) where `{}` does not take files to read",
                                show(&word.display()),
                                show(&program.display())
                            )),
                            None => Ok(()),
                        }
                    })
                }
            }
        }
    };
    Report {
        words,
        inner,
        globbed: command.words.iter().any(|w| w.glob),
        fixed,
        verdict,
        effects,
        redirected,
        redirect_targets: redirect_targets(command, scope),
    }
}

/// The files of a command's output redirections, in every working directory (descriptors and
/// `/dev/null` aside; a target the judge cannot resolve is left out: the command is flagged).
fn redirect_targets(command: &Command, scope: &Scope<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for redirect in &command.redirects {
        let target = &redirect.target;
        let text = target.text.as_str();
        let descriptor = !target.tilde
            && (text == "-" || (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())));
        let output = matches!(
            redirect.op,
            RedirOp::Output | RedirOp::Append | RedirOp::Both | RedirOp::ReadWrite
        ) || (redirect.op == RedirOp::DupOut && !descriptor);
        if !output {
            continue;
        }
        if let Ok(paths) = scope.resolve(Arg::from(target)) {
            out.extend(paths.into_iter().filter(|path| path != "/dev/null"));
        }
    }
    out
}

/// Environment prefixes and redirections.
fn judge_prefixes(
    command: &Command,
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<Option<String>, String> {
    if command.words.is_empty() && !command.assignments.is_empty() {
        return Err("sets a shell variable, which changes what later commands run".to_owned());
    }
    for assignment in &command.assignments {
        check_assignment(assignment)?;
    }
    let mut cited = None;
    for redirect in &command.redirects {
        let target = &redirect.target;
        let text = target.text.as_str();
        if target.glob {
            return Err(format!(
                "redirects to or from a glob (`{}`), which may name any file it matches",
                show(&target.display())
            ));
        }
        let descriptor = !target.tilde
            && (text == "-" || (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())));
        match redirect.op {
            RedirOp::HereString => {}
            RedirOp::DupIn if descriptor => {}
            RedirOp::DupOut if descriptor => {}
            RedirOp::DupIn => {
                return Err(format!(
                    "redirects input from `{}`, which is not a descriptor",
                    show(text)
                ))
            }
            RedirOp::Input => {
                if !is_dev_null(scope, target) {
                    scope.read(fx, Arg::from(target))?;
                }
            }
            RedirOp::Output
            | RedirOp::Append
            | RedirOp::Both
            | RedirOp::ReadWrite
            | RedirOp::DupOut => {
                if is_dev_null(scope, target) {
                    continue;
                }
                let mut own = Effects::default();
                match scope.write(&mut own, Arg::from(target)) {
                    Ok(()) => fx.writes.append(&mut own.writes),
                    Err(why) => {
                        let paths = scope.resolve(Arg::from(target)).map_err(|_| why.clone())?;
                        let entry = scope.ctx.allow.iter().find(|entry| {
                            entry.rule.as_ref().is_some_and(|rule| {
                                paths.iter().all(|path| rule.allows_write(path, scope.ctx))
                            })
                        });
                        let entry = entry.ok_or(why)?;
                        cited.get_or_insert(entry.path.clone());
                        fx.writes.extend(paths);
                    }
                }
            }
        }
    }
    Ok(cited)
}

fn is_dev_null(scope: &Scope<'_>, target: &Word) -> bool {
    scope
        .resolve(Arg::from(target))
        .is_ok_and(|paths| paths.iter().all(|path| path == "/dev/null"))
}

/// `NAME=value` before a program: only [`ENV_NAMES`], with plain values.
fn check_assignment(word: &Word) -> Result<(), String> {
    let at = word.assignment.unwrap_or(0);
    let (name, value) = (&word.text[..at], &word.text[at + 1..]);
    if !ENV_NAMES.contains(&name) {
        return Err(format!(
            "sets the environment variable `{}`, which can change what the program runs",
            show(name)
        ));
    }
    let plain = value.bytes().all(|b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'_' | b'.' | b',' | b':' | b'+' | b'=' | b'@' | b'%' | b'-'
            )
            || (b == b'/' && name == "TZ")
    }) && !value.contains("..");
    if plain {
        Ok(())
    } else {
        Err(format!(
            "sets `{name}` to a value the judge does not accept"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            cwd: Some("/proj".to_owned()),
            home: Some("/home/u".to_owned()),
            primary: Some("/proj".to_owned()),
            trusted: vec!["/proj".to_owned()],
            ..Context::default()
        }
    }

    fn cwds_seen(line: &str) -> Vec<Vec<Option<String>>> {
        // The directories `pwd`-free commands ran in: re-run the analysis and capture scopes
        // through the paths `cat x` read.
        let ctx = ctx();
        let parsed = shell::parse(line).unwrap();
        analyze(&parsed, &ctx)
            .unwrap()
            .iter()
            .filter(|r| r.words.first().is_some_and(|w| w == "cat"))
            .map(|r| r.effects.reads.iter().map(|p| Some(p.clone())).collect())
            .collect()
    }

    fn some(paths: &[&str]) -> Vec<Option<String>> {
        paths.iter().map(|p| Some((*p).to_owned())).collect()
    }

    #[test]
    fn cd_and_runs_in_the_new_directory_only() {
        assert_eq!(cwds_seen("cd sub && cat x"), vec![some(&["/proj/sub/x"])]);
        assert_eq!(
            cwds_seen("cd sub && cat x && cat y"),
            vec![some(&["/proj/sub/x"]), some(&["/proj/sub/y"])]
        );
    }

    #[test]
    fn cd_then_or_semicolon_may_be_either() {
        assert_eq!(cwds_seen("cd sub || cat x"), vec![some(&["/proj/x"])]);
        assert_eq!(
            cwds_seen("cd sub; cat x"),
            vec![some(&["/proj/sub/x", "/proj/x"])]
        );
        assert_eq!(
            cwds_seen("cd sub\ncat x"),
            vec![some(&["/proj/sub/x", "/proj/x"])]
        );
        assert_eq!(cwds_seen("cd a && cd b; cat x").len(), 1);
        assert_eq!(
            cwds_seen("cd a && cd b; cat x")[0].len(),
            3,
            "after two cds and a `;` the line is in one of three directories"
        );
    }

    #[test]
    fn cd_in_a_pipeline_may_or_may_not_apply() {
        assert_eq!(
            cwds_seen("cat x | cd sub; cat y")[1],
            some(&["/proj/y", "/proj/sub/y"])
        );
    }

    #[test]
    fn too_many_directories_is_refused() {
        let line = (0..10)
            .map(|i| format!("cd d{i}"))
            .collect::<Vec<_>>()
            .join("; ");
        let parsed = shell::parse(&line).unwrap();
        assert!(analyze(&parsed, &ctx()).is_err());
    }

    #[test]
    fn assignments() {
        let word = |text: &str| {
            let line = shell::parse(&format!("{text} true")).unwrap();
            line[0].first[0].assignments[0].clone()
        };
        assert!(check_assignment(&word("CI=1")).is_ok());
        assert!(check_assignment(&word("RUST_LOG=info,foo=debug")).is_ok());
        assert!(check_assignment(&word("TZ=America/New_York")).is_ok());
        assert!(check_assignment(&word("LANG=/tmp/x")).is_err());
        assert!(check_assignment(&word("LD_PRELOAD=x.so")).is_err());
        assert!(check_assignment(&word("PATH=.")).is_err());
        assert!(check_assignment(&word("TZ=../../etc/x")).is_err());
        assert!(check_assignment(&word("CI='a b'")).is_err());
    }
}
