//! Canonical JSON text and the deterministic tool-call ids.
//!
//! Canonical form: compact (no whitespace), object keys sorted by code point (byte order of their
//! UTF-8) at every depth, strings escaped exactly as serde_json escapes them, numbers as
//! serde_json prints them. The keys are sorted here, explicitly, rather than trusting the
//! iteration order of `serde_json::Map`, which changes when any crate in the build enables
//! serde_json's `preserve_order` feature; the call id must not depend on a feature flag.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fmt::Write;

/// The canonical text of `value`; `size_hint` is a likely length (the text it was parsed from),
/// reserved up front so the text is not regrown as it is written.
pub(crate) fn to_string(value: &Value, size_hint: usize) -> String {
    let mut out = String::with_capacity(size_hint);
    write_value(value, &mut out);
    out
}

/// `devin_call_` + the first 16 hex digits of sha256(`{id_seed}:{name}:{canonical_args}`): the
/// id of a reply's first call, unchanged since replies held a single call.
#[cfg(test)]
pub(crate) fn call_id(id_seed: &str, name: &str, canonical_args: &str) -> String {
    id_for(id_seed, 1, 0, name, canonical_args)
}

/// The ids of one reply's calls, issued in reply order; distinct within the reply.
///
/// The call at 1-based `position` p hashes `{id_seed}:{name}:{args}` when p is 1 (so a
/// single-call reply keeps the id it always had) and `{id_seed}:{p}:{name}:{args}` after that,
/// so two identical calls get different ids. Should an id still equal one already issued in the
/// reply (a collision of the 64-bit prefix), the attempt number k = 1, 2, ... joins the text,
/// `{id_seed}:{p}:{k}:{name}:{args}`, until it differs: deterministic, and never a duplicate.
pub(crate) struct CallIds<'s> {
    id_seed: &'s str,
    issued: BTreeSet<String>,
}

impl<'s> CallIds<'s> {
    pub(crate) fn new(id_seed: &'s str) -> Self {
        Self {
            id_seed,
            issued: BTreeSet::new(),
        }
    }

    /// The id of the call at 1-based `position`.
    pub(crate) fn issue(&mut self, position: usize, name: &str, canonical_args: &str) -> String {
        let mut attempt = 0;
        loop {
            let id = id_for(self.id_seed, position, attempt, name, canonical_args);
            if self.issued.insert(id.clone()) {
                return id;
            }
            attempt += 1;
        }
    }
}

fn id_for(id_seed: &str, position: usize, attempt: usize, name: &str, args: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(id_seed.as_bytes());
    hasher.update(b":");
    if position > 1 || attempt > 0 {
        hasher.update(position.to_string().as_bytes());
        hasher.update(b":");
    }
    if attempt > 0 {
        hasher.update(attempt.to_string().as_bytes());
        hasher.update(b":");
    }
    hasher.update(name.as_bytes());
    hasher.update(b":");
    hasher.update(args.as_bytes());
    let digest = hasher.finalize();
    format!("devin_call_{}", hex::encode(&digest[..8]))
}

/// Recursion is bounded: values come from serde_json's parser, which stops at 128 levels.
fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => {
            // Writing to a String cannot fail.
            let _ = write!(out, "{number}");
        }
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Object(object) => {
            let mut entries: Vec<_> = object.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_value(item, out);
            }
            out.push('}');
        }
    }
}

/// A JSON string literal, escaped like serde_json: the short escapes for `"`, `\`, backspace,
/// form feed, newline, carriage return and tab, `\u00xx` (lowercase) for other controls, and
/// everything else (DEL, non-ASCII, U+2028) verbatim.
pub(crate) fn write_string(text: &str, out: &mut String) {
    out.reserve(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_at_every_depth_and_is_compact() {
        let value = json!({"b": [{"z": 1, "a": null}], "a": {"y": true, "x": "s"}});
        assert_eq!(
            to_string(&value, 0),
            r#"{"a":{"x":"s","y":true},"b":[{"a":null,"z":1}]}"#
        );
    }

    #[test]
    fn keys_sort_by_code_point() {
        let value = json!({"é": 1, "z": 2, "Z": 3, "": 4});
        assert_eq!(to_string(&value, 0), r#"{"":4,"Z":3,"z":2,"é":1}"#);
    }

    #[test]
    fn strings_escape_like_serde_json() {
        let text = "quote\" backslash\\ \u{08}\u{0c}\n\r\t \u{01}\u{1f} \u{7f} é \u{2028} </tool>";
        let value = json!(text);
        assert_eq!(
            to_string(&value, 0),
            serde_json::to_string(&value).expect("serializable")
        );
    }

    #[test]
    fn numbers_print_like_serde_json() {
        let value = json!([0, -1, 1.5, 1e300, u64::MAX, i64::MIN, 1.0]);
        assert_eq!(
            to_string(&value, 0),
            serde_json::to_string(&value).expect("serializable")
        );
    }

    #[test]
    fn call_id_is_prefix_of_sha256_hex() {
        // sha256("seed:Bash:{}") computed independently (printf 'seed:Bash:{}' | sha256sum).
        let id = call_id("seed", "Bash", "{}");
        assert_eq!(id, "devin_call_332481af4eb89878");
    }

    #[test]
    fn later_calls_hash_their_position() {
        let mut ids = CallIds::new("seed");
        assert_eq!(ids.issue(1, "Bash", "{}"), "devin_call_332481af4eb89878");
        // printf 'seed:2:Bash:{}' | sha256sum
        assert_eq!(ids.issue(2, "Bash", "{}"), "devin_call_53117a67d5bf4b2e");
        assert_eq!(
            ids.issue(3, "Bash", "{}"),
            id_for("seed", 3, 0, "Bash", "{}")
        );
    }

    #[test]
    fn a_colliding_id_is_rehashed_with_an_attempt_number() {
        let mut ids = CallIds::new("seed");
        // Pretend an earlier call of the reply already holds these ids.
        ids.issued.insert(id_for("seed", 2, 0, "Bash", "{}"));
        ids.issued.insert(id_for("seed", 2, 1, "Bash", "{}"));
        let id = ids.issue(2, "Bash", "{}");
        // printf 'seed:2:2:Bash:{}' | sha256sum
        assert_eq!(id, "devin_call_4c4c026279efe18f");
        assert_eq!(ids.issued.len(), 3);
        // The same history gives the same id.
        let mut again = CallIds::new("seed");
        again.issued.insert(id_for("seed", 2, 0, "Bash", "{}"));
        again.issued.insert(id_for("seed", 2, 1, "Bash", "{}"));
        assert_eq!(again.issue(2, "Bash", "{}"), id);
    }
}
