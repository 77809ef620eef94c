//! Arguments a program hands on to code the judge does not see: a package script's arguments,
//! what follows `--` for `cargo` (the test binary, rustfmt, the program run), `go test -args`,
//! a project script's own arguments (`node FILE ...`, `python3 FILE ...`), a test runner's
//! name filters. The code that reads them is the project's, so the judge cannot know which
//! one is a file, a module to load or an output to write: every one that could name a file
//! is checked as one.
//!
//! Invariants:
//! - A word that may be a path (a leading `~`, a `/` anywhere, a leading `.`) is resolved in
//!   every working directory and must be inside, not sensitive and not protected; a glob word
//!   is read as the files it may match. A plain name (no `/`) is a file of the working
//!   directory, which is inside: it must not be a sensitive or protected name (`.env`, `HEAD`).
//! - The value of an option (`--name=value`, the rest of a short cluster `-oFILE`) is checked
//!   the same way.
//! - Options that make a program run a shell command or open a debugger port
//!   ([`RUNNING_OPTIONS`]) are flagged, whatever their value.

use crate::options::Arg;
use crate::paths;
use crate::scope::{Effects, Scope};
use crate::shell::Word;
use crate::verdict::show;

/// Option names (without dashes) that run a command or open a port to run code through, in
/// the common runners and tools a script may hand its arguments to.
pub(crate) const RUNNING_OPTIONS: [&str; 10] = [
    "exec",
    "eval",
    "shell",
    "script-shell",
    "node-options",
    "inspect",
    "inspect-brk",
    "inspect-port",
    "interpreter",
    "unsafe-perm",
];

/// Checks every word handed on by `program`.
pub(crate) fn check(
    program: &str,
    args: &[Word],
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(), String> {
    for word in args {
        check_word(program, word, scope, fx)?;
    }
    Ok(())
}

/// Checks one handed-on word.
pub(crate) fn check_word(
    program: &str,
    word: &Word,
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(), String> {
    let text = word.text.as_str();
    if word.tilde || word.glob || !text.starts_with('-') || text == "-" {
        return value(Arg::from(word), scope, fx);
    }
    let body = text.trim_start_matches('-');
    let (name, attached) = match body.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (body, None),
    };
    if RUNNING_OPTIONS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "runs `{program}` with `{}` handed on, which can run a command or open a debugger port",
            show(text)
        ));
    }
    if let Some(attached) = attached {
        return value(Arg::plain(attached, false), scope, fx);
    }
    if !text.starts_with("--") && body.len() > 1 {
        // `-oFILE`: the rest of a short cluster may be an attached value.
        return value(Arg::plain(&body[1..], false), scope, fx);
    }
    Ok(())
}

/// A value that may be a path: resolved when it can leave the working directory, else its
/// name is checked.
fn value(arg: Arg<'_>, scope: &Scope<'_>, fx: &mut Effects) -> Result<(), String> {
    let text = arg.text;
    if arg.tilde || arg.glob || text.contains('/') || text.starts_with('.') {
        return scope.read_unprotected(fx, arg);
    }
    let named = format!("/{text}");
    if let Some(what) = paths::sensitive(&named) {
        return Err(format!(
            "hands on the name of a sensitive file ({what}): {}",
            show(text)
        ));
    }
    if let Some(what) = paths::protected(&named) {
        return Err(format!(
            "hands on the name of {what}, which changes what runs later: {}",
            show(text)
        ));
    }
    Ok(())
}
