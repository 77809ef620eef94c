//! Agent error text, made fit for clients.
//!
//! A JSON-RPC error from the agent carries a message written by untrusted code. The host
//! passes it on inside an Anthropic error body, so it is cleaned here first: it is cut to a
//! short length, control and bidirectional-override characters are dropped, every word that
//! looks like a path or URL and every word naming the agent's vendor is replaced by
//! `[redacted]`, and runs of whitespace become single spaces.

/// Characters of the raw message that are looked at, and of the cleaned message at most.
pub(crate) const MAX_CHARS: usize = 200;

/// What replaces a word that must not reach a client.
const REDACTED: &str = "[redacted]";

/// Said instead of a message that is empty once cleaned.
const EMPTY: &str = "unknown error";

/// Words containing one of these (ASCII case-insensitively) name the agent's vendor.
const VENDOR_NAMES: [&str; 3] = ["cognition", "windsurf", "codeium"];

/// The client-safe form of an agent's error message.
pub fn agent_error_message(raw: &str) -> String {
    let head: String = raw.chars().take(MAX_CHARS).collect();
    let mut out = String::with_capacity(head.len().min(MAX_CHARS * 4));
    let mut chars = 0;
    for word in head.split(is_separator).filter(|word| !word.is_empty()) {
        let word = if must_redact(word) { REDACTED } else { word };
        let added = word.chars().count() + usize::from(!out.is_empty());
        if chars + added > MAX_CHARS {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
        chars += added;
    }
    if out.is_empty() {
        return EMPTY.to_owned();
    }
    out
}

/// Whitespace, control characters, and the invisible characters that reorder or hide text.
fn is_separator(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// Paths (either slash) and vendor names.
fn must_redact(word: &str) -> bool {
    if word.contains('/') || word.contains('\\') {
        return true;
    }
    let lower = word.to_ascii_lowercase();
    VENDOR_NAMES.iter().any(|name| lower.contains(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_pass_unchanged() {
        assert_eq!(
            agent_error_message("Internal error: model overloaded"),
            "Internal error: model overloaded"
        );
    }

    #[test]
    fn paths_and_urls_are_redacted() {
        assert_eq!(
            agent_error_message("failed reading /home/user/.secret now"),
            "failed reading [redacted] now"
        );
        assert_eq!(
            agent_error_message(r"cannot open C:\Users\me\key.txt or https://internal.example/x"),
            "cannot open [redacted] or [redacted]"
        );
    }

    #[test]
    fn vendor_names_are_redacted_whatever_their_case() {
        assert_eq!(
            agent_error_message("Cognition backend says no (windsurf-proxy, CODEIUM.svc)"),
            "[redacted] backend says no [redacted] [redacted]"
        );
    }

    #[test]
    fn control_and_bidi_characters_separate_words_and_vanish() {
        assert_eq!(
            agent_error_message("bad\u{1b}[31mred\u{0}\r\nnext\u{202E}txt.exe\u{7f}"),
            "bad [31mred next txt.exe"
        );
        assert_eq!(agent_error_message("a\u{85}b\u{2066}c\u{200B}d"), "a b c d");
    }

    #[test]
    fn whitespace_runs_collapse() {
        assert_eq!(agent_error_message("  a \t\n b  "), "a b");
    }

    #[test]
    fn empty_and_blank_messages_become_unknown_error() {
        assert_eq!(agent_error_message(""), "unknown error");
        assert_eq!(agent_error_message(" \u{0}\n "), "unknown error");
    }

    #[test]
    fn only_the_first_200_characters_are_kept() {
        let long = "é".repeat(500);
        assert_eq!(agent_error_message(&long), "é".repeat(MAX_CHARS));
        let words = format!("{}tail", "word ".repeat(60));
        let cleaned = agent_error_message(&words);
        assert!(cleaned.chars().count() <= MAX_CHARS);
        assert!(!cleaned.contains("tail"), "words past the cap were kept");
    }

    #[test]
    fn redaction_cannot_grow_the_message_past_the_cap() {
        let slashes = "/ ".repeat(100);
        let cleaned = agent_error_message(&slashes);
        assert!(cleaned.chars().count() <= MAX_CHARS, "{}", cleaned.len());
        assert!(cleaned.starts_with("[redacted] [redacted]"));
    }
}
