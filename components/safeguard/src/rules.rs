//! The user's rules, in Claude Code's permission-rule syntax: `Tool` or `Tool(specifier)`.
//!
//! Invariants:
//! - Only that syntax is machine-readable; anything else (prose such as "never push to
//!   main") is kept for its index but never matches.
//! - Matching has two directions. A deny-side rule (`auto_mode.hard_deny`, `soft_deny`,
//!   `rules.deny`, `rules.ask`) may match too much: that only blocks. An allow-side rule
//!   (`auto_mode.allow`) matches only what it certainly names: word-aligned prefixes, exact
//!   hosts, and never a path pattern that starts with a single `/` (relative to a settings
//!   file the judge cannot see, or absolute: ambiguous).
//! - `Bash(...)` specifiers are matched against one simple command of the parsed line (its
//!   words after quote removal, joined with single spaces), never against the raw line.
//! - Matching is linear or bounded: `*`-only text patterns match by literal segments;
//!   component patterns are at most [`MAX_SPEC_BYTES`] long.

use crate::context::Context;
use crate::pathname::normalize;
use crate::paths::SENSITIVE_NAMES;
pub(crate) use crate::rule::{Facts, Rule, Side, EDIT_TOOLS, READ_TOOLS};

impl Rule {
    /// A deny-side rule that matches the call.
    pub(crate) fn denies(&self, facts: &Facts<'_>, ctx: &Context) -> bool {
        let spec = self.spec.as_deref();
        if self.tool == "Bash" {
            return facts.tool == "Bash"
                && spec.is_none_or(|spec| {
                    facts
                        .commands
                        .iter()
                        .any(|words| bash_matches(spec, words, Side::Deny))
                });
        }
        // A path specifier the judge cannot read (`$HOME/x`, `~/x` without a home directory)
        // is taken to match every call of its family.
        let readable = |spec: &str| {
            let patterns = patterns(spec, ctx, Side::Deny);
            (!patterns.is_empty()).then_some(patterns)
        };
        if READ_TOOLS.contains(&self.tool.as_str()) {
            let reads = !facts.read_files.is_empty() || !facts.read_dirs.is_empty();
            let any_read = READ_TOOLS.contains(&facts.tool) || (facts.tool == "Bash" && reads);
            return match spec.map(readable) {
                None | Some(None) => any_read,
                Some(Some(patterns)) => {
                    // A rule matches a path the call names, or a directory above it; a rule
                    // naming a file inside a searched directory does not match the search
                    // (documented limit, like sensitive files inside a searched directory).
                    facts
                        .read_files
                        .iter()
                        .chain(&facts.read_dirs)
                        .any(|path| patterns.iter().any(|p| covers(p, path)))
                }
            };
        }
        if EDIT_TOOLS.contains(&self.tool.as_str()) {
            let any_edit = EDIT_TOOLS.contains(&facts.tool) || !facts.writes.is_empty();
            return match spec.map(readable) {
                None => any_edit || facts.implicit_edit,
                Some(None) => any_edit,
                Some(Some(patterns)) => facts
                    .writes
                    .iter()
                    .any(|file| patterns.iter().any(|p| covers(p, file))),
            };
        }
        if self.tool == "WebFetch" && facts.tool == "WebFetch" {
            return spec.is_none_or(|spec| domain_matches(spec, facts.url, Side::Deny));
        }
        // Any other tool: its specifier's meaning is unknown, so it is taken to match.
        tool_name_matches(&self.tool, facts.tool)
    }

    /// An allow-side rule that matches the whole of a non-shell call.
    pub(crate) fn allows_call(&self, facts: &Facts<'_>, ctx: &Context) -> bool {
        let spec = self.spec.as_deref();
        let family =
            |tools: &[&str]| tools.contains(&self.tool.as_str()) && tools.contains(&facts.tool);
        if family(&READ_TOOLS) {
            return match spec {
                None => true,
                Some(spec) => {
                    let patterns = patterns(spec, ctx, Side::Allow);
                    facts
                        .read_files
                        .iter()
                        .all(|file| patterns.iter().any(|p| covers(p, file)))
                        && facts
                            .read_dirs
                            .iter()
                            .all(|dir| patterns.iter().any(|p| covers_dir(p, dir)))
                }
            };
        }
        if family(&EDIT_TOOLS) {
            return match spec {
                None => true,
                Some(spec) => {
                    let patterns = patterns(spec, ctx, Side::Allow);
                    facts
                        .writes
                        .iter()
                        .all(|file| patterns.iter().any(|p| covers(p, file)))
                }
            };
        }
        if self.tool == "WebFetch" && facts.tool == "WebFetch" {
            return spec.is_none_or(|spec| domain_matches(spec, facts.url, Side::Allow));
        }
        facts.tool != "Bash" && spec.is_none() && tool_name_matches(&self.tool, facts.tool)
    }

    /// An allow-side `Bash` rule that matches one simple command.
    pub(crate) fn allows_command(&self, words: &[String]) -> bool {
        self.tool == "Bash"
            && self
                .spec
                .as_deref()
                .is_none_or(|spec| bash_matches(spec, words, Side::Allow))
    }

    /// An allow-side `Edit`-family rule that covers a file the shell writes (a redirection).
    pub(crate) fn allows_write(&self, path: &str, ctx: &Context) -> bool {
        EDIT_TOOLS.contains(&self.tool.as_str())
            && self.spec.as_deref().is_some_and(|spec| {
                patterns(spec, ctx, Side::Allow)
                    .iter()
                    .any(|p| covers(p, path))
            })
    }
}

/// A rule's tool name against a call's: equal, `Task`/`Agent` (one tool, renamed), or an MCP
/// server rule (`mcp__server`, `mcp__server__*`) against one of its tools.
pub(crate) fn tool_name_matches(rule: &str, tool: &str) -> bool {
    if rule == tool {
        return true;
    }
    if matches!((rule, tool), ("Task", "Agent") | ("Agent", "Task")) {
        return true;
    }
    if let Some(server) = rule.strip_prefix("mcp__") {
        let server = server.strip_suffix("__*").unwrap_or(server);
        if !server.is_empty() && !server.contains("__") && !server.contains('*') {
            return tool
                .strip_prefix("mcp__")
                .and_then(|rest| rest.strip_prefix(server))
                .is_some_and(|rest| rest.starts_with("__") && rest.len() > 2);
        }
    }
    false
}

/// A `Bash(...)` specifier against one simple command's words.
pub(crate) fn bash_matches(spec: &str, words: &[String], side: Side) -> bool {
    let text = words.join(" ");
    // `prefix:*` is the legacy prefix form; `prefix *` at the end is the same with a space.
    let prefix = spec
        .strip_suffix(":*")
        .or_else(|| spec.strip_suffix(" *"))
        .filter(|prefix| !prefix.contains('*'));
    match side {
        Side::Deny => {
            if let Some(prefix) = spec.strip_suffix(":*") {
                return text.starts_with(prefix.trim_end())
                    || glob_text(&format!("{prefix}*"), &text);
            }
            if let Some(prefix) = spec.strip_suffix(" *") {
                if text == prefix.trim_end() {
                    return true;
                }
            }
            glob_text(spec, &text)
        }
        Side::Allow => {
            if let Some(prefix) = prefix {
                return starts_with_words(words, prefix);
            }
            if !spec.contains('*') {
                return split_words(spec).eq(words.iter().map(String::as_str));
            }
            // A wildcard anywhere else is matched on the joined text, which is faithful only
            // when no word holds whitespace of its own.
            !words.iter().any(|word| word.contains(char::is_whitespace)) && glob_text(spec, &text)
        }
    }
}

fn split_words(spec: &str) -> impl Iterator<Item = &str> {
    spec.split(' ').filter(|word| !word.is_empty())
}

fn starts_with_words(words: &[String], prefix: &str) -> bool {
    let wanted: Vec<&str> = split_words(prefix).collect();
    !wanted.is_empty()
        && wanted.len() <= words.len()
        && wanted.iter().zip(words).all(|(want, word)| *want == word)
}

/// `*`-only wildcard match of the whole text: literal segments found left to right (the
/// leftmost occurrence is always a correct choice), so the cost is linear.
pub(crate) fn glob_text(pattern: &str, text: &str) -> bool {
    let segments: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = segments.as_slice() else {
        return pattern == text;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    for segment in middle {
        match rest.find(segment) {
            Some(at) => rest = &rest[at + segment.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The absolute patterns a path specifier stands for (several when its root is ambiguous and
/// the side allows over-matching; none when it cannot be read).
pub(crate) fn patterns(spec: &str, ctx: &Context, side: Side) -> Vec<String> {
    if spec.contains('$') || spec.chars().any(char::is_control) {
        return Vec::new();
    }
    let spec = spec.trim_end_matches('/');
    let mut roots: Vec<String> = Vec::new();
    let tail: &str;
    if let Some(abs) = spec.strip_prefix("//") {
        roots.push(String::new());
        tail = abs;
    } else if let Some(rest) = spec.strip_prefix("~/") {
        roots.extend(ctx.home.clone());
        tail = rest;
    } else if let Some(rest) = spec.strip_prefix('/') {
        // Relative to the settings file that holds the rule, which the judge cannot see.
        if side == Side::Deny {
            roots.push(String::new());
            roots.extend(ctx.primary.clone());
            roots.extend(ctx.cwd.clone());
        }
        tail = rest;
    } else {
        roots.extend(ctx.cwd.clone());
        // gitignore: a bare pattern without a slash matches a name at any depth; `./x` is
        // anchored to the working directory.
        return match spec.strip_prefix("./") {
            Some(rest) => roots
                .iter()
                .map(|root| fold(&format!("{root}/{rest}")))
                .collect(),
            None if spec.contains('/') => roots
                .iter()
                .map(|root| fold(&format!("{root}/{spec}")))
                .collect(),
            None => roots
                .iter()
                .map(|root| fold(&format!("{root}/**/{spec}")))
                .collect(),
        };
    }
    roots
        .iter()
        .map(|root| fold(&format!("{root}/{tail}")))
        .collect()
}

/// Folds `.` and `..` in a pattern like a path (a pattern component is never `..`).
fn fold(pattern: &str) -> String {
    normalize(pattern)
}

/// The pattern matches `path` or one of its ancestors (a matched directory covers its
/// contents, as in gitignore).
pub(crate) fn covers(pattern: &str, path: &str) -> bool {
    run_components(pattern, path, true)
}

/// The pattern covers everything below `dir`: it covers `dir`, or it ends in `*`/`**` and its
/// directory part covers `dir`.
pub(crate) fn covers_dir(pattern: &str, dir: &str) -> bool {
    if covers(pattern, dir) {
        return true;
    }
    match pattern.rsplit_once('/') {
        Some((parent, "*" | "**")) => covers(if parent.is_empty() { "/" } else { parent }, dir),
        _ => false,
    }
}

/// Component-wise match: `**` spans any number of components, other components match one
/// name with `*`, `?` and `[...]`. One pass over the path's components with the set of
/// pattern positions reached (an NFA), so the cost is components x pattern components, and
/// `prefix` answers "does the pattern match the path or one of its ancestors" in that pass.
fn run_components(pattern: &str, path: &str, prefix: bool) -> bool {
    let pats: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    let end = pats.len();
    let close = |states: &mut Vec<bool>| {
        for j in 0..end {
            if states[j] && pats[j] == "**" {
                states[j + 1] = true;
            }
        }
    };
    let mut states = vec![false; end + 1];
    states[0] = true;
    close(&mut states);
    if prefix && states[end] {
        return true;
    }
    for name in path.split('/').filter(|c| !c.is_empty()) {
        let mut next = vec![false; end + 1];
        for j in 0..end {
            if !states[j] {
                continue;
            }
            if pats[j] == "**" {
                next[j] = true;
            } else if match_name(pats[j].as_bytes(), name.as_bytes()) {
                next[j + 1] = true;
            }
        }
        close(&mut next);
        if !next.contains(&true) {
            return false;
        }
        states = next;
        if prefix && states[end] {
            return true;
        }
    }
    states[end]
}

/// Names that stand for the sensitive-name rules beyond [`SENSITIVE_NAMES`] (variants, key
/// files, state files), for [`targets_sensitive`].
const MORE_SENSITIVE_EXAMPLES: [&str; 24] = [
    ".env.local",
    ".dev.vars.production",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "id_deploy",
    "server.pem",
    "server.key",
    "store.p12",
    "store.pfx",
    "release.jks",
    "debug.keystore",
    "authkey.p8",
    "putty.ppk",
    "vault.kdbx",
    "terraform.tfstate",
    "terraform.tfstate.backup",
    "terraform.tfvars",
    "prod.tfvars.json",
    "service-account.json",
    "service-account-prod.json",
    ".docker",
    ".kube",
];

/// Ordinary names: a pattern matching one of them is broad, not aimed at secrets.
const ORDINARY_EXAMPLES: [&str; 5] = [
    "ordinary",
    "ordinary.txt",
    "ordinary.json",
    ".ordinary",
    "ordinary.rs",
];

/// Most alternatives a brace pattern is expanded to before it is taken to target anything.
const MAX_ALTERNATIVES: usize = 64;

/// Whether a file pattern (a Grep `glob` filter, a pattern a linter expands) singles out
/// sensitive files: one of its components matches a sensitive name but not an ordinary one
/// (`.env*`, `*.pem`, `{.npmrc,x}`). A pattern matching every name (`*`) is not singling out:
/// it is like searching the directory, which the judge allows.
pub(crate) fn targets_sensitive(pattern: &str) -> Option<&'static str> {
    let Some(alternatives) = expand_braces(pattern) else {
        return Some("a pattern with too many alternatives");
    };
    for alternative in &alternatives {
        for component in alternative
            .split('/')
            .filter(|c| !c.is_empty() && *c != "**")
        {
            // Names are compared without regard to case, as on a default macOS disk.
            let lower = component.to_ascii_lowercase();
            let component = lower.as_bytes();
            if ORDINARY_EXAMPLES
                .iter()
                .any(|name| match_name(component, name.as_bytes()))
            {
                continue;
            }
            if let Some(name) = SENSITIVE_NAMES
                .iter()
                .chain(&MORE_SENSITIVE_EXAMPLES)
                .find(|name| match_name(component, name.as_bytes()))
            {
                return Some(name);
            }
        }
    }
    None
}

/// Whether the patterns a command uses to leave files out (`--exclude`, `-g '!…'`, a
/// `:(exclude)` pathspec, `! -name`), taken together, leave out every ordinary name but keep
/// a sensitive one: what is left is then the secrets (`--exclude='*[!v]'` keeps `.env`).
pub(crate) fn excludes_all_but_sensitive(patterns: &[&str]) -> Option<&'static str> {
    let mut lower: Vec<String> = Vec::new();
    for pattern in patterns {
        let Some(alternatives) = expand_braces(pattern) else {
            return Some("a pattern with too many alternatives");
        };
        lower.extend(alternatives.iter().map(|a| a.to_ascii_lowercase()));
        if lower.len() > MAX_ALTERNATIVES {
            return Some("a pattern with too many alternatives");
        }
    }
    let matches = |name: &str| {
        lower.iter().any(|alternative| {
            alternative
                .rsplit('/')
                .next()
                .is_some_and(|last| match_name(last.as_bytes(), name.as_bytes()))
        })
    };
    if patterns.is_empty() || !ORDINARY_EXAMPLES.iter().all(|name| matches(name)) {
        return None;
    }
    SENSITIVE_NAMES
        .iter()
        .chain(&MORE_SENSITIVE_EXAMPLES)
        .find(|name| !matches(name))
        .copied()
}

/// Whether the wildcard part of a file pattern could leave the directory it starts in: a
/// `..` (literal, or a bracket expression matching it), a `~`, or a brace alternative that
/// starts at `/`. Too many alternatives count as leaving.
pub(crate) fn may_climb(pattern: &str) -> bool {
    if pattern.contains("..") || pattern.contains('~') {
        return true;
    }
    let Some(alternatives) = expand_braces(pattern) else {
        return true;
    };
    alternatives.iter().any(|alternative| {
        alternative.starts_with('/')
            || alternative
                .split('/')
                .any(|component| component.contains('[') && match_name(component.as_bytes(), b".."))
    })
}

/// Whether a glob the shell expands could climb: [`may_climb`], or a component with a
/// wildcard that starts with `.` or `[` and can match `..` (`.*` matches `..` in bash before
/// 5.2; a leading `*` or `?` never matches a leading dot).
pub(crate) fn shell_glob_may_climb(pattern: &str) -> bool {
    may_climb(pattern)
        || pattern.split('/').any(|component| {
            component.contains(['*', '?', '['])
                && (component.starts_with('.') || component.starts_with('['))
                && match_name(component.as_bytes(), b"..")
        })
}

/// `a{b,c}d` -> `abd`, `acd` (nested groups too); `None` past [`MAX_ALTERNATIVES`].
fn expand_braces(pattern: &str) -> Option<Vec<String>> {
    let mut done = Vec::new();
    let mut pending = vec![pattern.to_owned()];
    while let Some(current) = pending.pop() {
        // The innermost group: the last `{` before the first `}` that follows it.
        let group = current
            .find('}')
            .and_then(|close| current[..close].rfind('{').map(|open| (open, close)));
        match group {
            Some((open, close)) => {
                let (head, body, tail) = (
                    &current[..open],
                    &current[open + 1..close],
                    &current[close + 1..],
                );
                for part in body.split(',') {
                    pending.push(format!("{head}{part}{tail}"));
                }
            }
            None => done.push(current),
        }
        if done.len() + pending.len() > MAX_ALTERNATIVES {
            return None;
        }
    }
    Some(done)
}

/// One name against one component pattern (`*`, `?`, `[abc]`, `[a-z]`, `[!x]`).
fn match_name(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some(b'?') => Some(1),
            Some(b'[') => class(&pattern[p..], name[n]),
            Some(c) if *c == name[n] => Some(1),
            _ => None,
        };
        match step {
            Some(len) => {
                p += len;
                n += 1;
            }
            None => match star {
                Some((star_p, star_n)) => {
                    p = star_p + 1;
                    n = star_n + 1;
                    star = Some((star_p, star_n + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == b'*')
}

/// A `[...]` class at the start of `pattern` against one byte: the class length when it
/// matches. An unterminated `[` is a literal `[`.
fn class(pattern: &[u8], byte: u8) -> Option<usize> {
    let Some(end) = pattern
        .iter()
        .skip(2)
        .position(|c| *c == b']')
        .map(|at| at + 2)
    else {
        return (byte == b'[').then_some(1);
    };
    let mut body = &pattern[1..end];
    let negated = matches!(body.first(), Some(b'!' | b'^'));
    if negated {
        body = &body[1..];
    }
    let mut hit = false;
    let mut i = 0;
    while i < body.len() {
        if i + 2 < body.len() && body[i + 1] == b'-' {
            hit |= (body[i]..=body[i + 2]).contains(&byte);
            i += 3;
        } else {
            hit |= body[i] == byte;
            i += 1;
        }
    }
    (hit != negated).then_some(end + 1)
}

/// A `WebFetch` specifier against the call's URL. Only `domain:host` is understood; the
/// allow side needs the exact host (or `*.suffix`), the deny side also takes subdomains.
fn domain_matches(spec: &str, url: Option<&str>, side: Side) -> bool {
    let Some(domain) = spec.strip_prefix("domain:") else {
        return side == Side::Deny;
    };
    let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
    let Some(host) = url.and_then(url_host) else {
        return side == Side::Deny;
    };
    if let Some(suffix) = domain.strip_prefix("*.") {
        return host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}"));
    }
    match side {
        Side::Allow => host == domain,
        Side::Deny => host == domain || host.ends_with(&format!(".{domain}")),
    }
}

/// The host of an `http`/`https` URL, lowercased, without user info, port or final dot.
pub(crate) fn url_host(url: &str) -> Option<String> {
    let lower = url.trim().to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#', '\\']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host_port.split(':').next()?
    };
    let host = host.trim_end_matches('.');
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'_'));
    valid.then(|| host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    fn ctx() -> Context {
        Context {
            cwd: Some("/proj".to_owned()),
            home: Some("/home/u".to_owned()),
            primary: Some("/proj".to_owned()),
            trusted: vec!["/proj".to_owned()],
            ..Context::default()
        }
    }

    #[test]
    fn parses_rule_syntax_only() {
        assert_eq!(
            Rule::parse("Bash"),
            Some(Rule {
                tool: "Bash".into(),
                spec: None
            })
        );
        assert_eq!(
            Rule::parse(" Bash(npm run test:*) "),
            Some(Rule {
                tool: "Bash".into(),
                spec: Some("npm run test:*".into())
            })
        );
        assert_eq!(
            Rule::parse(r"Bash(echo \(hi\))").and_then(|r| r.spec),
            Some("echo (hi)".into())
        );
        assert_eq!(
            Rule::parse("mcp__github__get_issue").map(|r| r.tool),
            Some("mcp__github__get_issue".into())
        );
        for prose in [
            "Never push to main",
            "Bash(",
            "Bash()",
            "(x)",
            "",
            "Run tests (npm)",
            "9lives",
        ] {
            assert_eq!(Rule::parse(prose), None, "{prose}");
        }
    }

    #[test]
    fn bash_allow_is_word_aligned() {
        let allow = |spec: &str, line: &str| bash_matches(spec, &words(line), Side::Allow);
        assert!(allow("git status:*", "git status"));
        assert!(allow("git status:*", "git status --short"));
        assert!(!allow("git status:*", "git statusx"));
        assert!(allow("npm run test:*", "npm run test"));
        assert!(!allow("npm run test:*", "npm run test:evil"));
        assert!(allow("ls *", "ls -la"));
        assert!(allow("ls *", "ls"));
        assert!(!allow("ls *", "lsof"));
        assert!(allow("ls*", "lsof"));
        assert!(allow("make build", "make build"));
        assert!(!allow("make build", "make build extra"));
        assert!(allow("git * main", "git push origin main"));
        assert!(!allow("git * main", "git push origin main --force"));
        // A word holding a space cannot shift a mid-pattern wildcard.
        let spaced = vec!["git".to_owned(), "x main".to_owned()];
        assert!(!bash_matches("git * main", &spaced, Side::Allow));
        assert!(bash_matches("git:*", &spaced, Side::Allow));
    }

    #[test]
    fn bash_deny_over_matches() {
        let deny = |spec: &str, line: &str| bash_matches(spec, &words(line), Side::Deny);
        assert!(deny("rm:*", "rm -rf /"));
        assert!(deny("rm:*", "rmdir x"), "deny prefixes are plain prefixes");
        assert!(deny("git push *", "git push"));
        assert!(deny("git push *", "git push --force origin"));
        assert!(deny("* --force", "git push --force"));
        assert!(!deny("git push:*", "git status"));
        assert!(deny("curl", "curl"));
    }

    #[test]
    fn text_globs_are_linear_and_right() {
        assert!(glob_text("a*b*c", "aXXbYYc"));
        assert!(!glob_text("a*b*c", "aXXcYYb"));
        assert!(glob_text("*", ""));
        assert!(glob_text("**", "x"));
        assert!(!glob_text("ab*ba", "aba"));
        assert!(glob_text("x", "x") && !glob_text("x", "xy"));
        let long = "a".repeat(20_000);
        assert!(!glob_text(&format!("{}b*", "*a".repeat(500)), &long));
    }

    #[test]
    fn path_patterns_resolve_like_claude_code() {
        let ctx = ctx();
        assert_eq!(patterns("//etc/**", &ctx, Side::Allow), vec!["/etc/**"]);
        assert_eq!(
            patterns("~/.zshrc", &ctx, Side::Allow),
            vec!["/home/u/.zshrc"]
        );
        assert_eq!(
            patterns("./src/**", &ctx, Side::Allow),
            vec!["/proj/src/**"]
        );
        assert_eq!(
            patterns("src/*.rs", &ctx, Side::Allow),
            vec!["/proj/src/*.rs"]
        );
        assert_eq!(patterns(".env", &ctx, Side::Allow), vec!["/proj/**/.env"]);
        assert_eq!(patterns("./.env", &ctx, Side::Allow), vec!["/proj/.env"]);
        assert_eq!(patterns("*", &ctx, Side::Deny), vec!["/proj/**/*"]);
        assert!(patterns("/src/**", &ctx, Side::Allow).is_empty());
        assert_eq!(patterns("/src/**", &ctx, Side::Deny).len(), 3);
        assert!(patterns("$HOME/x", &ctx, Side::Deny).is_empty());
    }

    #[test]
    fn component_matching() {
        assert!(run_components("/proj/**", "/proj/a/b", false));
        assert!(run_components("/proj/**", "/proj", false));
        assert!(run_components("/proj/**/.env", "/proj/.env", false));
        assert!(run_components("/proj/**/.env", "/proj/a/b/.env", false));
        assert!(!run_components("/proj/**/.env", "/proj/a/b/.env.x", false));
        assert!(run_components("/proj/src/*.rs", "/proj/src/lib.rs", false));
        assert!(!run_components(
            "/proj/src/*.rs",
            "/proj/src/a/lib.rs",
            false
        ));
        assert!(run_components("/p/[a-c]?.t*", "/p/bx.txt", false));
        assert!(!run_components("/p/[!a-c]x", "/p/ax", false));
        assert!(covers("/proj/secrets", "/proj/secrets/a/b"));
        assert!(!covers("/proj/secrets", "/proj/secretsx"));
        assert!(covers_dir("/proj/src/**", "/proj/src"));
        assert!(covers_dir("/proj/*", "/proj"));
        assert!(!covers_dir("/proj/src/*.rs", "/proj/src"));
    }

    #[test]
    fn sensitive_targets() {
        for pattern in [
            ".env*",
            "*.pem",
            "**/.ssh/*",
            "{.npmrc,x}",
            "id_*",
            "?env",
            "a/{b,{.e,x}nv}",
        ] {
            assert!(targets_sensitive(pattern).is_some(), "{pattern}");
        }
        for pattern in [
            "*",
            "**/*",
            "*.rs",
            "*.{ts,tsx}",
            "src/**/*.json",
            "README*",
        ] {
            assert_eq!(targets_sensitive(pattern), None, "{pattern}");
        }
        assert!(
            targets_sensitive(&"{a,b}".repeat(10)).is_some(),
            "too many alternatives"
        );
        for pattern in [
            "*.tfstate",
            "*.JKS",
            ".ENV",
            "service-account*",
            "*.keystore",
        ] {
            assert!(targets_sensitive(pattern).is_some(), "{pattern}");
        }
    }

    #[test]
    fn exclusions_that_keep_only_secrets() {
        assert_eq!(excludes_all_but_sensitive(&["*[!v]"]), Some(".env"));
        assert!(excludes_all_but_sensitive(&["*.rs", "*.txt", "*.json", "*y"]).is_some());
        for patterns in [&["*.rs"][..], &["*"], &["node_modules"], &[]] {
            assert_eq!(excludes_all_but_sensitive(patterns), None, "{patterns:?}");
        }
    }

    #[test]
    fn unreadable_deny_specifiers_match_their_family() {
        let ctx = ctx();
        let rule = Rule::parse("Read($HOME/secret)").unwrap();
        let read = Facts {
            tool: "Read",
            read_files: vec!["/proj/a".into()],
            ..Facts::default()
        };
        let edit = Facts {
            tool: "Edit",
            writes: vec!["/proj/a".into()],
            ..Facts::default()
        };
        assert!(rule.denies(&read, &ctx));
        assert!(!rule.denies(&edit, &ctx));
        assert!(!rule.allows_call(&read, &ctx));
        let rule = Rule::parse("Edit(./src/**)").unwrap();
        assert!(rule.denies(
            &Facts {
                tool: "Write",
                writes: vec!["/proj/src/a".into()],
                ..Facts::default()
            },
            &ctx
        ));
        assert!(!rule.denies(
            &Facts {
                tool: "Write",
                writes: vec!["/proj/docs/a".into()],
                ..Facts::default()
            },
            &ctx
        ));
    }

    #[test]
    fn climbing_patterns() {
        for pattern in [
            "../x",
            "a/../../b",
            "{..,x}/y",
            "{/etc,x}/*",
            "[.][.]/x",
            "~/x",
            "{[.][.],x}/y",
        ] {
            assert!(may_climb(pattern), "{pattern}");
        }
        for pattern in ["**/*.rs", "src/*.{ts,tsx}", ".*", "[ab]/x", "*"] {
            assert!(!may_climb(pattern), "{pattern}");
        }
    }

    #[test]
    fn tool_names_and_mcp_servers() {
        assert!(tool_name_matches("mcp__github", "mcp__github__get_issue"));
        assert!(tool_name_matches(
            "mcp__github__*",
            "mcp__github__get_issue"
        ));
        assert!(!tool_name_matches("mcp__github", "mcp__githubevil__x"));
        assert!(!tool_name_matches("mcp__github", "mcp__github__"));
        assert!(tool_name_matches("Task", "Agent"));
        assert!(!tool_name_matches("Read", "ReadX"));
    }

    #[test]
    fn urls_and_domains() {
        assert_eq!(
            url_host("https://Docs.Rs/serde").as_deref(),
            Some("docs.rs")
        );
        assert_eq!(
            url_host("http://user@example.com:8080/x").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            url_host("https://example.com@evil.com/").as_deref(),
            Some("evil.com")
        );
        assert_eq!(url_host("ftp://example.com"), None);
        assert!(domain_matches(
            "domain:example.com",
            Some("https://example.com/a"),
            Side::Allow
        ));
        assert!(!domain_matches(
            "domain:example.com",
            Some("https://a.example.com/"),
            Side::Allow
        ));
        assert!(domain_matches(
            "domain:example.com",
            Some("https://a.example.com/"),
            Side::Deny
        ));
        assert!(!domain_matches(
            "domain:example.com",
            Some("https://example.com.evil.io/"),
            Side::Allow
        ));
        assert!(!domain_matches(
            "domain:example.com",
            Some("https://notexample.com/"),
            Side::Deny
        ));
    }
}
