//! Secrets named by a filter rather than a path: `grep --include`, `rg -g`, `find -name`,
//! git pathspecs with their magic (`:(icase)`, `:(glob)`, `:(top)`, `:/`, `:!`).
//!
//! Invariants:
//! - An including filter is flagged when it singles out sensitive files
//!   ([`targets_sensitive`]: it matches a sensitive name and no ordinary one), compared
//!   without regard to case.
//! - The excluding filters of one command, taken together, are flagged when they leave out
//!   every ordinary name but keep a sensitive one ([`excludes_all_but_sensitive`]).
//! - A git pathspec is read after its magic: the rest is a path (a sensitive name is flagged)
//!   and a pattern (singling out is flagged); an `exclude` magic makes it an excluding filter.
//!   Every magic is accepted (`icase`, `glob`, `top`, `literal`, `attr`): none of them lets
//!   a pattern reach another directory than the repository.

use crate::paths;
use crate::rules::{excludes_all_but_sensitive, targets_sensitive};
use crate::verdict::show;

/// An including filter of `program`.
pub(crate) fn include(program: &str, pattern: &str) -> Result<(), String> {
    let literal = paths::sensitive(&format!("/{}", pattern.trim_start_matches('/')));
    match literal.or_else(|| targets_sensitive(pattern)) {
        Some(what) => Err(format!(
            "runs `{program}` with a filter that singles out sensitive files ({what}): {}",
            show(pattern)
        )),
        None => Ok(()),
    }
}

/// The excluding filters of one command of `program`, taken together.
pub(crate) fn excludes(program: &str, patterns: &[&str]) -> Result<(), String> {
    match excludes_all_but_sensitive(patterns) {
        Some(what) => Err(format!(
            "runs `{program}` with filters that leave out everything but sensitive files ({what})"
        )),
        None => Ok(()),
    }
}

/// An `rg --glob` (also the `Grep` tool's `glob`): a leading `!` excludes.
pub(crate) fn rg_glob(pattern: &str, excluded: &mut Vec<String>) -> Result<(), String> {
    match pattern.strip_prefix('!') {
        Some(rest) => {
            excluded.push(rest.to_owned());
            Ok(())
        }
        None => include("rg", pattern),
    }
}

/// A git pathspec: the magic taken off, and whether it excludes.
pub(crate) fn pathspec_body(text: &str) -> (&str, bool) {
    if let Some(long) = text.strip_prefix(":(") {
        if let Some((magic, body)) = long.split_once(')') {
            let exclude = magic
                .split(',')
                .any(|word| word.trim().eq_ignore_ascii_case("exclude"));
            return (body, exclude);
        }
        return (text, false);
    }
    if let Some(short) = text.strip_prefix(':') {
        let magic_len = short
            .bytes()
            .take_while(|b| matches!(b, b'/' | b'!' | b'^'))
            .count();
        let exclude = short[..magic_len].contains(['!', '^']);
        let body = &short[magic_len..];
        let body = body.strip_prefix(':').unwrap_or(body);
        return (body, exclude);
    }
    (text, false)
}

/// A git pathspec's body (after [`pathspec_body`]) as a name and as a pattern.
pub(crate) fn pathspec(body: &str) -> Result<(), String> {
    include("git", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pathspec_magic_is_taken_off() {
        assert_eq!(pathspec_body(":(icase).ENV"), (".ENV", false));
        assert_eq!(pathspec_body(":(glob,icase)**/.env"), ("**/.env", false));
        assert_eq!(pathspec_body(":(top)secrets.yml"), ("secrets.yml", false));
        assert_eq!(pathspec_body(":/.npmrc"), (".npmrc", false));
        assert_eq!(pathspec_body(":!*.rs"), ("*.rs", true));
        assert_eq!(pathspec_body(":^src"), ("src", true));
        assert_eq!(pathspec_body(":(exclude)*.md"), ("*.md", true));
        assert_eq!(pathspec_body("src/main.rs"), ("src/main.rs", false));
        for body in [
            ".ENV",
            "**/.env",
            "secrets.yml",
            ".npmrc",
            "*.PEM",
            "*.tfstate",
        ] {
            assert!(pathspec(body).is_err(), "{body}");
        }
        for body in ["src", "*.rs", "", ".env.example"] {
            assert!(pathspec(body).is_ok(), "{body}");
        }
    }

    #[test]
    fn filters() {
        assert!(include("grep", ".env").is_err());
        assert!(include("grep", "*.pem").is_err());
        assert!(include("grep", "*.rs").is_ok());
        let mut excluded = Vec::new();
        assert!(rg_glob("!*.rs", &mut excluded).is_ok());
        assert_eq!(excluded, ["*.rs"]);
        assert!(rg_glob("**/.env*", &mut excluded).is_err());
        assert!(excludes("grep", &["*[!v]"]).is_err());
        assert!(excludes("grep", &["*.min.js"]).is_ok());
    }
}
