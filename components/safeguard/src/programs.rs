//! The closed safe set: the programs a simple command may run without asking, each with the
//! arguments it may take. Kept in step with the table in `docs/safeguard.md`.
//!
//! Invariants:
//! - A program is known by its plain name, or as an installed tool of the set given by its
//!   place (`node_modules/.bin/jest`, `node node_modules/jest/bin/jest.js`,
//!   `.venv/bin/pytest`, [`crate::installed`]) or by `npx`; it is then judged as that tool. Any
//!   other word with a `/` or a leading `~` in command position is never in the set.
//! - A program that hands arguments on to code the judge does not see (package scripts,
//!   `cargo ... --`, `go test -args`, `node FILE`, `python FILE`, test runners' filters,
//!   `make` targets) has each of them checked by [`crate::handed`].
//! - Output is bounded where a program prints what it computes ([`crate::bounds`]); filters
//!   that name files may not single out secrets ([`crate::filters`]).
//! - Every operand or option value a program reads as a file goes through [`Scope::read`]
//!   (inside a trusted directory, not sensitive) in every working directory the command may
//!   run in; every file it writes goes through [`Scope::write`]. Where it is unclear whether a
//!   word is a value or a file, it is checked as a file: an extra check can only flag.
//! - Programs other than the pure ones (`echo`, `printf`, `pwd`, `true`, `false`, `date`,
//!   `whoami`, `id`, `which`, `basename`, `dirname`, `tr`) run only in working directories
//!   inside the trusted directories, because they read or run what is there.
//! - Running the project's own tests and builds runs the project's code, which the agent may
//!   have edited: that is accepted, as Claude Code's own classifier accepts it. What can pick
//!   another project, another shell or more code than the project's is refused (`npm --prefix`,
//!   `cargo --manifest-path`, `node -e`, `go test <import path>`, `make -f` outside, `VAR=`
//!   operands, installed code the judge does not know).

use crate::bounds;
use crate::fileops;
use crate::filters;
use crate::git;
use crate::handed;
use crate::installed::{self, Installed};
use crate::options::{self, Arg, Parsed, Spec};
use crate::paths;
use crate::rules::{may_climb, targets_sensitive};
use crate::scope::{Effects, Scope};
use crate::shell::Word;
use crate::verdict::show;

/// Programs that read no files and run nothing: they pass in any working directory.
pub(crate) const PURE: [&str; 13] = [
    "pwd", "true", "false", "echo", "printf", "date", "whoami", "id", "which", "basename",
    "dirname", "tr", "seq",
];

/// Shells: `-V` may not mean "version" to them.
const SHELLS: [&str; 8] = ["sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh"];

/// Programs whose `-v` alone prints their version.
const VERSION_V: [&str; 7] = ["node", "npm", "npx", "yarn", "pnpm", "tsc", "deno"];

/// Programs that run the project's code (scripts, builds, tests, tools that load the
/// project's configuration as code).
const RUNS_CODE: [&str; 16] = [
    "npm", "yarn", "pnpm", "node", "cargo", "go", "pytest", "python", "python3", "make", "tsc",
    "eslint", "prettier", "jest", "vitest", "gofmt",
];

/// Judges one simple command's program and arguments.
pub(crate) fn judge(
    program: &Word,
    args: &[Word],
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(), String> {
    let (name, args) = what_runs(program, args, scope, fx)?;
    if is_version_query(name, args) {
        scope.cwd_inside(name)?;
        return Ok(());
    }
    // `cd` resolves its own operand; where the line was before does not matter to it.
    if !PURE.contains(&name) && name != "cd" && is_known(name) {
        scope.cwd_inside(name)?;
    }
    fx.runs_code |= RUNS_CODE.contains(&name);
    match name {
        "true" | "false" | "echo" => Ok(()),
        "printf" => printf(args),
        "seq" => {
            let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
            bounds::seq(&texts)
        }
        "mkdir" | "touch" | "tee" => fileops::create(name, args, scope, fx),
        "cp" | "mv" => fileops::copy_or_move(name, args, scope, fx),
        "gofmt" => gofmt(args, scope, fx),
        "pwd" => no_operands(name, &options::parse(name, args, &PWD)?),
        "whoami" => match args.is_empty() {
            true => Ok(()),
            false => Err("runs `whoami` with arguments".to_owned()),
        },
        "id" => id(args),
        "which" => options::parse(name, args, &WHICH).map(drop),
        "basename" => options::parse(name, args, &BASENAME).map(drop),
        "dirname" => options::parse(name, args, &DIRNAME).map(drop),
        "tr" => tr(args),
        "date" => date(args),
        "realpath" => read_all(name, args, &REALPATH, scope, fx).map(drop),
        "cd" => cd(args, scope, fx),
        "ls" => read_all(name, args, &LS, scope, fx).map(drop),
        "cat" => read_all(name, args, &CAT, scope, fx).map(drop),
        "head" => read_all(name, args, &HEAD, scope, fx).map(drop),
        "tail" => read_all(name, args, &TAIL, scope, fx).map(drop),
        "wc" => read_all(name, args, &WC, scope, fx).map(drop),
        "file" => read_all(name, args, &FILE, scope, fx).map(drop),
        "stat" => read_all(name, args, &STAT, scope, fx).map(drop),
        "du" => read_all(name, args, &DU, scope, fx).map(drop),
        "tree" => read_all(name, args, &TREE, scope, fx).map(drop),
        "diff" => read_all(name, args, &DIFF, scope, fx).map(drop),
        "cmp" => read_all(name, args, &CMP, scope, fx).map(drop),
        "sort" => read_all(name, args, &SORT, scope, fx).map(drop),
        "cut" => read_all(name, args, &CUT, scope, fx).map(drop),
        "nl" => read_all(name, args, &NL, scope, fx).map(drop),
        "uniq" => uniq(args, scope, fx),
        "grep" | "egrep" | "fgrep" => {
            grep(name, args, &GREP, &["e", "f", "regexp", "file"], scope, fx)
        }
        "rg" => rg(args, scope, fx),
        "find" => find(args, scope, fx),
        "jq" => jq(args, scope, fx),
        "sed" => sed(args, scope, fx),
        "git" => git::judge(args, scope, fx),
        "npm" | "yarn" | "pnpm" => package_script(name, args, scope, fx),
        "node" => node(args, scope, fx),
        "cargo" => cargo(args, scope, fx),
        "go" => go(args, scope, fx),
        "pytest" => pytest(args, scope, fx),
        "python" | "python3" => python(name, args, scope, fx),
        "make" => make(args, scope, fx),
        "tsc" => tsc(args, scope, fx),
        "eslint" => eslint(args, scope, fx),
        "prettier" => prettier(args, scope, fx),
        "jest" => jest(args, scope, fx),
        "vitest" => vitest(args, scope, fx),
        other => Err(not_in_safe_set(other)),
    }
}

/// `printf`: never `-v` (it would set a shell variable); its format's output is bounded.
fn printf(args: &[Word]) -> Result<(), String> {
    let args = match args.first() {
        Some(first) if first.text == "-v" => {
            return Err("runs `printf -v`, which sets a shell variable".to_owned())
        }
        Some(first) if first.text == "--" => &args[1..],
        _ => args,
    };
    match args.first() {
        Some(format) => bounds::printf_format("printf", &format.text),
        None => Ok(()),
    }
}

/// `id`: at most one user.
fn id(args: &[Word]) -> Result<(), String> {
    let parsed = options::parse("id", args, &ID)?;
    if parsed.operands.len() > 1 {
        return Err("runs `id` with more than one user".to_owned());
    }
    Ok(())
}

/// `tr`: at most two sets (it reads only its input).
fn tr(args: &[Word]) -> Result<(), String> {
    let parsed = options::parse("tr", args, &TR)?;
    match parsed.operands.len() {
        0..=2 => Ok(()),
        _ => Err("runs `tr` with more than two sets".to_owned()),
    }
}

/// `uniq`: its input files are read; a second operand would be its output, which it would
/// overwrite.
fn uniq(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let parsed = options::parse("uniq", args, &UNIQ)?;
    // A glob (or names `xargs` appends) could become a second operand: the output.
    if parsed.operands.len() > 1 || parsed.operands.iter().any(|a| a.glob) {
        return Err("runs `uniq` with an output file, which it would overwrite".to_owned());
    }
    read_operands(&parsed, 0, scope, fx)
}

/// The program a command runs and the arguments it gets: an installed tool given by its path
/// (`node_modules/.bin/jest`, `node node_modules/jest/bin/jest.js`, `.venv/bin/pytest`) and
/// `npx TOOL` are that tool; any other program given by its path is refused.
fn what_runs<'a>(
    program: &'a Word,
    args: &'a [Word],
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(&'a str, &'a [Word]), String> {
    let name = program.text.as_str();
    if program.tilde || name.contains('/') {
        let tool = installed_tool(Arg::from(program), installed::program, scope, fx)?;
        return tool.map(|tool| (tool, args)).ok_or_else(|| {
            format!(
                "runs a program by its path (`{}`); only plain program names and installed tools can be in the safe set",
                show(&program.display())
            )
        });
    }
    match name {
        "npx" => npx(args),
        "node" => match args.split_first() {
            Some((script, rest)) if script.tilde || !script.text.starts_with('-') => {
                match installed_tool(Arg::from(script), installed::script, scope, fx)? {
                    Some(tool) => Ok((tool, rest)),
                    None => Ok((name, args)),
                }
            }
            _ => Ok((name, args)),
        },
        _ => Ok((name, args)),
    }
}

/// The tool an installed path is, in every working directory (`None`: not installed code);
/// installed code the judge does not know is refused.
fn installed_tool(
    path: Arg<'_>,
    what: fn(&str) -> Installed,
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<Option<&'static str>, String> {
    let resolved = scope
        .resolve(path)
        .map_err(|p| p.sentence(paths::Access::Read))?;
    let mut found: Option<&'static str> = None;
    for (i, path) in resolved.iter().enumerate() {
        match what(path) {
            Installed::No if i == 0 => return Ok(None),
            Installed::Tool(tool) if found.is_none_or(|seen| seen == tool) => found = Some(tool),
            Installed::Unknown(tail) => {
                return Err(format!(
                    "runs installed code the judge does not know (`{}`); installed programs pass only as the tools of the safe set",
                    show(&tail)
                ))
            }
            _ => {
                return Err(
                    "runs a program whose path means different things in the directories the line may be in"
                        .to_owned(),
                )
            }
        }
    }
    if found.is_some() {
        scope.read(fx, path)?;
    }
    Ok(found)
}

/// `npx [--no-install | --no] TOOL ...` for a node tool of the safe set: npx runs the
/// project's installed copy; when there is none it fetches the registry package of that name.
fn npx(args: &[Word]) -> Result<(&str, &[Word]), String> {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        match word.text.as_str() {
            "--no-install" | "--no" | "--offline" => i += 1,
            _ => break,
        }
    }
    match args.get(i) {
        Some(tool) if !tool.tilde && installed::NODE_TOOLS.contains(&tool.text.as_str()) => {
            Ok((tool.text.as_str(), &args[i + 1..]))
        }
        Some(other) => Err(format!(
            "runs `npx {}`; npx passes only the node tools of the safe set (tsc, jest, vitest, eslint, prettier), anything else may be downloaded and run",
            show(&other.display())
        )),
        None => Err("runs `npx` without a program".to_owned()),
    }
}

/// `PROGRAM --version`, `PROGRAM -V` (not a shell's), `node -v` and the like, `go version`:
/// a version query runs nothing else.
fn is_version_query(name: &str, args: &[Word]) -> bool {
    match args {
        [only] if !only.tilde => match only.text.as_str() {
            "--version" => true,
            "-V" => !SHELLS.contains(&name),
            "-v" => VERSION_V.contains(&name),
            "version" => name == "go",
            _ => false,
        },
        _ => false,
    }
}

/// The names [`judge`] knows (pure or not).
fn is_known(name: &str) -> bool {
    const KNOWN: [&str; 46] = [
        "realpath", "cd", "ls", "cat", "head", "tail", "wc", "file", "stat", "du", "tree", "diff",
        "cmp", "sort", "cut", "nl", "uniq", "grep", "egrep", "fgrep", "rg", "find", "jq", "sed",
        "git", "npm", "yarn", "pnpm", "node", "cargo", "go", "pytest", "python", "python3", "make",
        "tsc", "eslint", "prettier", "jest", "vitest", "mkdir", "touch", "tee", "cp", "mv",
        "gofmt",
    ];
    KNOWN.contains(&name)
}

/// Why a program outside the set is flagged.
pub(crate) fn not_in_safe_set(name: &str) -> String {
    let why = match name {
        "curl" | "wget" | "nc" | "ncat" | "netcat" | "socat" | "ssh" | "scp" | "sftp" | "rsync"
        | "ftp" | "telnet" | "http" | "https" | "xh" | "aria2c" | "mail" | "sendmail" => {
            "which can send data off this machine"
        }
        "rm" | "rmdir" | "unlink" | "dd" | "shred" | "truncate" | "ln" | "chmod" | "chown"
        | "chgrp" | "install" | "patch" | "fallocate" | "wipefs" | "fdisk" | "parted" | "mount"
        | "umount" => "which can change or delete files",
        _ if name.starts_with("mkfs") => "which can change or delete files",
        "sudo" | "su" | "doas" | "pkexec" | "runuser" => "which runs commands as another user",
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "fish" | "csh" | "tcsh" | "perl" | "ruby"
        | "php" | "lua" | "awk" | "gawk" | "mawk" | "nawk" | "osascript" | "pwsh" | "deno"
        | "bun" | "tclsh" | "python2" | "irb" | "R" | "Rscript" => "which runs code given to it",
        "env" | "xargs" | "nohup" | "timeout" | "watch" | "nice" | "ionice" | "command"
        | "builtin" | "exec" | "eval" | "source" | "." | "stdbuf" | "setsid" | "chroot"
        | "unshare" | "strace" | "ltrace" | "gdb" | "lldb" | "script" | "parallel" | "alias"
        | "trap" | "export" | "set" | "unset" | "shopt" | "setopt" | "declare" | "typeset"
        | "local" | "readonly" | "hash" | "enable" | "fc" | "history" => {
            "which runs or changes other commands"
        }
        "pnpx" | "bunx" | "pip" | "pip3" | "pipx" | "uv" | "uvx" | "brew" | "apt" | "apt-get"
        | "yum" | "dnf" | "pacman" | "apk" | "snap" | "gem" | "twine" | "poetry" | "conda"
        | "rustup" | "corepack" => "which can download, install or publish software",
        "kill" | "pkill" | "killall" | "shutdown" | "reboot" | "halt" | "systemctl" | "service"
        | "launchctl" | "crontab" | "at" | "batch" => {
            "which changes processes, services or schedules"
        }
        "docker" | "podman" | "kubectl" | "helm" | "terraform" | "aws" | "gcloud" | "az" | "gh"
        | "glab" => "which controls remote services or containers",
        "base64" | "xxd" | "openssl" | "gpg" | "uudecode" => {
            "which can decode hidden content or handle keys"
        }
        "yes" => "which prints without end",
        "printenv" => "which prints the environment, where secrets live",
        _ => "which is not in the judge's safe set",
    };
    format!("runs `{}`, {why}", show(name))
}

fn no_operands(name: &str, parsed: &Parsed<'_>) -> Result<(), String> {
    match parsed.operands.is_empty() {
        true => Ok(()),
        false => Err(format!("runs `{name}` with operands")),
    }
}

/// Options by table; every path value and every operand (but `-`) is a file read.
fn read_all<'w>(
    name: &str,
    args: &'w [Word],
    spec: &Spec,
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<Parsed<'w>, String> {
    let parsed = options::parse(name, args, spec)?;
    read_operands(&parsed, 0, scope, fx)?;
    Ok(parsed)
}

/// Reads the path values and the operands from the `skip`-th on.
fn read_operands(
    parsed: &Parsed<'_>,
    skip: usize,
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(), String> {
    for path in &parsed.paths {
        scope.read(fx, *path)?;
    }
    for operand in parsed.operands.iter().skip(skip) {
        if operand.text == "-" && !operand.tilde {
            continue;
        }
        scope.read(fx, *operand)?;
    }
    Ok(())
}

/// A file operand a program expands as a pattern itself (eslint, prettier): its fixed
/// directory is read, and the pattern part may not climb out or name a sensitive file.
fn read_pattern(arg: Arg<'_>, scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let text = arg.text;
    let Some(at) = text.find(['*', '?', '[', '{']) else {
        return scope.read(fx, arg);
    };
    let (dir, tail) = match text[..at].rfind('/') {
        Some(0) => ("/", &text[1..]),
        Some(slash) => (&text[..slash], &text[slash + 1..]),
        None if arg.tilde => ("", text),
        None => (".", text),
    };
    if may_climb(tail) {
        return Err(format!(
            "reads files by a pattern that may reach outside its directory: {}",
            show(text)
        ));
    }
    if let Some(what) = targets_sensitive(tail) {
        return Err(format!(
            "reads files by a pattern that singles out sensitive files ({what})"
        ));
    }
    scope.read(fx, Arg::plain(dir, arg.tilde))
}

// Option tables. A short option listed as a flag when a program actually takes a value for
// it only makes the judge check that value as a file too; the reverse would hide a file, so
// `values` holds only options that take a value in every common implementation (GNU, BSD).

const LS: Spec = Spec {
    flags: "aAbBcCdDefFgGhHiIklLmnNoOpPqQrRsStTuUvwxXZ1@",
    long_flags: &[
        "all",
        "almost-all",
        "author",
        "escape",
        "ignore-backups",
        "directory",
        "classify",
        "file-type",
        "human-readable",
        "si",
        "inode",
        "dereference",
        "dereference-command-line",
        "numeric-uid-gid",
        "literal",
        "hide-control-chars",
        "show-control-chars",
        "quote-name",
        "recursive",
        "reverse",
        "size",
        "group-directories-first",
        "full-time",
        "color",
        "no-group",
        "kibibytes",
        "context",
        "zero",
        "indicator-style",
        "format",
        "sort",
        "time",
        "time-style",
        "quoting-style",
        "block-size",
        "hide",
        "ignore",
        "tabsize",
        "width",
        "hyperlink",
    ],
    ..EMPTY
};

const EMPTY: Spec = Spec {
    flags: "",
    values: "",
    paths: "",
    long_flags: &[],
    long_values: &[],
    long_paths: &[],
    numeric: false,
    attached: true,
};

const PWD: Spec = Spec {
    flags: "LP",
    ..EMPTY
};

const ID: Spec = Spec {
    flags: "ugGnrzZa",
    long_flags: &["user", "group", "groups", "name", "real", "zero", "context"],
    ..EMPTY
};

const WHICH: Spec = Spec {
    flags: "as",
    long_flags: &["all"],
    ..EMPTY
};

const BASENAME: Spec = Spec {
    flags: "az",
    values: "s",
    long_flags: &["multiple", "zero", "suffix"],
    ..EMPTY
};

const DIRNAME: Spec = Spec {
    flags: "z",
    long_flags: &["zero"],
    ..EMPTY
};

const TR: Spec = Spec {
    flags: "cCdst",
    long_flags: &["complement", "delete", "squeeze-repeats", "truncate-set1"],
    ..EMPTY
};

const REALPATH: Spec = Spec {
    flags: "emsqzLP",
    long_flags: &[
        "canonicalize-existing",
        "canonicalize-missing",
        "logical",
        "physical",
        "quiet",
        "strip",
        "no-symlinks",
        "zero",
    ],
    long_paths: &["relative-to", "relative-base"],
    ..EMPTY
};

const CAT: Spec = Spec {
    flags: "AbeEnstTuv",
    long_flags: &[
        "show-all",
        "number-nonblank",
        "show-ends",
        "number",
        "squeeze-blank",
        "show-tabs",
        "show-nonprinting",
    ],
    ..EMPTY
};

const HEAD: Spec = Spec {
    flags: "qvz",
    values: "nc",
    long_flags: &[
        "quiet",
        "silent",
        "verbose",
        "zero-terminated",
        "lines",
        "bytes",
    ],
    numeric: true,
    ..EMPTY
};

const TAIL: Spec = Spec {
    flags: "qvzr",
    values: "nc",
    long_flags: &[
        "quiet",
        "silent",
        "verbose",
        "zero-terminated",
        "lines",
        "bytes",
    ],
    numeric: true,
    ..EMPTY
};

const WC: Spec = Spec {
    flags: "clmwL",
    long_flags: &[
        "bytes",
        "chars",
        "lines",
        "words",
        "max-line-length",
        "total",
    ],
    ..EMPTY
};

const FILE: Spec = Spec {
    flags: "bhiLkNnpsSzZ0",
    long_flags: &[
        "brief",
        "mime",
        "mime-type",
        "mime-encoding",
        "dereference",
        "no-dereference",
        "keep-going",
        "no-pad",
        "preserve-date",
        "special-files",
        "uncompress",
        "uncompress-noreport",
        "raw",
        "print0",
        "extension",
        "apple",
    ],
    ..EMPTY
};

const STAT: Spec = Spec {
    flags: "LftcFlnqrsx",
    long_flags: &[
        "dereference",
        "file-system",
        "format",
        "printf",
        "terse",
        "cached",
    ],
    ..EMPTY
};

const DU: Spec = Spec {
    flags: "0abcDhHklLmPsSxdtBAgnrI",
    long_flags: &[
        "all",
        "apparent-size",
        "block-size",
        "bytes",
        "total",
        "dereference-args",
        "human-readable",
        "inodes",
        "dereference",
        "count-links",
        "max-depth",
        "si",
        "separate-dirs",
        "summarize",
        "threshold",
        "time",
        "time-style",
        "exclude",
        "one-file-system",
        "null",
    ],
    ..EMPTY
};

const TREE: Spec = Spec {
    flags: "adlfxLPICnhsDFpugiJXq",
    long_flags: &[
        "noreport",
        "gitignore",
        "dirsfirst",
        "filesfirst",
        "prune",
        "matchdirs",
        "ignore-case",
        "du",
        "si",
        "sort",
        "filelimit",
        "charset",
    ],
    ..EMPTY
};

const DIFF: Spec = Spec {
    flags: "iEZbwBIaucCqsyWtTrNpFxXSenldUD",
    long_flags: &[
        "ignore-case",
        "ignore-tab-expansion",
        "ignore-trailing-space",
        "ignore-space-change",
        "ignore-all-space",
        "ignore-blank-lines",
        "ignore-matching-lines",
        "text",
        "unified",
        "context",
        "brief",
        "report-identical-files",
        "side-by-side",
        "width",
        "expand-tabs",
        "initial-tab",
        "recursive",
        "new-file",
        "unidirectional-new-file",
        "show-c-function",
        "show-function-line",
        "exclude",
        "label",
        "color",
        "minimal",
        "speed-large-files",
        "strip-trailing-cr",
        "suppress-common-lines",
        "left-column",
        "no-dereference",
        "normal",
        "ed",
        "rcs",
        "paginate",
        "ifdef",
        "line-format",
        "old-line-format",
        "new-line-format",
        "unchanged-line-format",
        "old-group-format",
        "new-group-format",
        "changed-group-format",
        "unchanged-group-format",
        "horizon-lines",
        "tabsize",
        "suppress-blank-empty",
        "starting-file",
    ],
    long_paths: &["from-file", "to-file", "exclude-from"],
    ..EMPTY
};

const CMP: Spec = Spec {
    flags: "bilsnvx",
    long_flags: &[
        "print-bytes",
        "ignore-initial",
        "verbose",
        "bytes",
        "quiet",
        "silent",
    ],
    ..EMPTY
};

const SORT: Spec = Spec {
    flags: "bdfgiMhnRrVcCmsuz",
    values: "ktS",
    long_flags: &[
        "ignore-leading-blanks",
        "dictionary-order",
        "ignore-case",
        "general-numeric-sort",
        "ignore-nonprinting",
        "month-sort",
        "human-numeric-sort",
        "numeric-sort",
        "random-sort",
        "reverse",
        "version-sort",
        "check",
        "merge",
        "stable",
        "unique",
        "zero-terminated",
        "sort",
        "parallel",
        "debug",
        "buffer-size",
        "field-separator",
        "key",
    ],
    long_paths: &["random-source"],
    ..EMPTY
};

const UNIQ: Spec = Spec {
    flags: "cdDiuz",
    values: "fsw",
    long_flags: &[
        "count",
        "repeated",
        "all-repeated",
        "ignore-case",
        "unique",
        "zero-terminated",
        "group",
        "skip-fields",
        "skip-chars",
        "check-chars",
    ],
    ..EMPTY
};

const CUT: Spec = Spec {
    flags: "nsz",
    values: "bcfd",
    long_flags: &[
        "bytes",
        "characters",
        "fields",
        "delimiter",
        "complement",
        "only-delimited",
        "output-delimiter",
        "zero-terminated",
    ],
    ..EMPTY
};

const NL: Spec = Spec {
    flags: "p",
    values: "bdfhilnsvw",
    long_flags: &[
        "body-numbering",
        "section-delimiter",
        "footer-numbering",
        "header-numbering",
        "line-increment",
        "join-blank-lines",
        "number-format",
        "no-renumber",
        "number-separator",
        "starting-line-number",
        "number-width",
    ],
    ..EMPTY
};

const GREP: Spec = Spec {
    flags: "EFGPiyvwxcLlmoqsbHhnTZzrRUaIABCdDV0123456789",
    values: "e",
    paths: "f",
    long_flags: &[
        "extended-regexp",
        "fixed-strings",
        "basic-regexp",
        "perl-regexp",
        "ignore-case",
        "no-ignore-case",
        "invert-match",
        "word-regexp",
        "line-regexp",
        "count",
        "color",
        "colour",
        "files-without-match",
        "files-with-matches",
        "max-count",
        "only-matching",
        "quiet",
        "silent",
        "no-messages",
        "byte-offset",
        "with-filename",
        "no-filename",
        "label",
        "line-number",
        "initial-tab",
        "null",
        "null-data",
        "text",
        "binary-files",
        "devices",
        "directories",
        "recursive",
        "dereference-recursive",
        "after-context",
        "before-context",
        "context",
        "line-buffered",
        "binary",
        "no-group-separator",
        "group-separator",
    ],
    long_values: &["regexp", "include", "exclude", "exclude-dir"],
    long_paths: &["file", "exclude-from"],
    ..EMPTY
};

const RG: Spec = Spec {
    flags: "0.ABCEFHILMNPSTUabcdhijlmnopqrstuvwxz",
    values: "eg",
    paths: "f",
    long_flags: &[
        "hidden",
        "no-hidden",
        "no-ignore",
        "no-ignore-vcs",
        "no-ignore-dot",
        "no-ignore-global",
        "no-ignore-parent",
        "no-ignore-files",
        "no-ignore-exclude",
        "ignore-case",
        "smart-case",
        "case-sensitive",
        "fixed-strings",
        "word-regexp",
        "line-regexp",
        "count",
        "count-matches",
        "files",
        "files-with-matches",
        "files-without-match",
        "line-number",
        "no-line-number",
        "only-matching",
        "quiet",
        "heading",
        "no-heading",
        "with-filename",
        "no-filename",
        "color",
        "colors",
        "type",
        "type-not",
        "type-list",
        "glob-case-insensitive",
        "max-count",
        "max-depth",
        "max-filesize",
        "context",
        "after-context",
        "before-context",
        "context-separator",
        "field-match-separator",
        "field-context-separator",
        "replace",
        "json",
        "vimgrep",
        "column",
        "no-column",
        "no-messages",
        "follow",
        "sort",
        "sortr",
        "stats",
        "trim",
        "multiline",
        "multiline-dotall",
        "pcre2",
        "no-pcre2",
        "invert-match",
        "null",
        "null-data",
        "text",
        "binary",
        "unrestricted",
        "max-columns",
        "max-columns-preview",
        "no-config",
        "engine",
        "passthru",
        "byte-offset",
        "crlf",
        "encoding",
        "search-zip",
        "threads",
        "one-file-system",
        "pretty",
        "include-zero",
        "no-require-git",
        "auto-hybrid-regex",
        "path-separator",
        "dfa-size-limit",
        "regex-size-limit",
        "version",
        "help",
    ],
    long_values: &["regexp", "glob", "iglob"],
    long_paths: &["file", "ignore-file"],
    ..EMPTY
};

/// `grep`-like: the first operand is the pattern unless a pattern option was given; the
/// `--include` filters may not single out secrets, nor the `--exclude` ones leave only them.
fn grep(
    name: &str,
    args: &[Word],
    spec: &Spec,
    pattern_options: &[&str],
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(), String> {
    let parsed = options::parse(name, args, spec)?;
    let mut excluded: Vec<&str> = Vec::new();
    for (option, value) in &parsed.options {
        match (option.as_str(), value) {
            ("include", Some(pattern)) => filters::include(name, pattern)?,
            ("exclude" | "exclude-dir", Some(pattern)) => excluded.push(pattern),
            _ => {}
        }
    }
    filters::excludes(name, &excluded)?;
    // `--include=*.rs` unquoted: the shell could only expand it to words that begin with
    // `--include=` and match the pattern, so grep gets the filter checked above.
    for word in args.iter().filter(|w| w.glob) {
        let filter = ["--include=", "--exclude=", "--exclude-dir="]
            .iter()
            .any(|prefix| word.text.starts_with(prefix));
        if filter {
            fx.globbed
                .push((word.text.as_ptr() as usize, word.text.len()));
        }
    }
    let skip = usize::from(!pattern_options.iter().any(|option| parsed.has(option)));
    read_operands(&parsed, skip, scope, fx)
}

fn rg(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let parsed = options::parse("rg", args, &RG)?;
    let mut excluded: Vec<String> = Vec::new();
    for (option, value) in &parsed.options {
        if let ("g" | "glob" | "iglob", Some(pattern)) = (option.as_str(), value) {
            filters::rg_glob(pattern, &mut excluded)?;
        }
    }
    let excluded: Vec<&str> = excluded.iter().map(String::as_str).collect();
    filters::excludes("rg", &excluded)?;
    let no_pattern = ["e", "f", "regexp", "file", "files", "type-list"]
        .iter()
        .any(|option| parsed.has(option));
    read_operands(&parsed, usize::from(!no_pattern), scope, fx)
}

fn cd(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let parsed = options::parse(
        "cd",
        args,
        &Spec {
            flags: "LP",
            ..EMPTY
        },
    )?;
    let target = match parsed.operands.as_slice() {
        [] => Arg::plain("", true),
        [one] if one.text == "-" && !one.tilde => {
            return Err("runs `cd -`, whose target the judge cannot see".to_owned())
        }
        [one] if one.text.starts_with('+') && !one.tilde => {
            return Err(
                "runs `cd +N`, which zsh reads as a place in its directory stack".to_owned(),
            )
        }
        [one] => *one,
        _ => return Err("runs `cd` with more than one operand".to_owned()),
    };
    let targets = scope
        .resolve(target)
        .map_err(|p| format!("changes directory: {}", p.sentence(paths::Access::Read)))?;
    for target in &targets {
        paths::check_inside(scope.ctx, target).map_err(|_| {
            format!(
                "changes to a directory outside the trusted directories: {}",
                show(target)
            )
        })?;
    }
    fx.cd = Some(targets);
    Ok(())
}

fn date(args: &[Word]) -> Result<(), String> {
    let mut i = 0;
    while i < args.len() {
        let text = args[i].text.as_str();
        i += 1;
        match text {
            "-u" | "-R" | "--utc" | "--universal" | "--rfc-email" | "-j" => {}
            "-d" | "-v" | "--date" => i += 1,
            _ if ["-I", "--iso-8601", "--rfc-3339=", "--date="]
                .iter()
                .any(|prefix| text.starts_with(prefix)) => {}
            _ if text.starts_with('+') && !args[i - 1].tilde => {}
            _ => {
                return Err(format!(
                    "runs `date` with `{}`; only formats (`+...`) and `-u`, `-I`, `-R`, `-d` are known to leave the clock alone",
                    show(text)
                ))
            }
        }
    }
    Ok(())
}

fn find(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        match word.text.as_str() {
            _ if word.tilde => break,
            "-H" | "-L" | "-P" | "-E" | "-X" | "-d" | "-s" | "-x" => i += 1,
            "-D" => i += 2,
            text if text.starts_with("-O") => i += 1,
            "-f" => {
                return Err("runs `find -f`, whose start paths the judge does not read".to_owned())
            }
            _ => break,
        }
    }
    let is_expression = |word: &Word| {
        !word.tilde
            && (word.text.len() > 1 && word.text.starts_with('-')
                || matches!(word.text.as_str(), "(" | ")" | "!" | ","))
    };
    while let Some(word) = args.get(i) {
        if is_expression(word) {
            break;
        }
        scope.read(fx, Arg::from(word))?;
        i += 1;
    }
    let expression = &args[i.min(args.len())..];
    let mut excluded: Vec<&str> = Vec::new();
    for (at, word) in expression.iter().enumerate() {
        let text = word.text.as_str();
        // Tests that compare with another file read that file's metadata: it must be inside
        // too.
        let names_a_file =
            text.starts_with("-newer") || matches!(text, "-anewer" | "-cnewer" | "-samefile");
        if names_a_file {
            match expression.get(at + 1) {
                Some(file) => scope.read(fx, Arg::from(file))?,
                None => return Err(format!("runs `find` with `{}` and no file", show(text))),
            }
        }
        // Name tests may not single out secrets (`-name .env`); negated ones (`! -name`,
        // `-not -name`) are excluding filters.
        if matches!(
            text,
            "-name"
                | "-iname"
                | "-path"
                | "-ipath"
                | "-wholename"
                | "-iwholename"
                | "-lname"
                | "-ilname"
        ) {
            let pattern = expression
                .get(at + 1)
                .ok_or_else(|| format!("runs `find` with `{}` and no pattern", show(text)))?;
            let negated = at > 0 && matches!(expression[at - 1].text.as_str(), "!" | "-not");
            if negated {
                excluded.push(pattern.text.as_str());
            } else {
                filters::include("find", &pattern.text)?;
            }
        }
        if matches!(text, "-regex" | "-iregex") {
            return Err(format!(
                "runs `find` with `{}`; the judge cannot tell whether a regular expression singles out secrets",
                show(text)
            ));
        }
        let refused = text == "-delete"
            || text.starts_with("-exec")
            || text.starts_with("-ok")
            || text.starts_with("-fprint")
            || text == "-fls"
            || text.starts_with("-files0");
        if refused {
            return Err(format!(
                "runs `find` with `{}`, which can run programs, delete or write files",
                show(text)
            ));
        }
    }
    filters::excludes("find", &excluded)
}

fn jq(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    const LONG: [&str; 19] = [
        "--null-input",
        "--raw-input",
        "--slurp",
        "--compact-output",
        "--raw-output",
        "--raw-output0",
        "--join-output",
        "--ascii-output",
        "--sort-keys",
        "--color-output",
        "--monochrome-output",
        "--tab",
        "--seq",
        "--stream",
        "--stream-errors",
        "--exit-status",
        "--unbuffered",
        "--help",
        "--version",
    ];
    let mut filter: Option<&str> = None;
    let mut named_args = false;
    let mut operands_only = false;
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let text = word.text.as_str();
        i += 1;
        if operands_only || word.tilde || text == "-" || !text.starts_with('-') {
            if filter.is_none() && !word.tilde {
                filter = Some(text);
            } else if !named_args {
                scope.read(fx, Arg::from(word))?;
            }
            continue;
        }
        match text {
            "--" => operands_only = true,
            "--arg" | "--argjson" => i += 2,
            "--indent" => i += 1,
            "--slurpfile" | "--rawfile" => {
                let file = args
                    .get(i + 1)
                    .ok_or_else(|| format!("runs `jq {text}` without a file"))?;
                scope.read(fx, Arg::from(file))?;
                i += 2;
            }
            "--args" | "--jsonargs" => named_args = true,
            _ if LONG.contains(&text) => {}
            _ if text.len() > 1
                && !text.starts_with("--")
                && text[1..].chars().all(|c| "nrjascSCMeR0h".contains(c)) => {}
            _ => return Err(options::unknown("jq", text)),
        }
    }
    let filter = filter.ok_or("runs `jq` without a filter")?;
    check_jq_filter(filter)?;
    bounds::jq_filter(filter)
}

/// A jq filter may read the environment (`env`, `$ENV`: secrets) or load modules
/// (`import`, `include`); nothing else it does leaves jq.
fn check_jq_filter(filter: &str) -> Result<(), String> {
    let bytes = filter.as_bytes();
    let mut i = 0;
    // jq reads `$ ENV` (blanks or a comment between) as `$ENV`.
    let mut after_dollar = false;
    while i < bytes.len() {
        let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
        if bytes[i] == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if is_ident(bytes[i]) {
            let start = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            let ident = &filter[start..i];
            let field = start > 0 && bytes[start - 1] == b'.';
            let ident = if after_dollar && !ident.starts_with('$') {
                if ident == "ENV" {
                    "$ENV"
                } else {
                    ""
                }
            } else {
                ident
            };
            after_dollar = ident == "$";
            match ident {
                "$ENV" => {
                    return Err(
                        "runs `jq` with a filter that reads the environment (`$ENV`)".to_owned(),
                    )
                }
                "env" if !field => {
                    return Err(
                        "runs `jq` with a filter that reads the environment (`env`)".to_owned()
                    )
                }
                "import" | "include" | "modulemeta" | "get_search_list" if !field => {
                    return Err("runs `jq` with a filter that loads modules".to_owned())
                }
                _ => {}
            }
        } else {
            after_dollar = false;
            i += 1;
        }
    }
    Ok(())
}

/// `sed` only as a printer: `sed -n 'Np'`, `sed -n 'N,Mp'` (N, M line numbers or `$`). Any
/// other script may write files (`w`), run commands (`e`) or edit in place (`-i`).
fn sed(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let parsed = options::parse(
        "sed",
        args,
        &Spec {
            flags: "n",
            long_flags: &["quiet", "silent"],
            ..EMPTY
        },
    )?;
    let quiet = parsed.has("n") || parsed.has("quiet") || parsed.has("silent");
    let script = parsed.operands.first().map(|arg| arg.text).unwrap_or("");
    let line =
        |part: &str| part == "$" || (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
    let printer = script
        .strip_suffix('p')
        .is_some_and(|range| match range.split_once(',') {
            Some((from, to)) => line(from) && line(to),
            None => line(range),
        });
    if !quiet || !printer {
        return Err(
            "runs `sed` with a script other than `-n 'N,Mp'`; sed can write files and run commands"
                .to_owned(),
        );
    }
    read_operands(&parsed, 1, scope, fx)
}

/// Script names `yarn X`, `yarn run X` and `pnpm X` are taken for: neither tool has a builtin
/// command of these names, and yarn (which runs an installed program of the name when the
/// project has no such script) would find only a tool of the safe set among them.
const SCRIPT_SHORTHANDS: [&str; 21] = [
    "test",
    "lint",
    "build",
    "typecheck",
    "type-check",
    "tsc",
    "format",
    "fmt",
    "check",
    "dev",
    "start",
    "e2e",
    "coverage",
    "compile",
    "jest",
    "vitest",
    "eslint",
    "prettier",
    "generate",
    "codegen",
    "clean",
];

/// The npm options accepted between the script name and `--`.
const NPM_RUN_FLAGS: [&str; 4] = ["--silent", "-s", "--if-present", "--ignore-scripts"];

/// A project script: `npm test|t|start|restart`, `npm run X`, `yarn|pnpm run X`, `yarn|pnpm X`
/// for the names of [`SCRIPT_SHORTHANDS`] (and `test:x`, `lint:x` ... forms). Running the
/// project's own scripts is as safe as `npm test`; what the script is given is handed on
/// ([`handed`]).
fn package_script(
    name: &str,
    args: &[Word],
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(), String> {
    let texts: Vec<&str> = args
        .iter()
        .map(|w| if w.tilde { "~" } else { w.text.as_str() })
        .collect();
    let npm = name == "npm";
    // A name with `:` is a script: no command or installed program is named so.
    let shorthand = |script: &str| SCRIPT_SHORTHANDS.contains(&script) || script.contains(':');
    let rest_at = match texts.as_slice() {
        ["test" | "t" | "tst" | "start" | "restart", ..] if npm => 1,
        ["test" | "start", ..] => 1,
        // npm and yarn print the environment for a script named `env` the project lacks.
        ["run" | "run-script", "env", ..] => {
            return Err(format!(
                "runs `{name} run env`, which prints the environment when the project has no such script"
            ))
        }
        ["run" | "run-script", script, ..]
            if is_script_name(script) && (name != "yarn" || shorthand(script)) =>
        {
            2
        }
        [script, ..] if !npm && is_script_name(script) && shorthand(script) => 1,
        _ => {
            return Err(format!(
                "runs `{name} {}`; only the project's scripts (`{name} run <script>`) are in the safe set",
                show(&texts.iter().take(2).copied().collect::<Vec<_>>().join(" "))
            ))
        }
    };
    let rest = &args[rest_at..];
    let handed_on = if npm {
        // npm reads options before `--` as its own configuration (`--prefix`, `--script-shell`).
        let mut i = 0;
        while let Some(word) = rest.get(i) {
            let text = word.text.as_str();
            if text == "--" {
                i += 1;
                break;
            }
            if text.starts_with('-') && !word.tilde && !NPM_RUN_FLAGS.contains(&text) {
                return Err(format!(
                    "runs `npm` with `{}`; options before `--` can change which project or shell runs",
                    show(text)
                ));
            }
            i += 1;
        }
        let (before, after) = rest.split_at(i);
        let positional: Vec<Word> = before
            .iter()
            .filter(|w| w.tilde || !w.text.starts_with('-'))
            .cloned()
            .collect();
        handed::check(name, &positional, scope, fx)?;
        after
    } else {
        rest
    };
    handed::check(name, handed_on, scope, fx)
}

/// A script name as package managers take it: letters, digits and `: _ . -`, not an option.
fn is_script_name(script: &str) -> bool {
    !script.is_empty()
        && !script.starts_with('-')
        && script
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'-' | b'.'))
}

/// `node [options] FILE [args]` (the file is read and is not installed code; its arguments
/// are handed on), `node --test [FILES]`.
fn node(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    const OPTIONS: [&str; 5] = [
        "--test",
        "--no-warnings",
        "--enable-source-maps",
        "--trace-warnings",
        "--trace-uncaught",
    ];
    let mut test = false;
    for (i, word) in args.iter().enumerate() {
        let text = word.text.as_str();
        if !word.tilde && text.starts_with('-') {
            if text == "-" {
                return Err("runs `node -`, which reads code from standard input".to_owned());
            }
            if !OPTIONS.contains(&text) {
                return Err(format!(
                    "runs `node` with `{}`; only a script file, `--test` and a few output options are in the safe set",
                    show(text)
                ));
            }
            test |= text == "--test";
            continue;
        }
        if test {
            // `node --test` takes test files, all of them read.
            for file in &args[i..] {
                if file.text.starts_with('-') && !file.tilde {
                    return Err(options::unknown("node", &file.text));
                }
                project_script("node", Arg::from(file), scope, fx)?;
            }
            return Ok(());
        }
        // The script; what follows is its own arguments.
        project_script("node", Arg::from(word), scope, fx)?;
        return handed::check("node", &args[i + 1..], scope, fx);
    }
    if test {
        Ok(())
    } else {
        Err("runs `node` without a script file; it would read code from standard input".to_owned())
    }
}

/// A script of the project given to an interpreter: read, and not installed code (which is
/// judged by what it is, [`installed`]).
fn project_script(
    program: &str,
    script: Arg<'_>,
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(), String> {
    for path in scope
        .resolve(script)
        .map_err(|p| p.sentence(paths::Access::Read))?
    {
        if let Installed::Tool(_) | Installed::Unknown(_) = installed::script(&path) {
            return Err(format!(
                "runs `{program}` on installed code ({}), which is not the project's own script",
                show(&path)
            ));
        }
    }
    scope.read(fx, script)
}

fn cargo(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    const FLAGS: [&str; 30] = [
        "--release",
        "-r",
        "--workspace",
        "--all",
        "--all-targets",
        "--all-features",
        "--no-default-features",
        "--lib",
        "--bins",
        "--tests",
        "--benches",
        "--examples",
        "--doc",
        "--no-run",
        "--no-fail-fast",
        "--offline",
        "--locked",
        "--frozen",
        "-q",
        "--quiet",
        "-v",
        "-vv",
        "--verbose",
        "--check",
        "--keep-going",
        "--ignore-rust-version",
        "--timings",
        "--future-incompat-report",
        "--message-format=short",
        "--message-format=json",
    ];
    const VALUES: [&str; 14] = [
        "-p",
        "--package",
        "--bin",
        "--test",
        "--example",
        "--bench",
        "--features",
        "-F",
        "-j",
        "--jobs",
        "--exclude",
        "--color",
        "--profile",
        "--target",
    ];
    let (sub, rest) = match args.split_first() {
        Some((sub, rest))
            if !sub.tilde
                && matches!(
                    sub.text.as_str(),
                    "test" | "check" | "build" | "clippy" | "fmt" | "run"
                ) =>
        {
            (sub.text.as_str(), rest)
        }
        Some((sub, _)) => {
            return Err(format!(
                "runs `cargo {}`; only test, check, build, clippy, fmt and run are in the safe set",
                show(&sub.display())
            ))
        }
        None => return Err("runs `cargo` without a subcommand".to_owned()),
    };
    let mut check = false;
    let mut i = 0;
    while i < rest.len() {
        let word = &rest[i];
        let text = word.text.as_str();
        i += 1;
        if word.tilde || !text.starts_with('-') {
            // A test name filter, or `cargo run`'s argument: handed on.
            handed::check_word("cargo", word, scope, fx)?;
            continue;
        }
        if text == "--" {
            // The test binary's, rustfmt's or the program's own arguments (`--logfile`,
            // rustfmt's files and `--config-path`): handed on.
            check |= rest[i..].iter().any(|w| w.text == "--check");
            handed::check("cargo", &rest[i..], scope, fx)?;
            break;
        }
        let name = text.split_once('=').map_or(text, |(name, _)| name);
        if FLAGS.contains(&text) {
            check |= text == "--check";
        } else if VALUES.contains(&name) {
            if name == text {
                i += 1;
            }
        } else if ["-p", "-j", "-F"]
            .iter()
            .any(|short| text.starts_with(short) && text.len() > 2)
        {
            // `-pname`, `-j4`: attached values.
        } else {
            return Err(format!(
                "runs `cargo {sub}` with `{}`, which the judge does not know to be harmless",
                show(text)
            ));
        }
    }
    if sub == "fmt" && !check {
        fx.implicit_edit = true;
    }
    Ok(())
}

fn go(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    const BOOLS: [&str; 11] = [
        "v", "race", "short", "cover", "benchmem", "json", "failfast", "trimpath", "a", "x", "n",
    ];
    // Not `-ldflags`/`-gcflags`: `-extld` runs any program, `-cpuprofile` writes anywhere.
    const VALUES: [&str; 15] = [
        "count",
        "run",
        "skip",
        "bench",
        "benchtime",
        "timeout",
        "tags",
        "p",
        "cpu",
        "parallel",
        "shuffle",
        "vet",
        "buildvcs",
        "covermode",
        "list",
    ];
    let (sub, rest) = match args.split_first() {
        Some((sub, rest))
            if !sub.tilde && matches!(sub.text.as_str(), "test" | "vet" | "build") =>
        {
            (sub.text.as_str(), rest)
        }
        _ => return Err("runs `go` with a subcommand other than test, vet or build".to_owned()),
    };
    let mut i = 0;
    while i < rest.len() {
        let word = &rest[i];
        let text = word.text.as_str();
        i += 1;
        if text == "-args" && sub == "test" {
            // The test binary's own arguments: handed on.
            return handed::check("go test", &rest[i..], scope, fx);
        }
        if !word.tilde && text.starts_with('-') {
            let name = text.trim_start_matches('-');
            let (name, attached) = match name.split_once('=') {
                Some((name, _)) => (name, true),
                None => (name, false),
            };
            if BOOLS.contains(&name) {
                continue;
            }
            if name == "o" && sub != "vet" {
                // The output file or directory: a write.
                let out = if attached {
                    Arg::plain(&text[text.find('=').map_or(0, |at| at + 1)..], false)
                } else {
                    i += 1;
                    Arg::from(rest.get(i - 1).ok_or("runs `go build -o` without a file")?)
                };
                scope.write(fx, out)?;
                continue;
            }
            if VALUES.contains(&name) {
                if !attached {
                    i += 1;
                }
                continue;
            }
            return Err(format!(
                "runs `go {sub}` with `{}`, which the judge does not know to be harmless",
                show(text)
            ));
        }
        // Packages: only local ones (a remote import path is downloaded and run).
        let path = text
            .strip_suffix("/...")
            .or_else(|| text.strip_suffix("..."))
            .unwrap_or(text);
        let local =
            word.tilde || text.starts_with('.') || text.starts_with('/') || text.ends_with(".go");
        if !local {
            return Err(format!(
                "runs `go {sub}` on `{}`, which is not a local package (it may be downloaded and run)",
                show(text)
            ));
        }
        let path = if path.is_empty() { "." } else { path };
        scope.read(fx, Arg::plain(path, word.tilde))?;
    }
    Ok(())
}

const PYTEST: Spec = Spec {
    flags: "qvxsl",
    values: "kmrnWp",
    paths: "c",
    long_flags: &[
        "tb",
        "maxfail",
        "durations",
        "durations-min",
        "lf",
        "last-failed",
        "ff",
        "failed-first",
        "nf",
        "new-first",
        "sw",
        "stepwise",
        "co",
        "collect-only",
        "exitfirst",
        "quiet",
        "verbose",
        "no-header",
        "no-summary",
        "disable-warnings",
        "disable-pytest-warnings",
        "color",
        "capture",
        "runxfail",
        "strict-markers",
        "strict",
        "showlocals",
        "full-trace",
        "cache-clear",
        "import-mode",
        "setup-show",
        "fixtures",
        "markers",
        "doctest-modules",
        "deselect",
        "ignore",
        "ignore-glob",
        "numprocesses",
        "dist",
        "cov-branch",
        "cov-append",
        "no-cov",
        "cov-fail-under",
    ],
    long_values: &[
        "cov",
        "cov-report",
        "junitxml",
        "junit-xml",
        "log-file",
        "html",
    ],
    long_paths: &["cov-config", "config-file", "rootdir", "confcutdir"],
    ..EMPTY
};

fn pytest(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let parsed = options::parse("pytest", args, &PYTEST)?;
    for path in &parsed.paths {
        scope.read(fx, *path)?;
    }
    for (option, value) in &parsed.options {
        let Some(value) = value else { continue };
        match option.as_str() {
            // `-p no:NAME` turns a plugin off; `-p NAME` would load one.
            "p" if value.starts_with("no:") => {}
            "p" => {
                return Err(format!(
                    "runs `pytest -p {}`, which loads a plugin",
                    show(value)
                ))
            }
            // `--cov=src`: the measured source is read.
            "cov" if !value.is_empty() => scope.read(fx, Arg::plain(value, false))?,
            // `--cov-report=html:DIR`, `xml:FILE`: the report is written.
            "cov-report" => {
                if let Some((_, dest)) = value.split_once(':') {
                    if !dest.is_empty() && !matches!(dest, "skip-covered") {
                        scope.write(fx, Arg::plain(dest, false))?;
                    }
                }
            }
            "junitxml" | "junit-xml" | "log-file" | "html" => {
                scope.write(fx, Arg::plain(value, false))?;
            }
            _ => {}
        }
    }
    for operand in &parsed.operands {
        // `tests/test_x.py::test_name`: the node id's file.
        if operand.text.contains("::") {
            let text = operand.text.split("::").next().unwrap_or(operand.text);
            scope.read(fx, Arg::plain(text, operand.tilde))?;
        } else {
            scope.read(fx, *operand)?;
        }
    }
    Ok(())
}

/// The options `python` may take before `-m` or its script (output and warning switches).
const PYTHON_FLAGS: [&str; 9] = ["-B", "-u", "-O", "-OO", "-E", "-s", "-I", "-q", "-b"];

fn python(name: &str, args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        if !word.tilde && PYTHON_FLAGS.contains(&word.text.as_str()) {
            i += 1;
        } else {
            break;
        }
    }
    let texts: Vec<&str> = args[i..].iter().take(2).map(|w| w.text.as_str()).collect();
    match texts.as_slice() {
        ["-m", "pytest"] => pytest(&args[i + 2..], scope, fx),
        ["-m", "unittest"] => unittest(&args[i + 2..], scope, fx),
        [script, ..] if args[i].tilde || !script.starts_with('-') => {
            // The project's own script, like `npm test`; its arguments are handed on.
            project_script(name, Arg::from(&args[i]), scope, fx)?;
            handed::check(name, &args[i + 1..], scope, fx)
        }
        _ => Err(format!(
            "runs `{name}` other than a project script, `-m pytest` or `-m unittest`; it can run any code"
        )),
    }
}

/// Standard-library modules a `python -m unittest` name may not start with: unittest imports
/// the name and calls it when it is callable, and these start servers, browsers, shells or
/// other programs, or reach the file system and the network.
const STDLIB_RUNNERS: [&str; 40] = [
    "os",
    "sys",
    "subprocess",
    "shutil",
    "http",
    "urllib",
    "socket",
    "socketserver",
    "smtplib",
    "ftplib",
    "webbrowser",
    "antigravity",
    "this",
    "pydoc",
    "idlelib",
    "tkinter",
    "turtle",
    "turtledemo",
    "site",
    "runpy",
    "code",
    "pdb",
    "cProfile",
    "profile",
    "timeit",
    "trace",
    "zipapp",
    "venv",
    "ensurepip",
    "pip",
    "importlib",
    "ctypes",
    "multiprocessing",
    "asyncio",
    "xmlrpc",
    "wsgiref",
    "pty",
    "builtins",
    "tempfile",
    "pathlib",
];

fn unittest(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let spec = Spec {
        flags: "vqfcb",
        values: "kp",
        paths: "st",
        long_flags: &[
            "verbose",
            "quiet",
            "failfast",
            "catch",
            "buffer",
            "locals",
            "durations",
        ],
        long_paths: &["start-directory", "top-level-directory"],
        long_values: &["pattern"],
        ..EMPTY
    };
    let parsed = options::parse("python -m unittest", args, &spec)?;
    for path in &parsed.paths {
        scope.read(fx, *path)?;
    }
    for operand in &parsed.operands {
        let text = operand.text;
        if operand.tilde || text.contains('/') || text.starts_with('.') || text.ends_with(".py") {
            scope.read(fx, *operand)?;
        } else if !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        {
            return Err(format!("runs `python -m unittest` with `{}`", show(text)));
        } else if text != "discover" {
            let first = text.split('.').next().unwrap_or(text);
            if STDLIB_RUNNERS.contains(&first) {
                return Err(format!(
                    "runs `python -m unittest {}`, a standard-library name unittest would import and may call",
                    show(text)
                ));
            }
        }
    }
    Ok(())
}

const MAKE_FLAGS: [&str; 10] = [
    "-k",
    "-s",
    "--silent",
    "--quiet",
    "--keep-going",
    "--no-print-directory",
    "-w",
    "--print-directory",
    "-B",
    "--always-make",
];

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// Conventional targets that act outside the project (install into the system, publish,
/// deploy): refused by name even though the project's `Makefile` decides what they do.
const OUTWARD_TARGETS: [&str; 8] = [
    "install",
    "uninstall",
    "publish",
    "release",
    "deploy",
    "upload",
    "push",
    "distribute",
];

/// `make [targets]`: running the project's own `Makefile` is as safe as `npm test` (a bare
/// `make` runs its default target). Targets are names or paths inside; `-C DIR` and
/// `-f FILE` are read; `VAR=value` (which can set `SHELL`) and [`OUTWARD_TARGETS`] are refused.
fn make(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let mut i = 0;
    let mut scope_cwds = None;
    while i < args.len() {
        let word = &args[i];
        let text = word.text.as_str();
        i += 1;
        match text {
            _ if word.tilde => return Err("runs `make` with a path operand".to_owned()),
            _ if MAKE_FLAGS.contains(&text) => {}
            "-n" | "--dry-run" | "--just-print" => {}
            "-j" | "--jobs" => {
                if args.get(i).is_some_and(|next| is_number(&next.text)) {
                    i += 1;
                }
            }
            _ if text.starts_with("-j") && text[2..].bytes().all(|b| b.is_ascii_digit()) => {}
            _ if text.starts_with("--jobs=") => {}
            "-C" | "--directory" => {
                let dir = args.get(i).ok_or("runs `make -C` without a directory")?;
                i += 1;
                let dirs = scope
                    .resolve(Arg::from(dir))
                    .map_err(|p| p.sentence(paths::Access::Read))?;
                for dir in &dirs {
                    paths::check_read(scope.ctx, dir)
                        .map_err(|p| p.sentence(paths::Access::Read))?;
                }
                scope_cwds = Some(dirs);
            }
            "-f" | "--file" | "--makefile" => {
                let file = args.get(i).ok_or("runs `make -f` without a file")?;
                i += 1;
                scope.read(fx, Arg::from(file))?;
            }
            _ if text.starts_with('-') => return Err(options::unknown("make", text)),
            _ if word.assignment.is_some() || text.contains('=') => {
                return Err(format!(
                    "runs `make` with `{}`, a variable that can change which shell or program runs",
                    show(text)
                ))
            }
            _ if OUTWARD_TARGETS.contains(&text) => {
                return Err(format!(
                    "runs `make {}`, a target that by convention acts outside the project",
                    show(text)
                ))
            }
            _ => handed::check_word("make", word, scope, fx)?,
        }
    }
    if let Some(dirs) = scope_cwds {
        fx.reads.extend(dirs);
    }
    Ok(())
}

/// tsc's options that take a value that is not a path.
const TSC_VALUES: [&str; 6] = [
    "--target",
    "--module",
    "--lib",
    "--jsx",
    "--moduleresolution",
    "--locale",
];

/// `tsc`: a type check or a build. Files and `-p` are read; `--outDir`, `--outFile`,
/// `--declarationDir` and `--tsBuildInfoFile` are written; `--watch` is refused (a watcher
/// re-runs on every later write).
fn tsc(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    const FLAGS: [&str; 21] = [
        "--noemit",
        "--pretty",
        "--skiplibcheck",
        "--strict",
        "--listfiles",
        "--extendeddiagnostics",
        "--incremental",
        "--build",
        "-b",
        "--declaration",
        "-d",
        "--emitdeclarationonly",
        "--sourcemap",
        "--noemitonerror",
        "--verbose",
        "--force",
        "--clean",
        "--showconfig",
        "--listemittedfiles",
        "--diagnostics",
        "--dry",
    ];
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        let lower = word.text.to_ascii_lowercase();
        if word.tilde || !lower.starts_with('-') {
            scope.read(fx, Arg::from(word))?;
            continue;
        }
        let lower = lower
            .split_once('=')
            .map_or(lower.as_str(), |(name, _)| name);
        if FLAGS.contains(&lower) {
            continue;
        }
        let value = |i: &mut usize| -> Result<Arg<'_>, String> {
            if let Some((_, value)) = word.text.split_once('=') {
                return Ok(Arg::plain(value, false));
            }
            let next = args
                .get(*i)
                .ok_or_else(|| format!("runs `tsc {}` without a value", show(&word.text)))?;
            *i += 1;
            Ok(Arg::from(next))
        };
        match lower {
            "-p" | "--project" | "--rootdir" => scope.read(fx, value(&mut i)?)?,
            "--outdir" | "--outfile" | "--declarationdir" | "--tsbuildinfofile" => {
                scope.write(fx, value(&mut i)?)?;
            }
            _ if TSC_VALUES.contains(&lower) => {
                value(&mut i)?;
            }
            _ => return Err(options::unknown("tsc", &word.text)),
        }
    }
    Ok(())
}

/// `gofmt [-l -d -e -s -w] [files]`: files are read, written with `-w`.
fn gofmt(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let spec = Spec {
        flags: "ldesw",
        ..EMPTY
    };
    let parsed = options::parse("gofmt", args, &spec)?;
    let writes = parsed.has("w");
    for operand in &parsed.operands {
        if writes {
            scope.write(fx, *operand)?;
        } else {
            scope.read(fx, *operand)?;
        }
    }
    Ok(())
}

fn eslint(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let text = word.text.as_str();
        i += 1;
        if word.tilde || !text.starts_with('-') {
            read_pattern(Arg::from(word), scope, fx)?;
            continue;
        }
        match text {
            "--quiet"
            | "--color"
            | "--no-color"
            | "--cache"
            | "--no-eslintrc"
            | "--fix-dry-run"
            | "--report-unused-disable-directives"
            | "--no-error-on-unmatched-pattern"
            | "--no-warn-ignored"
            | "--debug"
            | "--no-inline-config" => {}
            "--ext" | "--max-warnings" => i += 1,
            "-f" | "--format" => {
                let format = args.get(i).ok_or("runs `eslint --format` without a name")?;
                i += 1;
                if format.tilde || format.text.contains('/') || format.text.starts_with('.') {
                    return Err(
                        "runs `eslint` with a formatter file, which is code it would load"
                            .to_owned(),
                    );
                }
            }
            "-c" | "--config" => {
                let config = args.get(i).ok_or("runs `eslint --config` without a file")?;
                i += 1;
                scope.read(fx, Arg::from(config))?;
            }
            _ if text.starts_with("--ext=") || text.starts_with("--max-warnings=") => {}
            _ => return Err(options::unknown("eslint", text)),
        }
    }
    Ok(())
}

fn prettier(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let mut checking = false;
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let text = word.text.as_str();
        i += 1;
        if word.tilde || !text.starts_with('-') {
            read_pattern(Arg::from(word), scope, fx)?;
            continue;
        }
        match text {
            "--check" | "-c" | "--list-different" | "-l" => checking = true,
            "--ignore-unknown"
            | "-u"
            | "--no-error-on-unmatched-pattern"
            | "--no-config"
            | "--no-editorconfig"
            | "--no-color" => {}
            "--log-level" | "--loglevel" => i += 1,
            "--config" | "--ignore-path" => {
                let file = args
                    .get(i)
                    .ok_or_else(|| format!("runs `prettier {text}` without a file"))?;
                i += 1;
                scope.read(fx, Arg::from(file))?;
            }
            _ => return Err(options::unknown("prettier", text)),
        }
    }
    match checking {
        true => Ok(()),
        false => {
            Err("runs `prettier` without `--check`; it would print or rewrite files".to_owned())
        }
    }
}

/// Operands of jest and vitest are name filters (regular expressions), not files.
fn test_runner(
    name: &str,
    args: &[Word],
    flags: &[&str],
    values: &[&str],
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(), String> {
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let text = word.text.as_str();
        i += 1;
        if word.tilde || !text.starts_with('-') {
            // A name filter, which the runner may also take as a path: handed on.
            handed::check_word(name, word, scope, fx)?;
            continue;
        }
        if text == "--" {
            return handed::check(name, &args[i..], scope, fx);
        }
        let option = text.split_once('=').map_or(text, |(option, _)| option);
        if matches!(option, "-u" | "--updateSnapshot" | "--update") {
            fx.implicit_edit = true;
            continue;
        }
        if flags.contains(&text) {
            continue;
        }
        if values.contains(&option) {
            // A value (`--environment=./env.js` may name a module): checked as a path.
            if option == text {
                if let Some(value) = args.get(i) {
                    handed::check_word(name, value, scope, fx)?;
                }
                i += 1;
            } else {
                handed::check_word(name, word, scope, fx)?;
            }
            continue;
        }
        if matches!(
            option,
            "-c" | "--config" | "--root" | "-r" | "--rootDir" | "--dir"
        ) {
            let file = if option == text {
                let next = args
                    .get(i)
                    .ok_or_else(|| format!("runs `{name} {text}` without a path"))?;
                i += 1;
                Arg::from(next)
            } else {
                Arg::plain(&text[option.len() + 1..], false)
            };
            if file.text.trim_start().starts_with('{') {
                return Err(format!(
                    "runs `{name}` with an inline configuration, which can name any program"
                ));
            }
            scope.read(fx, file)?;
            continue;
        }
        return Err(options::unknown(name, text));
    }
    Ok(())
}

fn jest(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    test_runner(
        "jest",
        args,
        &[
            "--ci",
            "--coverage",
            "--runInBand",
            "-i",
            "--silent",
            "--verbose",
            "--bail",
            "--passWithNoTests",
            "--json",
            "--detectOpenHandles",
            "--forceExit",
            "--noStackTrace",
            "--onlyChanged",
            "-o",
            "--no-cache",
            "--listTests",
            "--colors",
            "--no-colors",
            "--clearMocks",
            "--logHeapUsage",
            "--watchAll=false",
            "--watch=false",
        ],
        &[
            "-t",
            "--testNamePattern",
            "--testPathPattern",
            "--testPathPatterns",
            "--maxWorkers",
            "-w",
            "--testTimeout",
            "--selectProjects",
            "--shard",
            "--changedSince",
        ],
        scope,
        fx,
    )
}

fn vitest(args: &[Word], scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    match args.first() {
        Some(first) if first.text == "run" && !first.tilde => {}
        _ => return Err("runs `vitest` without `run`, which starts a watcher".to_owned()),
    }
    let rest = &args[1..];
    for word in rest {
        if word.text == "--reporter" {
            return Err(
                "runs `vitest --reporter` without `=`; write `--reporter=<name>`".to_owned(),
            );
        }
        if let Some(reporter) = word.text.strip_prefix("--reporter=") {
            if reporter.contains('/') || reporter.starts_with('.') {
                return Err(
                    "runs `vitest` with a reporter file, which is code it would load".to_owned(),
                );
            }
        }
    }
    test_runner(
        "vitest",
        rest,
        &[
            "--coverage",
            "--silent",
            "--passWithNoTests",
            "--run",
            "--no-color",
            "--allowOnly",
            "--globals",
            "--bail",
        ],
        &[
            "-t",
            "--testNamePattern",
            "--environment",
            "--pool",
            "--bail",
            "--shard",
            "--reporter",
        ],
        scope,
        fx,
    )
}
