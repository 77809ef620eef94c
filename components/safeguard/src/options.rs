//! Command-line options of the programs in the safe set, read from per-program tables.
//!
//! Invariants:
//! - Options are allow-listed: an option a table does not name is refused, so an unknown
//!   option (or a GNU abbreviation such as `--out` for `--output`) never passes.
//! - An option that takes a value consumes exactly what the program consumes: the attached
//!   rest of a short cluster (`-n5`) or of a long option (`--lines=5`), else the next word. A
//!   table that listed a flag as taking a value would hide the next word from the path checks,
//!   so the tables list values only where the program takes one.
//! - Options are recognised anywhere before `--` (GNU programs permute their arguments);
//!   `-` alone is an operand (standard input).

use crate::shell::Word;
use crate::verdict::show;

/// A program's options.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Spec {
    /// Short flags without a value.
    pub(crate) flags: &'static str,
    /// Short options that take a value that is not a path.
    pub(crate) values: &'static str,
    /// Short options whose value is a file the program reads.
    pub(crate) paths: &'static str,
    /// Long flags (an `=value` is accepted: optional values such as `--color=auto`).
    pub(crate) long_flags: &'static [&'static str],
    /// Long options that take a value that is not a path.
    pub(crate) long_values: &'static [&'static str],
    /// Long options whose value is a file the program reads.
    pub(crate) long_paths: &'static [&'static str],
    /// `-20` (head, tail, grep context) is a flag.
    pub(crate) numeric: bool,
    /// A short option's value may be attached (`-n5`); jq's may not.
    pub(crate) attached: bool,
}

/// An operand or option value as the program receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arg<'w> {
    pub(crate) text: &'w str,
    /// A leading `~` the shell expands to the home directory.
    pub(crate) tilde: bool,
    /// The whole word is a pattern the shell expands to file names ([`Word::glob`]); a part of
    /// a word (an attached option value) never is.
    pub(crate) glob: bool,
}

impl<'w> Arg<'w> {
    /// A part of a word, or a word the judge made: never a glob.
    pub(crate) fn plain(text: &'w str, tilde: bool) -> Self {
        Arg {
            text,
            tilde,
            glob: false,
        }
    }
}

impl<'w> From<&'w Word> for Arg<'w> {
    fn from(word: &'w Word) -> Self {
        Arg {
            text: &word.text,
            tilde: word.tilde,
            glob: word.glob,
        }
    }
}

/// What the options of one command were.
#[derive(Debug, Default)]
pub(crate) struct Parsed<'w> {
    /// Operands in order.
    pub(crate) operands: Vec<Arg<'w>>,
    /// Values of path options (files the program reads).
    pub(crate) paths: Vec<Arg<'w>>,
    /// Every option seen: its name (`n`, `lines`, `NUM`) and value.
    pub(crate) options: Vec<(String, Option<&'w str>)>,
}

impl Parsed<'_> {
    pub(crate) fn has(&self, name: &str) -> bool {
        self.options.iter().any(|(seen, _)| seen == name)
    }
}

/// Reads `args` (the words after the program name) against `spec`.
pub(crate) fn parse<'w>(
    program: &str,
    args: &'w [Word],
    spec: &Spec,
) -> Result<Parsed<'w>, String> {
    let mut parsed = Parsed::default();
    let mut i = 0;
    let mut operands_only = false;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        let text = word.text.as_str();
        if operands_only || word.tilde || text == "-" || !text.starts_with('-') {
            parsed.operands.push(Arg::from(word));
            continue;
        }
        if text == "--" {
            operands_only = true;
            continue;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            if spec.long_flags.contains(&name) {
                parsed.options.push((name.to_owned(), attached));
            } else if spec.long_values.contains(&name) || spec.long_paths.contains(&name) {
                let value = match attached {
                    Some(value) => Arg::plain(value, false),
                    None => {
                        let next = args.get(i).ok_or_else(|| needs_value(program, text))?;
                        i += 1;
                        Arg::from(next)
                    }
                };
                if spec.long_paths.contains(&name) {
                    parsed.paths.push(value);
                }
                parsed.options.push((name.to_owned(), Some(value.text)));
            } else {
                return Err(unknown(program, text));
            }
            continue;
        }
        let cluster = &text[1..];
        if spec.numeric && cluster.bytes().all(|b| b.is_ascii_digit()) {
            parsed.options.push(("NUM".to_owned(), Some(cluster)));
            continue;
        }
        for (at, letter) in cluster.char_indices() {
            if spec.flags.contains(letter) {
                parsed.options.push((letter.to_string(), None));
                continue;
            }
            let is_path = spec.paths.contains(letter);
            if !is_path && !spec.values.contains(letter) {
                return Err(unknown(program, &format!("-{letter}")));
            }
            let rest = &cluster[at + letter.len_utf8()..];
            let value = if rest.is_empty() {
                let next = args
                    .get(i)
                    .ok_or_else(|| needs_value(program, &format!("-{letter}")))?;
                i += 1;
                Arg::from(next)
            } else if spec.attached {
                Arg::plain(rest, false)
            } else {
                return Err(unknown(program, text));
            };
            if is_path {
                parsed.paths.push(value);
            }
            parsed.options.push((letter.to_string(), Some(value.text)));
            break;
        }
    }
    Ok(parsed)
}

pub(crate) fn unknown(program: &str, option: &str) -> String {
    format!(
        "runs `{program}` with the option `{}`, which the judge does not know to be harmless",
        show(option)
    )
}

fn needs_value(program: &str, option: &str) -> String {
    format!(
        "runs `{program}` with `{}` and no value for it",
        show(option)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Word> {
        line.split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| Word {
                text: w.to_owned(),
                ..Word::default()
            })
            .collect()
    }

    const HEAD: Spec = Spec {
        flags: "qvz",
        values: "nc",
        long_flags: &["quiet"],
        long_values: &["lines"],
        long_paths: &["from"],
        paths: "f",
        numeric: true,
        attached: true,
    };

    #[test]
    fn clusters_values_and_operands() {
        let args = words("-qn5 a -n 3 --lines=4 --lines 6 -20 - -- -x b");
        let parsed = parse("head", &args, &HEAD).unwrap();
        let operands: Vec<&str> = parsed.operands.iter().map(|a| a.text).collect();
        assert_eq!(operands, vec!["a", "-", "-x", "b"]);
        assert!(parsed.has("q") && parsed.has("n") && parsed.has("lines") && parsed.has("NUM"));
    }

    #[test]
    fn path_values_are_collected() {
        let args = words("-f one -ftwo --from=three --from four x");
        let parsed = parse("head", &args, &HEAD).unwrap();
        let paths: Vec<&str> = parsed.paths.iter().map(|a| a.text).collect();
        assert_eq!(paths, vec!["one", "two", "three", "four"]);
        assert_eq!(parsed.operands.len(), 1);
    }

    #[test]
    fn unknown_and_abbreviated_options_are_refused() {
        for line in ["-x", "-qx", "--output=f", "--line=3", "--quie", "-n"] {
            assert!(parse("head", &words(line), &HEAD).is_err(), "{line}");
        }
        let detached = Spec {
            attached: false,
            ..HEAD
        };
        assert!(parse("jq", &words("-n5"), &detached).is_err());
        assert!(parse("jq", &words("-n 5"), &detached).is_ok());
    }
}
