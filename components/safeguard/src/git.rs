//! `git`: the read-only subcommands, and `add`, `commit`, `stash`, new branches as local
//! writes.
//!
//! Invariants:
//! - Global options: only `-C DIR` (inside a trusted directory), `--no-pager`/`-P` and
//!   `--no-optional-locks`. Anything else there (`-c`, `--git-dir`, `--work-tree`,
//!   `--exec-path`, `--config-env`) can make git run another program.
//! - Read subcommands refuse the options that write or run programs (`--output`,
//!   `--ext-diff`, `--textconv`, `--no-index`, `-O`, grep `-f`, blame `--contents` ...),
//!   including any abbreviation git would expand to them (git accepts unique prefixes of long
//!   options), and any short cluster holding a refused letter.
//! - Operands that may be paths (absolute, `~`, a `..` component, or the path of `rev:path`)
//!   and long options' `=value`s (`--orderfile=FILE`) must resolve inside; any operand or value
//!   naming a sensitive file is refused. Pathspecs are read after their magic (`:(icase)`,
//!   `:/`, `:!` ...): an including one may not single out secrets, the excluding ones of a
//!   command may not leave only secrets ([`crate::filters`]).
//! - Local writes: `add`, `commit`, `stash` (push, which keeps the work in the repository),
//!   `checkout -b` / `switch -c` of a new branch at the current commit.
//! - Network, history-rewriting and work-discarding subcommands are never in the set (also
//!   `stash drop|clear|pop|apply`, `checkout` of files or other branches).

use crate::filters;
use crate::options::Arg;
use crate::paths::{self, Access};
use crate::scope::{Effects, Scope};
use crate::shell::Word;
use crate::verdict::show;

/// Long options of the read subcommands that write files, run programs or read outside the
/// repository.
const REFUSED_LONG: [&str; 17] = [
    "output",
    "output-directory",
    "ext-diff",
    "textconv",
    "no-index",
    "open-files-in-pager",
    "contents",
    "ignore-revs-file",
    "exclude-from",
    "pathspec-from-file",
    "exec",
    "upload-pack",
    "receive-pack",
    "config-env",
    "git-dir",
    "work-tree",
    "paginate",
];

pub(crate) fn judge(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let mut i = 0;
    let mut moved: Option<Vec<Option<String>>> = None;
    let sub = loop {
        let word = args.get(i).ok_or("runs `git` without a subcommand")?;
        let text = word.text.as_str();
        match text {
            _ if word.tilde => {
                return Err("runs `git` with a path where its subcommand goes".to_owned())
            }
            "--no-pager" | "-P" | "--no-optional-locks" => i += 1,
            "-C" => {
                let dir = args.get(i + 1).ok_or("runs `git -C` without a directory")?;
                let current = Scope {
                    ctx: scope.ctx,
                    cwds: moved.clone().unwrap_or_else(|| scope.cwds.clone()),
                };
                let dirs = current
                    .resolve(Arg::from(dir))
                    .map_err(|p| p.sentence(Access::Read))?;
                for dir in &dirs {
                    paths::check_read(scope.ctx, dir).map_err(|p| p.sentence(Access::Read))?;
                }
                fx.reads.extend(dirs.iter().cloned());
                moved = Some(dirs.into_iter().map(Some).collect());
                i += 2;
            }
            _ if text.starts_with('-') => {
                return Err(format!(
                    "runs `git` with the global option `{}`, which can change what git runs",
                    show(text)
                ))
            }
            _ => break text,
        }
    };
    let rest = &args[i + 1..];
    let moved_scope;
    let scope = match moved {
        Some(cwds) => {
            moved_scope = Scope {
                ctx: scope.ctx,
                cwds,
            };
            &moved_scope
        }
        None => scope,
    };
    match sub {
        "status" | "diff" | "log" | "show" | "blame" | "ls-files" | "rev-parse" | "grep"
        | "shortlog" => read_only(sub, rest, scope, fx),
        "stash" => stash(rest, scope, fx),
        "checkout" => new_branch("checkout", "-b", rest),
        "switch" => new_branch("switch", "-c", rest),
        "branch" => branch(rest),
        "remote" => match rest {
            [] => Ok(()),
            [one] if matches!(one.text.as_str(), "-v" | "--verbose") => Ok(()),
            _ => Err("runs `git remote` other than listing remotes".to_owned()),
        },
        "tag" => match rest.split_first() {
            None => Ok(()),
            Some((list, patterns))
                if matches!(list.text.as_str(), "-l" | "--list")
                    && patterns.iter().all(|p| !p.text.starts_with('-')) =>
            {
                Ok(())
            }
            _ => Err("runs `git tag` other than listing tags".to_owned()),
        },
        "add" => add(rest, scope, fx),
        "commit" => commit(rest, scope, fx),
        _ => Err(refused(sub)),
    }
}

fn refused(sub: &str) -> String {
    let why = match sub {
        "push" | "pull" | "fetch" | "clone" | "ls-remote" | "submodule" | "lfs" | "send-email"
        | "request-pull" | "daemon" | "http-backend" | "svn" | "p4" | "archive" => {
            "which talks to other machines"
        }
        "reset" | "clean" | "checkout" | "restore" | "switch" | "rm" | "mv" | "rebase"
        | "merge" | "cherry-pick" | "revert" | "am" | "apply" | "filter-branch" | "filter-repo"
        | "gc" | "prune" | "update-ref" | "reflog" | "replace" | "notes" | "worktree"
        | "bisect" | "update-index" | "read-tree" | "checkout-index" => {
            "which can rewrite history or discard work"
        }
        "config" | "init" | "hook" | "credential" | "config-env" => {
            "which changes git's configuration or credentials"
        }
        _ => "which is not in the judge's safe set",
    };
    format!("runs `git {}`, {why}", show(sub))
}

/// The letters refused in short clusters, by subcommand.
fn refused_letters(sub: &str) -> &'static str {
    match sub {
        "grep" => "Of",
        "ls-files" => "OX",
        "blame" => "OS",
        _ => "O",
    }
}

/// `git stash` (a push), `git stash push [-m MESSAGE] [-u] [-k] [-q] [-- pathspecs]`,
/// `git stash list`, `git stash show [-p] [--stat] [stash]`: stashing keeps the changes in the
/// repository. `drop`, `clear`, `pop`, `apply` and the rest change or discard work.
fn stash(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let (verb, rest) = match args.split_first() {
        None => return Ok(()),
        Some((first, rest)) if !first.tilde && !first.text.starts_with('-') => {
            (first.text.as_str(), rest)
        }
        Some(_) => ("push", args),
    };
    match verb {
        "list" => read_only("stash list", rest, scope, fx),
        "show" => read_only("stash show", rest, scope, fx),
        "push" | "save" => {
            const FLAGS: [&str; 10] = [
                "-u",
                "--include-untracked",
                "-k",
                "--keep-index",
                "--no-keep-index",
                "-q",
                "--quiet",
                "-S",
                "--staged",
                "--only-untracked",
            ];
            let mut operands_only = verb == "save";
            let mut i = 0;
            while let Some(word) = rest.get(i) {
                let text = word.text.as_str();
                i += 1;
                if operands_only || word.tilde || !text.starts_with('-') {
                    if verb == "push" {
                        operand(word, scope, fx, &mut Vec::new())?;
                    }
                    continue;
                }
                match text {
                    "--" => operands_only = true,
                    "-m" | "--message" => i += 1,
                    _ if text.starts_with("--message=") => {}
                    _ if FLAGS.contains(&text) => {}
                    _ => {
                        return Err(format!(
                            "runs `git stash {verb}` with `{}`, which the judge does not know to be harmless",
                            show(text)
                        ))
                    }
                }
            }
            fx.implicit_edit = true;
            Ok(())
        }
        _ => Err(format!(
            "runs `git stash {}`; only push, list and show keep the work (drop, clear, pop and apply change or discard it)",
            show(verb)
        )),
    }
}

/// `git checkout -b NAME`, `git switch -c NAME`: a new branch at the current commit, which
/// leaves the working tree as it is (a start point would check out other files).
fn new_branch(sub: &str, flag: &str, args: &[Word]) -> Result<(), String> {
    let long = if sub == "switch" { "--create" } else { flag };
    match args {
        [option, name] if (option.text == flag || option.text == long) && branch_name(name) => Ok(()),
        _ => Err(format!(
            "runs `git {sub}` other than `git {sub} {flag} <new branch>`; it can discard work or check out other files"
        )),
    }
}

/// A plain branch name: letters, digits and `_ . / -`, not an option, no `..`.
fn branch_name(word: &Word) -> bool {
    let text = word.text.as_str();
    !word.tilde
        && !word.glob
        && !text.is_empty()
        && !text.starts_with('-')
        && !text.contains("..")
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'-'))
}

fn read_only(sub: &str, args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let mut operands_only = false;
    let mut excluded: Vec<String> = Vec::new();
    for word in args {
        let text = word.text.as_str();
        if operands_only || word.tilde || !text.starts_with('-') || text == "-" {
            operand(word, scope, fx, &mut excluded)?;
            continue;
        }
        if text == "--" {
            operands_only = true;
            continue;
        }
        if let Some(long) = text.strip_prefix("--") {
            let name = long
                .split_once('=')
                .map_or(long, |(name, _)| name)
                .to_ascii_lowercase();
            // git expands a unique prefix of a long option: `--out` is `--output`.
            let hit = REFUSED_LONG
                .iter()
                .any(|refused| !name.is_empty() && refused.starts_with(name.as_str()));
            if hit {
                return Err(format!(
                    "runs `git {sub}` with `{}`, which can write files, run programs or read outside the repository",
                    show(text)
                ));
            }
            // `--orderfile=FILE` and the like: a value that may be a file is read.
            if let Some((_, value)) = long.split_once('=') {
                option_value(sub, value, scope, fx)?;
            }
            continue;
        }
        if text[1..].contains(|c| refused_letters(sub).contains(c)) {
            return Err(format!(
                "runs `git {sub}` with `{}`, which can read other files or run a pager",
                show(text)
            ));
        }
    }
    let excluded: Vec<&str> = excluded.iter().map(String::as_str).collect();
    filters::excludes("git", &excluded)
}

/// An option's value that may name a file: read when it may leave the working directory,
/// and never a sensitive name.
fn option_value(sub: &str, value: &str, scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    if value.starts_with('/') || value.split('/').any(|part| part == "..") {
        scope.read(fx, Arg::plain(value, false))?;
    }
    match paths::sensitive(&format!("/{value}")) {
        Some(what) => Err(format!(
            "runs `git {sub}` with an option naming a sensitive file ({what}): {}",
            show(value)
        )),
        None => Ok(()),
    }
}

/// An operand that may be a path or a pathspec: inside when it could leave, never a
/// sensitive name, and, with its magic taken off, never a pattern singling out secrets;
/// `exclude` pathspecs are collected into `excluded`.
fn operand(
    word: &Word,
    scope: &Scope<'_>,
    fx: &mut Effects,
    excluded: &mut Vec<String>,
) -> Result<(), String> {
    let text = word.text.as_str();
    let (body, exclude) = filters::pathspec_body(text);
    let mut candidates = vec![body];
    if body == text {
        if let Some((_, path)) = text.split_once(':') {
            candidates.push(path);
        }
    }
    if exclude {
        excluded.push(body.to_owned());
    }
    for candidate in candidates {
        let leaves = word.tilde
            || candidate.starts_with('/')
            || candidate.starts_with('~')
            || candidate.split('/').any(|part| part == "..");
        if leaves {
            let tilde = word.tilde && candidate == text;
            scope.read(
                fx,
                Arg {
                    text: candidate,
                    tilde,
                    glob: word.glob && candidate == text,
                },
            )?;
        }
        if let Some(what) = paths::sensitive(&format!("/{candidate}")) {
            return Err(format!(
                "runs `git` on a sensitive file ({what}): {}",
                show(candidate)
            ));
        }
        if !exclude {
            filters::pathspec(candidate)?;
        }
    }
    Ok(())
}

/// `git branch` in its listing forms only.
fn branch(args: &[Word]) -> Result<(), String> {
    const FLAGS: [&str; 16] = [
        "-a",
        "-r",
        "-v",
        "-vv",
        "-l",
        "-i",
        "--list",
        "--all",
        "--remotes",
        "--verbose",
        "--show-current",
        "--no-color",
        "--column",
        "--no-column",
        "--ignore-case",
        "--no-abbrev",
    ];
    const VALUED: [&str; 7] = [
        "--contains",
        "--no-contains",
        "--merged",
        "--no-merged",
        "--points-at",
        "--sort",
        "--format",
    ];
    let listing = args
        .iter()
        .any(|w| matches!(w.text.as_str(), "-l" | "--list"));
    let mut i = 0;
    while i < args.len() {
        let text = args[i].text.as_str();
        i += 1;
        let name = text.split_once('=').map_or(text, |(name, _)| name);
        if FLAGS.contains(&text) || name == "--color" || name == "--abbrev" {
            continue;
        }
        if VALUED.contains(&name) {
            if name == text && args.get(i).is_some_and(|next| !next.text.starts_with('-')) {
                i += 1;
            }
            continue;
        }
        if listing && !text.starts_with('-') {
            continue;
        }
        return Err(format!(
            "runs `git branch` with `{}`; only listing branches is in the safe set",
            show(text)
        ));
    }
    Ok(())
}

/// `git add <paths>`: a local write of the index.
fn add(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    const FLAGS: [&str; 11] = [
        "-A",
        "--all",
        "-u",
        "--update",
        "-v",
        "--verbose",
        "-n",
        "--dry-run",
        "-N",
        "--intent-to-add",
        "--no-all",
    ];
    let mut operands_only = false;
    for word in args {
        let text = word.text.as_str();
        if operands_only || word.tilde || !text.starts_with('-') {
            scope.write(fx, Arg::from(word))?;
            continue;
        }
        if text == "--" {
            operands_only = true;
            continue;
        }
        if !FLAGS.contains(&text) {
            return Err(format!(
                "runs `git add` with `{}`, which the judge does not know to be harmless",
                show(text)
            ));
        }
    }
    fx.implicit_edit = true;
    Ok(())
}

/// `git commit -m MESSAGE [-a] [-- paths]`. `--amend` (rewrites a commit that may be shared)
/// and `--no-verify`/`-n` (skips the checks the repository's hooks make) are refused.
fn commit(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let mut message = false;
    let mut operands_only = false;
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let text = word.text.as_str();
        i += 1;
        if operands_only || word.tilde || !text.starts_with('-') {
            scope.write(fx, Arg::from(word))?;
            continue;
        }
        match text {
            "--" => operands_only = true,
            "-a" | "--all" | "-q" | "--quiet" | "-s" | "--signoff" | "--allow-empty"
            | "--no-edit" => {}
            "-m" | "--message" => {
                args.get(i)
                    .ok_or("runs `git commit -m` without a message")?;
                i += 1;
                message = true;
            }
            _ if text.starts_with("--message=") => message = true,
            _ if !text.starts_with("--") => {
                // A short cluster: flags, then `m` whose value is the rest or the next word.
                for (at, letter) in text[1..].char_indices() {
                    match letter {
                        'a' | 'q' | 's' => {}
                        'm' => {
                            if at + 2 == text.len() {
                                args.get(i)
                                    .ok_or("runs `git commit -m` without a message")?;
                                i += 1;
                            }
                            message = true;
                            break;
                        }
                        _ => return Err(commit_option(text)),
                    }
                }
            }
            _ => return Err(commit_option(text)),
        }
    }
    if !message {
        return Err("runs `git commit` without `-m`; it would open an editor".to_owned());
    }
    fx.implicit_edit = true;
    Ok(())
}

fn commit_option(text: &str) -> String {
    match text {
        "--amend" => {
            "runs `git commit --amend`, which rewrites a commit that may already be shared"
                .to_owned()
        }
        "--no-verify" | "-n" => {
            "runs `git commit --no-verify`, which skips the repository's commit checks".to_owned()
        }
        _ => format!(
            "runs `git commit` with `{}`, which the judge does not know to be harmless",
            show(text)
        ),
    }
}
