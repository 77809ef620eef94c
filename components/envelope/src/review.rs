//! Review replies: the first JSON object in a read-only reviewer's answer, validated and
//! re-serialised in canonical form.
//!
//! # Finding the object
//!
//! The text is scanned left to right for a `{` that starts a syntactically complete JSON object:
//! from each `{` a JSON parser reads one value (strings and escapes are followed, so braces inside
//! string values neither open nor close anything). The first `{` where that succeeds wins; a `{`
//! in prose that does not start valid JSON is skipped and the scan continues after it. This finds
//! an object inside a ```` ```json ```` fence as well as one after a sentence of prose. An object
//! nested more than [`MAX_SCAN_DEPTH`] levels deep does not count as complete. Two limits bound
//! the work of a hostile text that keeps opening objects it never finishes (each failed attempt
//! may re-read what the one before it read): that depth, and a budget of [`MAX_SCAN_VALUES`]
//! values read over all attempts; a scan that spends it fails closed with `review_invalid`.
//!
//! # Validation
//!
//! The object must have the shape
//! `{"verdict": "approve"|"request_changes", "summary": string, "findings": [finding]}` with each
//! finding `{"severity": "critical"|"high"|"medium"|"low"|"info", "file": string,
//! "line": integer >= 1 or null, "title": string, "body": string}`. Every field is required
//! (`line` may be `null`); fields not named here are ignored and dropped. Bounds: the text is at
//! most [`MAX_TEXT_BYTES`], at most [`MAX_FINDINGS`] findings, `summary` at most
//! [`MAX_SUMMARY_CHARS`] characters and every other string at most [`MAX_FIELD_CHARS`]. A
//! repeated key anywhere in the object is refused, since parsers disagree on which one wins.
//! Fields are checked in the order above and the first problem is reported by its path, such as
//! `findings[2].line`; messages never quote the agent's text.
//!
//! # Output
//!
//! Compact JSON with exactly the fields above, in that order, strings escaped as serde_json
//! escapes them and `line` as a plain integer or `null`. The output is a fixed point: parsing it
//! again gives the same text.

use devin_bridge_types::Failure;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

use crate::{canonical, failure, json};

/// The largest text examined, in bytes.
pub const MAX_TEXT_BYTES: usize = 1 << 20;
/// The most findings a review may hold.
pub const MAX_FINDINGS: usize = 200;
/// The longest `summary`, in characters.
pub const MAX_SUMMARY_CHARS: usize = 8192;
/// The longest `file`, `title` or `body`, in characters.
pub const MAX_FIELD_CHARS: usize = 4096;
/// The deepest nesting an object may have and still count as complete during the scan.
pub const MAX_SCAN_DEPTH: usize = 16;
/// The most JSON values (keys included) the scan reads, over all its attempts, before it gives
/// up. One object of a text within [`MAX_TEXT_BYTES`] holds fewer, so only text that keeps
/// starting objects it never finishes can run out.
pub const MAX_SCAN_VALUES: usize = 1 << 20;

const VERDICTS: [&str; 2] = ["approve", "request_changes"];
const SEVERITIES: [&str; 5] = ["critical", "high", "medium", "low", "info"];

/// The first JSON object in `output`, validated, as canonical compact JSON.
///
/// Failures are `review_missing` (no complete JSON object) and `review_invalid` (the text is
/// too large, or its first object breaks the shape), both non-repairable 502s.
pub fn parse_review(output: &str) -> Result<String, Failure> {
    if output.len() > MAX_TEXT_BYTES {
        return Err(failure::review_invalid(&format!(
            "the reply is too large ({} bytes; at most {MAX_TEXT_BYTES})",
            output.len()
        )));
    }
    let object = find_first_object(output)
        .map_err(|OverBudget| {
            failure::review_invalid(&format!(
                "the reply holds too much unfinished JSON to scan (more than {MAX_SCAN_VALUES} \
                 values read before a complete object)"
            ))
        })?
        .ok_or_else(failure::review_missing)?;
    let value = match json::parse_strict(object) {
        Ok(Value::Object(object)) => object,
        // The scan accepted the text as one object, so only a repeated key is left to refuse.
        Ok(_) | Err(_) => {
            return Err(failure::review_invalid(
                "the review object repeats a key (every key may appear once per object)",
            ))
        }
    };
    let review =
        Review::from_object(&value).map_err(|problem| failure::review_invalid(&problem))?;
    Ok(review.to_canonical())
}

/// The first `{` of `text` that starts a syntactically complete JSON object, up to its closing
/// `}`; `None` when there is none, or when the scan ran out of its budget first.
pub fn first_json_object(text: &str) -> Option<&str> {
    find_first_object(text).ok().flatten()
}

/// The scan spent [`MAX_SCAN_VALUES`] before finding a complete object.
struct OverBudget;

/// The scan: `Ok(None)` when no complete object exists, `Err` when the budget ran out first.
fn find_first_object(text: &str) -> Result<Option<&str>, OverBudget> {
    let budget = std::cell::Cell::new(MAX_SCAN_VALUES);
    let mut from = 0;
    while let Some(offset) = text.get(from..).and_then(|rest| rest.find('{')) {
        let start = from + offset;
        // An object's next token is a key or its end: most braces in prose fail here, cheaply.
        let next = text[start + 1..].trim_start_matches([' ', '\t', '\n', '\r']);
        if next.starts_with('"') || next.starts_with('}') {
            let rest = &text[start..];
            let mut deserializer = serde_json::Deserializer::from_str(rest);
            let seed = Depth {
                level: 0,
                budget: &budget,
            };
            if seed.deserialize(&mut deserializer).is_ok() {
                return Ok(closing_brace(rest).and_then(|end| rest.get(..=end)));
            }
            if budget.get() == 0 {
                return Err(OverBudget);
            }
        }
        from = start + 1;
    }
    Ok(None)
}

/// The offset of the `}` that closes the object `text` starts with (string- and escape-aware
/// brace matching; `text` is known to start with a well-formed object).
fn closing_brace(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (at, byte) in text.bytes().enumerate() {
        match (in_string, escaped, byte) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_string = false,
            (true, false, _) => {}
            (false, _, b'"') => in_string = true,
            (false, _, b'{' | b'[') => depth += 1,
            (false, _, b'}' | b']') => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(at);
                }
            }
            (false, _, _) => {}
        }
    }
    None
}

/// A JSON value read for its syntax only (nothing is kept), at a nesting level; every value and
/// key read spends one unit of the scan's budget.
#[derive(Clone, Copy)]
struct Depth<'b> {
    level: usize,
    budget: &'b std::cell::Cell<usize>,
}

impl<'de> DeserializeSeed<'de> for Depth<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        let left = self.budget.get();
        if left == 0 {
            return Err(de::Error::custom("scan budget spent"));
        }
        self.budget.set(left - 1);
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Depth<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        while map.next_key_seed(inner)?.is_some() {
            map.next_value_seed(inner)?;
        }
        Ok(())
    }
}

impl Depth<'_> {
    fn nested<E: de::Error>(self) -> Result<Self, E> {
        if self.level >= MAX_SCAN_DEPTH {
            return Err(E::custom("nested too deeply"));
        }
        Ok(Self {
            level: self.level + 1,
            ..self
        })
    }
}

/// A validated review, borrowing its strings from the parsed object.
struct Review<'a> {
    verdict: &'a str,
    summary: &'a str,
    findings: Vec<Finding<'a>>,
}

struct Finding<'a> {
    severity: &'a str,
    file: &'a str,
    line: Option<u64>,
    title: &'a str,
    body: &'a str,
}

/// What is wrong, as the failure message says it.
type Problem = String;

impl<'a> Review<'a> {
    fn from_object(object: &'a Map<String, Value>) -> Result<Self, Problem> {
        let verdict = one_of(object, "", "verdict", &VERDICTS)?;
        let summary = bounded_string(object, "", "summary", MAX_SUMMARY_CHARS)?;
        let items = match object.get("findings") {
            Some(Value::Array(items)) => items,
            Some(_) => return Err("findings must be an array".into()),
            None => return Err("findings is required (an array, possibly empty)".into()),
        };
        if items.len() > MAX_FINDINGS {
            return Err(format!(
                "findings must hold at most {MAX_FINDINGS} items (it holds {})",
                items.len()
            ));
        }
        let findings = items
            .iter()
            .enumerate()
            .map(|(index, item)| Finding::from_value(&format!("findings[{index}]"), item))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            verdict,
            summary,
            findings,
        })
    }

    fn to_canonical(&self) -> String {
        let mut out = String::with_capacity(64 + self.summary.len());
        out.push_str("{\"verdict\":");
        canonical::write_string(self.verdict, &mut out);
        out.push_str(",\"summary\":");
        canonical::write_string(self.summary, &mut out);
        out.push_str(",\"findings\":[");
        for (index, finding) in self.findings.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            finding.write(&mut out);
        }
        out.push_str("]}");
        out
    }
}

impl<'a> Finding<'a> {
    fn from_value(path: &str, value: &'a Value) -> Result<Self, Problem> {
        let Value::Object(object) = value else {
            return Err(format!("{path} must be an object"));
        };
        let severity = one_of(object, path, "severity", &SEVERITIES)?;
        let file = bounded_string(object, path, "file", MAX_FIELD_CHARS)?;
        let line = match object.get("line") {
            Some(Value::Null) => None,
            Some(Value::Number(number)) if number.as_u64().is_some_and(|line| line >= 1) => {
                number.as_u64()
            }
            Some(_) => return Err(format!("{path}.line must be an integer >= 1 or null")),
            None => return Err(format!("{path}.line is required (an integer >= 1 or null)")),
        };
        let title = bounded_string(object, path, "title", MAX_FIELD_CHARS)?;
        let body = bounded_string(object, path, "body", MAX_FIELD_CHARS)?;
        Ok(Self {
            severity,
            file,
            line,
            title,
            body,
        })
    }

    fn write(&self, out: &mut String) {
        out.push_str("{\"severity\":");
        canonical::write_string(self.severity, out);
        out.push_str(",\"file\":");
        canonical::write_string(self.file, out);
        out.push_str(",\"line\":");
        match self.line {
            Some(line) => out.push_str(&line.to_string()),
            None => out.push_str("null"),
        }
        out.push_str(",\"title\":");
        canonical::write_string(self.title, out);
        out.push_str(",\"body\":");
        canonical::write_string(self.body, out);
        out.push('}');
    }
}

/// `parent.key` (or `key` at the top).
fn field_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// A string field of at most `max` characters.
fn bounded_string<'a>(
    object: &'a Map<String, Value>,
    parent: &str,
    key: &str,
    max: usize,
) -> Result<&'a str, Problem> {
    let expected = || format!("a string of at most {max} characters");
    match object.get(key) {
        Some(Value::String(text)) if text.chars().nth(max).is_none() => Ok(text),
        Some(_) => Err(format!(
            "{} must be {}",
            field_path(parent, key),
            expected()
        )),
        None => Err(format!(
            "{} is required ({})",
            field_path(parent, key),
            expected()
        )),
    }
}

/// A string field whose value is one of `allowed`; returns the allowed (static) spelling.
fn one_of<'a>(
    object: &Map<String, Value>,
    parent: &str,
    key: &str,
    allowed: &[&'a str],
) -> Result<&'a str, Problem> {
    let expected = || {
        let quoted: Vec<String> = allowed.iter().map(|value| format!("\"{value}\"")).collect();
        format!("one of {}", quoted.join(", "))
    };
    match object.get(key) {
        Some(Value::String(text)) => allowed
            .iter()
            .find(|value| **value == text.as_str())
            .copied()
            .ok_or_else(|| format!("{} must be {}", field_path(parent, key), expected())),
        Some(_) => Err(format!(
            "{} must be {}",
            field_path(parent, key),
            expected()
        )),
        None => Err(format!(
            "{} is required ({})",
            field_path(parent, key),
            expected()
        )),
    }
}

#[cfg(test)]
mod tests;
