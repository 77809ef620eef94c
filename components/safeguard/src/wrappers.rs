//! Wrappers that run another command unchanged (`nice`, `timeout`) or with file names
//! appended (`xargs -0` after `find ... -print0`): the wrapped command is what is judged.
//!
//! Invariants:
//! - Unwrapping is a loop over the words (no recursion): each wrapper's own options are read
//!   from a closed list, none of its words may be a glob, and what is left must be a command.
//! - `xargs` is accepted only with `-0` (NUL-separated names, so no name splits into several
//!   arguments or is read for quotes) and only right after a `find` whose only output is
//!   `-print0` of start paths that cannot be taken for options: every name it appends then
//!   begins with a start path. The wrapped command is judged with those start paths as its
//!   last operands, and they must be taken as files to read by it (a glob-like operand,
//!   [`crate::scope::Effects::took_glob`]); a command that does something else with its last
//!   operands is flagged.

use crate::shell::{Command, Word};
use crate::verdict::show;

/// The command a simple command runs, its wrappers taken off.
#[derive(Debug)]
pub(crate) struct Unwrapped {
    /// The wrapped command's words, with `xargs`'s appended start paths.
    pub(crate) words: Vec<Word>,
    /// A wrapper was taken off.
    pub(crate) wrapped: bool,
}

/// Takes the wrappers off `words`; `before` is the previous command of the pipeline.
pub(crate) fn unwrap(words: &[Word], before: Option<&Command>) -> Result<Unwrapped, String> {
    let mut at = 0;
    let mut appended: Vec<Word> = Vec::new();
    let mut wrapped = false;
    while let Some(word) = words.get(at) {
        if word.tilde {
            break;
        }
        let rest = &words[at + 1..];
        let used = match word.text.as_str() {
            "nice" => nice(rest)?,
            "timeout" => timeout(rest)?,
            "xargs" => {
                if wrapped && !appended.is_empty() {
                    return Err("runs `xargs` twice".to_owned());
                }
                appended = find_starts(before)?;
                xargs(rest)?
            }
            _ => break,
        };
        if let Some(glob) = rest[..used].iter().find(|w| w.glob) {
            return Err(format!(
                "runs `{}` with the glob `{}` among its own options",
                word.text,
                show(&glob.text)
            ));
        }
        wrapped = true;
        at += 1 + used;
        if at >= words.len() {
            return Err(format!("runs `{}` without a command", word.text));
        }
    }
    let mut out: Vec<Word> = words[at..].to_vec();
    out.extend(appended);
    Ok(Unwrapped {
        words: out,
        wrapped,
    })
}

fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `nice [-n N | -nN | -N | --adjustment=N]`: how many words are `nice`'s own.
fn nice(rest: &[Word]) -> Result<usize, String> {
    let first = rest.first().map(|w| w.text.as_str()).unwrap_or("");
    Ok(match first {
        "-n" | "--adjustment" => match rest.get(1) {
            Some(n) if is_integer(&n.text) => 2,
            _ => return Err("runs `nice -n` without a number".to_owned()),
        },
        _ if first.starts_with("--adjustment=") && is_integer(&first[13..]) => 1,
        _ if first.starts_with("-n") && is_integer(&first[2..]) => 1,
        _ if first.starts_with('-') && is_integer(first) => 1,
        _ if first.starts_with('-') => {
            return Err(format!("runs `nice` with `{}`", show(first)));
        }
        _ => 0,
    })
}

/// A duration as `timeout` reads it: a number with an optional `s`, `m`, `h` or `d`.
fn is_duration(text: &str) -> bool {
    let number = text.trim_end_matches(['s', 'm', 'h', 'd']);
    number.len() + 1 >= text.len()
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && number.bytes().filter(|b| *b == b'.').count() <= 1
}

/// `timeout [options] DURATION`: how many words are `timeout`'s own.
fn timeout(rest: &[Word]) -> Result<usize, String> {
    let mut i = 0;
    while let Some(word) = rest.get(i) {
        let text = word.text.as_str();
        match text {
            "--preserve-status" | "--foreground" | "-v" | "--verbose" => i += 1,
            "-s" | "--signal" | "-k" | "--kill-after" => i += 2,
            _ if text.starts_with("--signal=") || text.starts_with("--kill-after=") => i += 1,
            _ if text.len() > 2 && (text.starts_with("-s") || text.starts_with("-k")) => i += 1,
            _ if is_duration(text) => return Ok(i + 1),
            _ => return Err(format!("runs `timeout` with `{}`", show(text))),
        }
    }
    Err("runs `timeout` without a duration".to_owned())
}

/// `xargs -0 [-r] [-n N] [-P N] [-t] [-x]`: how many words are `xargs`'s own.
fn xargs(rest: &[Word]) -> Result<usize, String> {
    let mut null = false;
    let mut i = 0;
    while let Some(word) = rest.get(i) {
        let text = word.text.as_str();
        match text {
            "-0" | "--null" => null = true,
            "-r" | "--no-run-if-empty" | "-t" | "--verbose" | "-x" | "--exit" => {}
            "-n" | "-P" | "--max-args" | "--max-procs" => {
                match rest.get(i + 1) {
                    Some(n) if is_integer(&n.text) => {}
                    _ => return Err(format!("runs `xargs {text}` without a number")),
                }
                i += 1;
            }
            _ if (text.starts_with("-n") || text.starts_with("-P")) && is_integer(&text[2..]) => {}
            _ if text.starts_with("--max-args=") || text.starts_with("--max-procs=") => {}
            _ if text.starts_with('-') => {
                return Err(format!(
                    "runs `xargs` with `{}`, which the judge does not know to be harmless",
                    show(text)
                ))
            }
            _ => break,
        }
        i += 1;
    }
    if !null {
        return Err(
            "runs `xargs` without `-0`; it splits names at blanks and reads quotes, so a file name can become other arguments"
                .to_owned(),
        );
    }
    Ok(i)
}

/// The start paths of the `find ... -print0` that feeds `xargs -0`.
fn find_starts(before: Option<&Command>) -> Result<Vec<Word>, String> {
    const NOT_FIND: &str =
        "runs `xargs` after something other than `find ... -print0`; the names it appends are not known";
    let Some(command) = before else {
        return Err(NOT_FIND.to_owned());
    };
    let words = &command.words;
    match words.first() {
        Some(first) if first.text == "find" && !first.tilde => {}
        _ => return Err(NOT_FIND.to_owned()),
    }
    let outputs: Vec<&str> = words
        .iter()
        .map(|w| w.text.as_str())
        .filter(|t| {
            t.starts_with("-print") || t.starts_with("-fprint") || *t == "-ls" || *t == "-fls"
        })
        .collect();
    if outputs != ["-print0"] || !command.redirects.is_empty() {
        return Err(NOT_FIND.to_owned());
    }
    let mut starts = Vec::new();
    for word in &words[1..] {
        let text = word.text.as_str();
        if matches!(text, "-H" | "-L" | "-P") && !word.tilde {
            continue;
        }
        if !word.tilde && (text.starts_with('-') || matches!(text, "(" | "!" | ",")) {
            break;
        }
        let mut start = word.clone();
        // The names appended begin with this path: they must be taken as files (see
        // `Effects::took_glob`).
        start.glob = true;
        starts.push(start);
    }
    if starts.is_empty() {
        // `find` alone searches `.`.
        starts.push(Word {
            text: ".".to_owned(),
            glob: true,
            ..Word::default()
        });
    }
    Ok(starts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::parse;

    fn unwrapped(line: &str) -> Result<Vec<String>, String> {
        let parsed = parse(line).unwrap();
        let pipeline = &parsed[0].first;
        let last = pipeline.len() - 1;
        let before = last.checked_sub(1).map(|i| &pipeline[i]);
        unwrap(&pipeline[last].words, before)
            .map(|u| u.words.iter().map(|w| w.text.clone()).collect())
    }

    #[test]
    fn wrappers_come_off() {
        assert_eq!(
            unwrapped("timeout 120 cargo test").unwrap(),
            ["cargo", "test"]
        );
        assert_eq!(
            unwrapped("nice -n 10 timeout -k 5 2m make test").unwrap(),
            ["make", "test"]
        );
        assert_eq!(
            unwrapped("find src -name x -print0 | xargs -0 grep -l foo").unwrap(),
            ["grep", "-l", "foo", "src"]
        );
        assert_eq!(unwrapped("ls -la").unwrap(), ["ls", "-la"]);
    }

    #[test]
    fn unknown_wrapper_forms_are_refused() {
        for line in [
            "timeout cargo test",
            "timeout 5",
            "nice --foo ls",
            "find . | xargs grep x",
            "find . -print0 | xargs grep x",
            "echo /etc/passwd | xargs -0 cat",
            "find . -printf x -print0 | xargs -0 cat",
            "find . -print0 | xargs -0 -I x cat x",
            "xargs -0 cat",
        ] {
            assert!(unwrapped(line).is_err(), "{line}");
        }
    }
}
