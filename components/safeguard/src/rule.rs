//! The user's rules as the context gives them: each list entry with its citation path, and
//! the entries written in permission-rule syntax (`Tool` or `Tool(specifier)`) parsed. A leaf:
//! matching a rule against a call is [`crate::rules`]'s.

/// Longest specifier read, in bytes; a longer rule is not a rule.
pub(crate) const MAX_SPEC_BYTES: usize = 512;

/// The tools Claude Code's `Read` rules apply to.
pub(crate) const READ_TOOLS: [&str; 5] = ["Read", "Glob", "Grep", "LS", "NotebookRead"];

/// The tools Claude Code's `Edit` rules apply to.
pub(crate) const EDIT_TOOLS: [&str; 4] = ["Edit", "MultiEdit", "Write", "NotebookEdit"];

/// One entry of a rule list of the context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleEntry {
    /// Where it is in the context: `auto_mode.allow.2`, `rules.deny.0`.
    pub(crate) path: String,
    /// The entry as written.
    pub(crate) text: String,
    /// The entry parsed, when it is in permission-rule syntax.
    pub(crate) rule: Option<Rule>,
}

/// A permission rule: a tool name and an optional specifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) tool: String,
    pub(crate) spec: Option<String>,
}

/// Which side a rule is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Allow,
    Deny,
}

/// What a call does, as the rules see it.
#[derive(Debug, Default)]
pub(crate) struct Facts<'a> {
    pub(crate) tool: &'a str,
    /// Shell only: the words of each simple command.
    pub(crate) commands: Vec<Vec<String>>,
    /// Files read (exactly these).
    pub(crate) read_files: Vec<String>,
    /// Directories listed or searched, or shell arguments that may be directories.
    pub(crate) read_dirs: Vec<String>,
    /// Files written.
    pub(crate) writes: Vec<String>,
    /// The call writes in the project without naming files (`git commit`, `cargo fmt`).
    pub(crate) implicit_edit: bool,
    /// WebFetch only.
    pub(crate) url: Option<&'a str>,
}

impl Rule {
    /// `Tool` or `Tool(specifier)`; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Rule> {
        let text = text.trim();
        let (name, spec) = match text.find('(') {
            None => (text, None),
            Some(open) => {
                let inner = text.get(open + 1..)?.strip_suffix(')')?;
                if inner.is_empty() || inner.len() > MAX_SPEC_BYTES {
                    return None;
                }
                (text.get(..open)?, Some(unescape(inner)))
            }
        };
        let valid_name = !name.is_empty()
            && name.len() <= 256
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'*')
            && name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic());
        valid_name.then(|| Rule {
            tool: name.to_owned(),
            spec,
        })
    }
}

/// `\(`, `\)` and `\\` in a specifier stand for the character itself.
fn unescape(spec: &str) -> String {
    let mut out = String::with_capacity(spec.len());
    let mut chars = spec.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(next @ ('(' | ')' | '\\')) => out.push(next),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}
