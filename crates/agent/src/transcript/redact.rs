//! What a trace may not keep, replaced by placeholders before a message is stored.
//!
//! The rules, applied to every string of a message (object keys are scrubbed too):
//! 1. **Secrets.** A string under a key that names a secret (`key`, `token`, `secret`,
//!    `password`, `passwd`, `credential`, `authorization`, `cookie`, in any case and spelling:
//!    `api_key`, `apiKey`, `_meta.api_key`) or anywhere below such a key, and every string below
//!    an `env` or `headers` key, becomes `[redacted secret]`. So does every occurrence of a
//!    secret value the redactor was told about (the API key of the agent's environment), and
//!    any word that looks like a credential (a known key prefix such as `sk-`, `wk-`, `ghp_`,
//!    `eyJ` followed by 16 or more characters, or 40 or more characters mixing letters and
//!    digits).
//! 2. **Prompt and reply text.** A string under a `text` key (the text of prompt content
//!    blocks, of message and thought chunks, of tool call content) becomes
//!    `[redacted text: <length class>]`, where the class is `1-9`, `10-99`, `100-999`,
//!    `1000-9999` or `10000+` characters (an empty text stays empty): a reader sees whether a
//!    reply was empty, short or long, never what it said. The same for image and audio `data`,
//!    for `title` inside a session update, and for every string below `rawInput`, `rawOutput`
//!    or `locations` (a tool's input and output). Error objects keep their text (rule 5).
//! 3. **Paths.** A string under a key naming a path (`cwd`, `home`, `root`, and any key ending
//!    in `path`, `dir`, `directory` or `directories`, such as `mcpConfigPath` and
//!    `additionalDirectories`) becomes `[redacted path]`. In every other string, each path the
//!    redactor was told about (the agent's home and working directory) and every absolute path
//!    (`/x...` at the start of a word, `~/...`, `C:\...`) becomes `[redacted path]`; a URL's
//!    own path is left alone.
//! 4. **Account and user ids.** A string under a key naming an account, a user, an org, an
//!    email or a login, or an id key naming a user, account, org, message, request, trace,
//!    device, machine or installation (`userMessageId`, `turnClientMessageId`,
//!    `turnRequestId`), becomes `[redacted id N]`; session ids become `session-N`; a UUID-shaped
//!    word anywhere else becomes `[redacted id N]`; an email address becomes
//!    `[redacted email]`. N is stable within one trace: the same value gets the same
//!    placeholder, so a reader can still see that a turn's id matches its prompt's. JSON-RPC
//!    request ids are kept: they are the two sides' counters, not linked to an account.
//! 5. **Kept:** method names, the `jsonrpc` tag, every number and boolean, enum-like values
//!    (`stopReason`, `cause`, `sessionUpdate`, error kinds), error codes, error messages and
//!    `data` (scrubbed by rules 1, 3 and 4 only), option ids and names, model labels,
//!    `agentInfo` and `clientInfo`, and the shape of every object and list.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// What a trace's header lists as redacted.
pub const REDACTED: [&str; 5] = [
    "secrets",
    "prompt-text",
    "paths",
    "account-ids",
    "session-ids",
];
/// The placeholder of a secret.
pub const SECRET: &str = "[redacted secret]";
/// The placeholder of a path.
pub const PATH: &str = "[redacted path]";
/// The placeholder of an email address.
pub const EMAIL: &str = "[redacted email]";
/// How every text placeholder starts (the replay fills these in).
pub const TEXT_PREFIX: &str = "[redacted text: ";

/// Key words that mark a secret.
const SECRET_WORDS: [&str; 8] = [
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "authorization",
    "cookie",
];
/// Keys whose whole subtree is secret.
const SECRET_SUBTREES: [&str; 2] = ["env", "headers"];
/// Keys whose subtree is a tool's input or output.
const TOOL_IO: [&str; 3] = ["rawinput", "rawoutput", "locations"];
/// Keys that name an account or a person.
const ACCOUNT_KEYS: [&str; 9] = [
    "email",
    "user",
    "username",
    "login",
    "account",
    "org",
    "organization",
    "tenant",
    "team",
];
/// Words that, in an id key, tie the id to an account or a person.
const ACCOUNT_ID_WORDS: [&str; 10] = [
    "user", "account", "org", "message", "request", "trace", "device", "machine", "install",
    "email",
];
/// Prefixes of well-known credential formats.
const CREDENTIAL_PREFIXES: [&str; 8] =
    ["sk-", "wk-", "ghp_", "gho_", "ghs_", "xoxb-", "eyJ", "AKIA"];

/// Where in a message a value sits.
#[derive(Debug, Clone, Copy, Default)]
struct Context {
    secret: bool,
    tool_io: bool,
    in_error: bool,
    in_update: bool,
}

/// Redacts messages by the rules of this module. One redactor serves one trace, so that its
/// id placeholders are stable across the trace's messages.
#[derive(Debug, Default)]
pub struct Redactor {
    secrets: Vec<String>,
    paths: Vec<String>,
    ids: HashMap<String, String>,
    sessions: HashMap<String, String>,
}

impl Redactor {
    pub fn new() -> Self {
        Self::default()
    }

    /// A redactor told about the secrets and paths of an agent's launch: the values of its
    /// environment whose names mark a secret, and its working directory, `HOME`, `TMPDIR` and
    /// `XDG_*` directories.
    pub fn for_spec(spec: &crate::process::Spec) -> Self {
        let mut redactor = Self::new().path(&spec.cwd.display().to_string());
        for (name, value) in &spec.env {
            let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
                continue;
            };
            let lower = name.to_ascii_lowercase();
            if SECRET_WORDS.iter().any(|word| lower.contains(word)) {
                redactor = redactor.secret(value);
            } else if name == "HOME" || name == "TMPDIR" || name.starts_with("XDG_") {
                redactor = redactor.path(value);
            }
        }
        redactor
    }

    /// A secret value to replace wherever it occurs (values under 4 characters are ignored:
    /// they would match everywhere and protect nothing).
    pub fn secret(mut self, value: &str) -> Self {
        if value.chars().count() >= 4 && !self.secrets.iter().any(|known| known == value) {
            self.secrets.push(value.to_owned());
            // Longest first, so a secret that contains another is replaced whole.
            self.secrets
                .sort_by_key(|known| std::cmp::Reverse(known.len()));
        }
        self
    }

    /// A path to replace wherever it occurs (the root and relative paths are ignored).
    pub fn path(mut self, value: &str) -> Self {
        let value = value.trim_end_matches('/');
        if value.starts_with('/') && value.len() > 1 && !self.paths.iter().any(|p| p == value) {
            self.paths.push(value.to_owned());
            self.paths
                .sort_by_key(|known| std::cmp::Reverse(known.len()));
        }
        self
    }

    /// Redacts one JSON-RPC message in place.
    pub fn redact(&mut self, message: &mut Value) {
        let in_update = message.get("method").and_then(Value::as_str) == Some("session/update");
        self.walk(
            message,
            None,
            Context {
                in_update,
                ..Context::default()
            },
        );
    }

    fn walk(&mut self, value: &mut Value, key: Option<&str>, context: Context) {
        match value {
            Value::String(text) => {
                if let Some(replaced) = self.string(text, key, context) {
                    *text = replaced;
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.walk(item, key, context);
                }
            }
            Value::Object(object) => self.object(object, context),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    fn object(&mut self, object: &mut Map<String, Value>, context: Context) {
        let media = matches!(
            object.get("type").and_then(Value::as_str),
            Some("image" | "audio")
        );
        let entries = std::mem::take(object);
        for (key, mut value) in entries {
            let lower = key.to_ascii_lowercase();
            let mut inner = context;
            inner.secret |= is_secret_key(&lower) || SECRET_SUBTREES.contains(&lower.as_str());
            inner.tool_io |= TOOL_IO.contains(&lower.as_str());
            inner.in_error |= lower == "error";
            if media && lower == "data" {
                if let Value::String(data) = &mut value {
                    *data = text_placeholder(data.chars().count());
                }
            } else {
                self.walk(&mut value, Some(&key), inner);
            }
            let key = self.scrub(&key);
            object.insert(key, value);
        }
    }

    /// The replacement of `text` at `key`, or `None` to keep it.
    fn string(&mut self, text: &str, key: Option<&str>, context: Context) -> Option<String> {
        let lower = key.map(str::to_ascii_lowercase).unwrap_or_default();
        if text.is_empty() || lower == "method" || lower == "jsonrpc" {
            return None;
        }
        if context.secret {
            return Some(SECRET.to_owned());
        }
        if context.tool_io
            || (!context.in_error && lower == "text")
            || (context.in_update && lower == "title")
        {
            return Some(text_placeholder(text.chars().count()));
        }
        if is_path_key(&lower) {
            return Some(PATH.to_owned());
        }
        if lower == "sessionid" {
            let next = self.sessions.len() + 1;
            return Some(
                self.sessions
                    .entry(text.to_owned())
                    .or_insert_with(|| format!("session-{next}"))
                    .clone(),
            );
        }
        if is_account_key(&lower) {
            return Some(self.id(text));
        }
        let scrubbed = self.scrub(text);
        (scrubbed != text).then_some(scrubbed)
    }

    /// The stable placeholder of an account-linked id.
    fn id(&mut self, value: &str) -> String {
        let next = self.ids.len() + 1;
        self.ids
            .entry(value.to_owned())
            .or_insert_with(|| format!("[redacted id {next}]"))
            .clone()
    }

    /// Free text with secrets, paths, emails, credential-like and UUID-shaped words replaced.
    fn scrub(&mut self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), SECRET);
            }
        }
        for path in &self.paths {
            if out.contains(path.as_str()) {
                out = out.replace(path.as_str(), PATH);
            }
        }
        let out = replace_words(&out, |word| {
            if looks_like_credential(word) {
                Some(SECRET.to_owned())
            } else if looks_like_uuid(word) {
                Some(self.id(word))
            } else if looks_like_email(word) {
                Some(EMAIL.to_owned())
            } else {
                None
            }
        });
        replace_paths(&out)
    }
}

/// The placeholder of a text of `chars` characters.
pub fn text_placeholder(chars: usize) -> String {
    if chars == 0 {
        return String::new();
    }
    let class = match chars {
        1..=9 => "1-9",
        10..=99 => "10-99",
        100..=999 => "100-999",
        1000..=9999 => "1000-9999",
        _ => "10000+",
    };
    format!("{TEXT_PREFIX}{class} chars]")
}

fn is_secret_key(lower: &str) -> bool {
    SECRET_WORDS.iter().any(|word| lower.contains(word))
}

fn is_path_key(lower: &str) -> bool {
    // A vendor prefix (`cognition.ai/mcpConfigPath`) does not hide the key's meaning.
    let name = lower.rsplit('/').next().unwrap_or(lower);
    matches!(name, "cwd" | "home" | "root")
        || ["path", "dir", "directory", "directories", "paths"]
            .iter()
            .any(|end| name.ends_with(end))
}

fn is_account_key(lower: &str) -> bool {
    let name = lower.rsplit('/').next().unwrap_or(lower);
    if ACCOUNT_KEYS.contains(&name) {
        return true;
    }
    let id_key = name.ends_with("id") || name.ends_with("_id");
    id_key && ACCOUNT_ID_WORDS.iter().any(|word| name.contains(word))
}

/// Characters a word (a credential, an id, an email) is made of.
fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+' | '=' | '@' | '%')
}

/// `text` with each maximal word of [`word_char`]s replaced where `replace` says so.
fn replace_words(text: &str, mut replace: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let mut flush = |word: &mut String, out: &mut String| {
        if !word.is_empty() {
            match replace(word) {
                Some(replaced) => out.push_str(&replaced),
                None => out.push_str(word),
            }
            word.clear();
        }
    };
    for c in text.chars() {
        if word_char(c) {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn looks_like_credential(word: &str) -> bool {
    let word = word.trim_matches(|c: char| c == '.' || c == '=');
    let letters = word.chars().any(|c| c.is_ascii_alphabetic());
    let digits = word.chars().any(|c| c.is_ascii_digit());
    let prefixed = CREDENTIAL_PREFIXES
        .iter()
        .any(|prefix| word.starts_with(prefix) && word.len() >= prefix.len() + 16);
    prefixed || (word.len() >= 40 && letters && digits)
}

fn looks_like_uuid(word: &str) -> bool {
    let groups: Vec<&str> = word.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len && group.chars().all(|c| c.is_ascii_hexdigit()))
}

fn looks_like_email(word: &str) -> bool {
    let Some((local, domain)) = word.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && domain
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
}

/// Characters that end a path inside free text.
fn ends_path(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | ')' | ']' | '}' | '>' | ',' | ';')
}

/// Characters after which a `/` starts a path (rather than sit inside a word or a URL).
fn starts_path_after(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '(' | '[' | '{' | '<' | '=' | ',')
}

/// `text` with every absolute path replaced by [`PATH`].
fn replace_paths(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while index < chars.len() {
        let previous = index.checked_sub(1).map(|at| chars[at]);
        let at_word_start = previous.is_none_or(starts_path_after);
        let next = chars.get(index + 1).copied();
        let path_char = |c: Option<char>| {
            c.is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '~'))
        };
        let starts = at_word_start
            && match chars[index] {
                '/' => path_char(next),
                '~' => next == Some('/'),
                c if c.is_ascii_alphabetic() => {
                    next == Some(':') && chars.get(index + 2) == Some(&'\\')
                }
                _ => false,
            };
        if starts && !out.ends_with(PATH) {
            let mut end = index;
            while end < chars.len() && !ends_path(chars[end]) {
                end += 1;
            }
            out.push_str(PATH);
            index = end;
        } else {
            out.push(chars[index]);
            index += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_text_loses_paths_emails_ids_and_credentials_but_keeps_urls_and_words() {
        let mut redactor = Redactor::new();
        let text = "open /home/ana/x.rs (or ~/y) for ana@example.com at \
                    https://api.example.com/v1 id 123e4567-e89b-12d3-a456-426614174000 \
                    key sk-abcdefghijklmnopqrstu and C:\\Users\\ana";
        let out = redactor.scrub(text);
        for gone in [
            "/home/ana",
            "~/y",
            "ana@example.com",
            "123e4567",
            "sk-abc",
            "Users",
        ] {
            assert!(!out.contains(gone), "{gone} survived: {out}");
        }
        assert!(out.contains("https://api.example.com/v1"), "{out}");
        assert!(out.contains("[redacted id 1]"), "{out}");
        assert_eq!(
            redactor.scrub("session/new text/plain"),
            "session/new text/plain"
        );
    }

    #[test]
    fn text_placeholders_keep_the_length_class_only() {
        assert_eq!(text_placeholder(0), "");
        assert_eq!(text_placeholder(2), "[redacted text: 1-9 chars]");
        assert_eq!(text_placeholder(42), "[redacted text: 10-99 chars]");
        assert_eq!(text_placeholder(12_345), "[redacted text: 10000+ chars]");
    }

    #[test]
    fn key_rules_name_what_they_should_and_no_more() {
        for secret in [
            "api_key",
            "apikey",
            "x-auth-token",
            "client_secret",
            "password",
        ] {
            assert!(is_secret_key(secret), "{secret}");
        }
        for kept in ["sessionupdate", "stopreason", "configid", "cause"] {
            assert!(!is_secret_key(kept), "{kept}");
        }
        for id in [
            "cognition.ai/usermessageid",
            "turnclientmessageid",
            "turnrequestid",
            "email",
            "user_id",
        ] {
            assert!(is_account_key(id), "{id}");
        }
        for kept in ["toolcallid", "configid", "modeid", "uid", "id"] {
            assert!(!is_account_key(kept), "{kept}");
        }
        for path in ["cwd", "cognition.ai/mcpconfigpath", "additionaldirectories"] {
            assert!(is_path_key(path), "{path}");
        }
    }
}
