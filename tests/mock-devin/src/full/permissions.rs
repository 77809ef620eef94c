//! `$XDG_CONFIG_HOME/devin/config.json` (fallback `$HOME/.config/devin/config.json`) and its
//! permission rules.
//!
//! ```json
//! {"permissions": {"allow": ["Read(**)", "Write(/abs/dir/**)"], "deny": ["Exec(*)"]}}
//! ```
//!
//! A rule is `Tool` (everything) or `Tool(pattern)`; `Tool` is a word of letters, digits and
//! `_`. Patterns are globs: `**` matches anything, `**/` matches zero or more whole directories,
//! `*` anything but `/`, `?` one character but `/`. For path tools a pattern that is `*` or
//! starts with `**` matches every path, `~/...` is under `$HOME`, and another relative pattern
//! is relative to the session's cwd. Deny rules win over allow rules.
//!
//! A write is permitted when a `Write(...)` allow rule covers the absolute path and no
//! `Write(...)` or `Edit(...)` deny rule matches it; [`write`] also needs a mode that edits and
//! checks the path with its symlinks resolved too.
//! Other keys of the file are ignored. A file that is missing, over 1 MiB, not JSON, or whose
//! `permissions.allow`/`permissions.deny` are not lists of rules is refused.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

/// The largest config file read.
const MAX_CONFIG: u64 = 1024 * 1024;
/// The longest rule accepted.
const MAX_RULE: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    #[error("neither XDG_CONFIG_HOME nor HOME is set: no devin/config.json to read")]
    NoLocation,
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is larger than 1 MiB")]
    TooLarge { path: PathBuf },
    #[error("{path} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

/// One `Tool(pattern)` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    pub tool: String,
    /// `None` for a bare `Tool`: every use of the tool.
    pub pattern: Option<String>,
}

impl Rule {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.len() > MAX_RULE {
            return None;
        }
        let (tool, pattern) = match text.split_once('(') {
            None => (text, None),
            Some((tool, rest)) => (tool, Some(rest.strip_suffix(')')?)),
        };
        let word = !tool.is_empty()
            && tool.starts_with(|c: char| c.is_ascii_alphabetic())
            && tool.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !word || pattern.is_some_and(str::is_empty) {
            return None;
        }
        Some(Self {
            tool: tool.to_owned(),
            pattern: pattern.map(str::to_owned),
        })
    }

    /// Whether this rule covers `path` (absolute, normalised) for `tool`.
    fn covers_path(&self, tool: &str, path: &Path, cwd: &Path, home: Option<&Path>) -> bool {
        if self.tool != tool {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        if pattern == "*" || pattern.starts_with("**") {
            return glob_match(pattern, &path.to_string_lossy());
        }
        let absolute = if pattern.starts_with('/') {
            pattern.clone()
        } else if let Some(rest) = pattern.strip_prefix("~/") {
            match home {
                Some(home) => format!("{}/{rest}", home.to_string_lossy().trim_end_matches('/')),
                None => return false,
            }
        } else {
            format!("{}/{pattern}", cwd.to_string_lossy().trim_end_matches('/'))
        };
        glob_match(&absolute, &path.to_string_lossy())
    }
}

/// The allow and deny lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Permissions {
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
}

impl Permissions {
    /// Where the config file is, from the environment.
    pub(crate) fn location() -> Result<PathBuf, ConfigError> {
        let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".config"))
                .ok_or(ConfigError::NoLocation)?,
        };
        Ok(base.join("devin").join("config.json"))
    }

    /// Reads the config file named by the environment.
    pub(crate) fn load() -> Result<Self, ConfigError> {
        Self::read(&Self::location()?)
    }

    pub(crate) fn read(path: &Path) -> Result<Self, ConfigError> {
        let read_error = |source| ConfigError::Read {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let mut bytes = Vec::new();
        file.take(MAX_CONFIG + 1)
            .read_to_end(&mut bytes)
            .map_err(read_error)?;
        if bytes.len() as u64 > MAX_CONFIG {
            return Err(ConfigError::TooLarge {
                path: path.to_owned(),
            });
        }
        let value: Value = serde_json::from_slice(&bytes).map_err(|source| ConfigError::Json {
            path: path.to_owned(),
            source,
        })?;
        Self::from_value(&value).map_err(|reason| ConfigError::Invalid {
            path: path.to_owned(),
            reason,
        })
    }

    pub(crate) fn from_value(value: &Value) -> Result<Self, String> {
        let object = value
            .as_object()
            .ok_or("the config must be a JSON object")?;
        let Some(permissions) = object.get("permissions") else {
            return Ok(Self::default());
        };
        let permissions = permissions
            .as_object()
            .ok_or("permissions must be an object")?;
        let list = |name: &str| -> Result<Vec<Rule>, String> {
            let Some(items) = permissions.get(name) else {
                return Ok(Vec::new());
            };
            let items = items
                .as_array()
                .ok_or_else(|| format!("permissions.{name} must be a list of rules"))?;
            items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    item.as_str().and_then(Rule::parse).ok_or_else(|| {
                        format!("permissions.{name}[{index}] is not a rule like Tool(pattern)")
                    })
                })
                .collect()
        };
        Ok(Self {
            allow: list("allow")?,
            deny: list("deny")?,
        })
    }

    /// Whether the rules let the agent write `path` (absolute and normalised).
    pub(crate) fn may_write(&self, path: &Path, cwd: &Path) -> bool {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let home = home.as_deref();
        let denied = self.deny.iter().any(|rule| {
            rule.covers_path("Write", path, cwd, home) || rule.covers_path("Edit", path, cwd, home)
        });
        let allowed = self
            .allow
            .iter()
            .any(|rule| rule.covers_path("Write", path, cwd, home));
        allowed && !denied
    }

    /// How many allow and deny rules there are, for the log.
    pub(crate) fn summary(&self) -> (usize, usize) {
        (self.allow.len(), self.deny.len())
    }
}

/// `path` joined to `cwd` when relative, with `.` and `..` resolved lexically.
pub(crate) fn absolute(cwd: &Path, path: &str) -> PathBuf {
    let joined = cwd.join(path);
    let mut out = PathBuf::from("/");
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// What `[mock:write]` writes.
pub(crate) const WRITTEN: &str = "mock write\n";

/// What one `[mock:write]` did.
pub(crate) struct Written {
    pub wrote: bool,
    pub mode_allows: bool,
    pub rules_allow: bool,
    /// The line for the reply: `wrote: P`, `write denied: P` or `write failed: P: error`.
    pub note: String,
}

/// Writes [`WRITTEN`] to `target` (absolute, normalised) when the session's `mode` lets the
/// agent edit (`bypass`, `accept-edits`) and the rules allow the path both as given and with
/// its symlinks resolved.
pub(crate) fn write(permissions: &Permissions, mode: &str, cwd: &Path, target: &Path) -> Written {
    let shown = target.display();
    let mode_allows = matches!(mode, "bypass" | "accept-edits");
    let canonical_cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_owned());
    let rules_allow = permissions.may_write(target, cwd)
        && permissions.may_write(&resolve(target), &canonical_cwd);
    let (wrote, note) = if !(mode_allows && rules_allow) {
        (false, format!("write denied: {shown}"))
    } else {
        let written = target
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(target, WRITTEN));
        match written {
            Ok(()) => (true, format!("wrote: {shown}")),
            Err(err) => (false, format!("write failed: {shown}: {err}")),
        }
    };
    Written {
        wrote,
        mode_allows,
        rules_allow,
        note,
    }
}

/// `path` with its longest existing ancestor resolved through symlinks.
fn resolve(path: &Path) -> PathBuf {
    let mut existing = path.to_owned();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(&existing) {
            let mut out = canonical;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (
            existing.file_name().map(ToOwned::to_owned),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_owned();
            }
            _ => return path.to_owned(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Char(char),
    Any,
    /// `*`: anything but `/`.
    Star,
    /// `**`: anything.
    Globstar,
    /// `**/`: zero or more whole directories.
    Dirs,
}

fn tokens(pattern: &str) -> Vec<Token> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' if chars.get(i + 1) == Some(&'*') => {
                if chars.get(i + 2) == Some(&'/') {
                    out.push(Token::Dirs);
                    i += 3;
                } else {
                    out.push(Token::Globstar);
                    i += 2;
                }
                while chars.get(i) == Some(&'*') {
                    i += 1;
                }
            }
            '*' => {
                out.push(Token::Star);
                i += 1;
            }
            '?' => {
                out.push(Token::Any);
                i += 1;
            }
            c => {
                out.push(Token::Char(c));
                i += 1;
            }
        }
    }
    out
}

/// Whether `text` matches the glob `pattern` (see the module documentation).
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let tokens = tokens(pattern);
    let text: Vec<char> = text.chars().collect();
    let n = text.len();
    // next[j]: tokens[i+1..] match text[j..]; computed from the last token backwards.
    let mut next = vec![false; n + 1];
    next[n] = true;
    for token in tokens.iter().rev() {
        let mut row = vec![false; n + 1];
        // For Dirs: some k >= j with text[k] == '/' and next[k + 1].
        let mut slash_then_rest = false;
        for j in (0..=n).rev() {
            let here = text.get(j).copied();
            if here == Some('/') && next[j + 1] {
                slash_then_rest = true;
            }
            row[j] = match token {
                Token::Char(c) => here == Some(*c) && next[j + 1],
                Token::Any => here.is_some_and(|c| c != '/') && next[j + 1],
                Token::Star => next[j] || (here.is_some_and(|c| c != '/') && row[j + 1]),
                Token::Globstar => next[j] || (here.is_some() && row[j + 1]),
                Token::Dirs => next[j] || slash_then_rest,
            };
        }
        next = row;
    }
    next[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolve_follows_symlinked_ancestors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().canonicalize().expect("canonical").join("real");
        std::fs::create_dir(&real).expect("dir");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert_eq!(resolve(&link.join("new/file")), real.join("new/file"));
        assert_eq!(resolve(Path::new("/")), Path::new("/"));
    }

    #[test]
    fn globs() {
        assert!(glob_match("**", "/any/where"));
        assert!(glob_match("*", "file"));
        assert!(!glob_match("*", "dir/file"));
        assert!(glob_match("/w/**", "/w/a/b.rs"));
        assert!(!glob_match("/w/**", "/work/a"));
        assert!(glob_match("/w/**/b.rs", "/w/b.rs"));
        assert!(glob_match("/w/**/b.rs", "/w/x/y/b.rs"));
        assert!(!glob_match("/w/**/b.rs", "/w/xb.rs"));
        assert!(glob_match("/w/*.rs", "/w/a.rs"));
        assert!(!glob_match("/w/*.rs", "/w/d/a.rs"));
        assert!(glob_match("/w/?.rs", "/w/a.rs"));
        assert!(!glob_match("/w/?.rs", "/w/ab.rs"));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "x"));
    }

    #[test]
    fn rules_parse_or_are_refused() {
        assert_eq!(
            Rule::parse("Write(/abs/dir/**)"),
            Some(Rule {
                tool: "Write".into(),
                pattern: Some("/abs/dir/**".into())
            })
        );
        assert_eq!(
            Rule::parse("Exec"),
            Some(Rule {
                tool: "Exec".into(),
                pattern: None
            })
        );
        for bad in [
            "",
            "Write(",
            "Write()",
            "(x)",
            "9x(y)",
            "Wr ite(x)",
            "Write(x",
        ] {
            assert_eq!(Rule::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn config_documents() {
        let permissions = Permissions::from_value(&json!({
            "permissions": {"allow": ["Read(**)", "Write(/w/**)"], "deny": ["Exec(*)"]},
            "other": true,
        }))
        .expect("valid");
        assert_eq!(permissions.summary(), (2, 1));
        assert_eq!(
            Permissions::from_value(&json!({})),
            Ok(Permissions::default())
        );
        assert!(Permissions::from_value(&json!([])).is_err());
        assert!(Permissions::from_value(&json!({"permissions": []})).is_err());
        assert!(Permissions::from_value(&json!({"permissions": {"allow": "Read(**)"}})).is_err());
        assert!(Permissions::from_value(&json!({"permissions": {"deny": [3]}})).is_err());
        assert!(Permissions::from_value(&json!({"permissions": {"deny": ["Bad("]}})).is_err());
    }

    #[test]
    fn reads_files_and_refuses_bad_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.json");
        assert!(matches!(
            Permissions::read(&path),
            Err(ConfigError::Read { .. })
        ));
        std::fs::write(&path, "{not json").expect("write");
        assert!(matches!(
            Permissions::read(&path),
            Err(ConfigError::Json { .. })
        ));
        std::fs::write(&path, r#"{"permissions":{"allow":["Write(/x/**)"]}}"#).expect("write");
        assert_eq!(Permissions::read(&path).expect("valid").allow.len(), 1);
        std::fs::write(&path, vec![b' '; 1024 * 1024 + 1]).expect("write");
        assert!(matches!(
            Permissions::read(&path),
            Err(ConfigError::TooLarge { .. })
        ));
    }

    #[test]
    fn writes_need_an_allow_rule_and_no_deny_rule() {
        let cwd = Path::new("/w");
        let rules = |allow: &[&str], deny: &[&str]| {
            Permissions::from_value(&json!({"permissions": {"allow": allow, "deny": deny}}))
                .expect("valid")
        };
        let inside = absolute(cwd, "src/a.rs");
        assert_eq!(inside, Path::new("/w/src/a.rs"));
        assert!(rules(&["Write(/w/**)"], &[]).may_write(&inside, cwd));
        assert!(rules(&["Write(src/**)"], &[]).may_write(&inside, cwd));
        assert!(rules(&["Write(**)"], &[]).may_write(&inside, cwd));
        assert!(rules(&["Write"], &[]).may_write(&inside, cwd));
        // Read and Edit allow rules do not permit writes.
        assert!(!rules(&["Read(**)", "Edit(**)"], &[]).may_write(&inside, cwd));
        assert!(!rules(&[], &[]).may_write(&inside, cwd));
        // Deny wins, for Write and for Edit rules.
        assert!(!rules(&["Write(/w/**)"], &["Write(/w/src/**)"]).may_write(&inside, cwd));
        assert!(!rules(&["Write(/w/**)"], &["Edit(**)"]).may_write(&inside, cwd));
        assert!(rules(&["Write(/w/**)"], &["Exec(*)", "Write(/w/docs/**)"]).may_write(&inside, cwd));
        // `..` cannot escape the allowed prefix.
        let outside = absolute(cwd, "../etc/passwd");
        assert_eq!(outside, Path::new("/etc/passwd"));
        assert!(!rules(&["Write(/w/**)"], &[]).may_write(&outside, cwd));
        assert_eq!(absolute(cwd, "/abs/./x/../y"), Path::new("/abs/y"));
    }
}
