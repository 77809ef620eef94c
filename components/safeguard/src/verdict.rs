//! Decisions and the text they carry.
//!
//! Invariants: an explanation is one sentence of at most [`MAX_EXPLANATION_CHARS`] characters;
//! anything taken from the call (a path, a program name, an option) goes through [`show`],
//! which escapes every character that is not printable ASCII (a right-to-left override or a
//! zero-width space in a path cannot reorder or hide text in the client's display) and
//! shortens long values.

use devin_bridge_types::{CallVerdict, Evaluation, SafeguardOutcome};

/// Longest explanation, in characters.
pub(crate) const MAX_EXPLANATION_CHARS: usize = 200;

/// Longest value quoted from a call, in characters (before escaping).
const MAX_SHOWN_CHARS: usize = 80;

/// How the judge decided one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) flagged: bool,
    pub(crate) explanation: String,
    pub(crate) cited_rule: Option<String>,
}

impl Decision {
    pub(crate) fn flag(explanation: impl Into<String>) -> Self {
        Self {
            flagged: true,
            explanation: explanation.into(),
            cited_rule: None,
        }
    }

    pub(crate) fn pass(explanation: impl Into<String>) -> Self {
        Self {
            flagged: false,
            explanation: explanation.into(),
            cited_rule: None,
        }
    }

    pub(crate) fn cite(mut self, path: String) -> Self {
        self.cited_rule = Some(path);
        self
    }

    pub(crate) fn into_verdict(self) -> CallVerdict {
        CallVerdict::Evaluated(Evaluation {
            outcome: if self.flagged {
                SafeguardOutcome::Flagged
            } else {
                SafeguardOutcome::NotFlagged
            },
            explanation: cap(&self.explanation),
            cited_rule: self.cited_rule,
        })
    }
}

/// A value from the call, fit for an explanation: printable ASCII kept, anything else as
/// `\u{…}`, long values cut in the middle.
pub(crate) fn show(value: &str) -> String {
    let count = value.chars().count();
    let mut out = String::new();
    if count <= MAX_SHOWN_CHARS {
        value.chars().for_each(|c| escape_into(&mut out, c));
    } else {
        value
            .chars()
            .take(50)
            .for_each(|c| escape_into(&mut out, c));
        out.push_str("...");
        value
            .chars()
            .skip(count - 25)
            .for_each(|c| escape_into(&mut out, c));
    }
    out
}

fn escape_into(out: &mut String, c: char) {
    if c.is_ascii_graphic() || c == ' ' {
        out.push(c);
    } else {
        out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
    }
}

/// An explanation cut to [`MAX_EXPLANATION_CHARS`] characters.
pub(crate) fn cap(text: &str) -> String {
    if text.chars().count() <= MAX_EXPLANATION_CHARS {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(MAX_EXPLANATION_CHARS - 3).collect();
    out.push_str("...");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_escapes_and_shortens() {
        assert_eq!(show("/proj/a b"), "/proj/a b");
        assert_eq!(show("a\u{202e}b"), "a\\u{202e}b");
        assert_eq!(show("\u{ff52}m"), "\\u{ff52}m");
        let long = "x".repeat(500);
        let shown = show(&long);
        assert!(shown.len() < 120, "{}", shown.len());
        assert!(shown.contains("..."));
    }

    #[test]
    fn cap_limits_explanations() {
        assert_eq!(cap("short"), "short");
        assert_eq!(
            cap(&"y".repeat(1000)).chars().count(),
            MAX_EXPLANATION_CHARS
        );
    }
}
