//! Canonical JSON text and the deterministic tool-call id.
//!
//! Canonical form: compact (no whitespace), object keys sorted by code point (byte order of their
//! UTF-8) at every depth, strings escaped exactly as serde_json escapes them, numbers as
//! serde_json prints them. The keys are sorted here, explicitly, rather than trusting the
//! iteration order of `serde_json::Map`, which changes when any crate in the build enables
//! serde_json's `preserve_order` feature; the call id must not depend on a feature flag.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write;

/// The canonical text of `value`.
pub(crate) fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

/// `devin_call_` + the first 16 hex digits of sha256(`{id_seed}:{name}:{canonical_args}`).
pub(crate) fn call_id(id_seed: &str, name: &str, canonical_args: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(id_seed.as_bytes());
    hasher.update(b":");
    hasher.update(name.as_bytes());
    hasher.update(b":");
    hasher.update(canonical_args.as_bytes());
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
            to_string(&value),
            r#"{"a":{"x":"s","y":true},"b":[{"a":null,"z":1}]}"#
        );
    }

    #[test]
    fn keys_sort_by_code_point() {
        let value = json!({"é": 1, "z": 2, "Z": 3, "": 4});
        assert_eq!(to_string(&value), r#"{"":4,"Z":3,"z":2,"é":1}"#);
    }

    #[test]
    fn strings_escape_like_serde_json() {
        let text = "quote\" backslash\\ \u{08}\u{0c}\n\r\t \u{01}\u{1f} \u{7f} é \u{2028} </tool>";
        let value = json!(text);
        assert_eq!(
            to_string(&value),
            serde_json::to_string(&value).expect("serializable")
        );
    }

    #[test]
    fn numbers_print_like_serde_json() {
        let value = json!([0, -1, 1.5, 1e300, u64::MAX, i64::MIN, 1.0]);
        assert_eq!(
            to_string(&value),
            serde_json::to_string(&value).expect("serializable")
        );
    }

    #[test]
    fn call_id_is_prefix_of_sha256_hex() {
        // sha256("seed:Bash:{}") computed independently (printf 'seed:Bash:{}' | sha256sum).
        let id = call_id("seed", "Bash", "{}");
        assert_eq!(id, "devin_call_332481af4eb89878");
    }
}
