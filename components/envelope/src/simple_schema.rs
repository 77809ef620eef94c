//! A shortcut for the common case of rule 7: arguments that are valid under a simple schema.
//!
//! Building a `jsonschema` validator first checks the schema against its draft's meta-schema,
//! and on wasm32 the crate compiles that meta-schema validator again on every build (it is
//! cached only natively, and the check cannot be turned off). In a fresh instance that, not the
//! validation itself, is nearly the whole cost of a tool call. Most declared tools (all of
//! Claude Code's but three) use only a few plain keywords, so this module decides the
//! common case directly: a schema made only of the keywords below, each with the shape its
//! meta-schema requires, and arguments that satisfy it.
//!
//! It only ever answers "certainly valid". Anything else (another keyword or draft, a value it
//! would have to judge more finely than it does, a failing argument) is left to `jsonschema`,
//! which stays the authority for every rejection and every message. So the shortcut is sound as
//! long as it never accepts what `jsonschema` would refuse, and it is written conservatively to
//! that end (integers only where the meta-schema wants integers, exact number comparisons,
//! string lengths that hold whichever way characters are counted, and of regular expressions
//! only the `^literal` kind).

use jsonschema::Draft;
use serde_json::{Map, Number, Value};
use std::cmp::Ordering;

/// The seven JSON Schema type names.
const TYPE_NAMES: [&str; 7] = [
    "array", "boolean", "integer", "null", "number", "object", "string",
];

/// True only if `schema` (in `draft`) is a valid schema that `jsonschema` compiles and that
/// accepts `arguments`. False means "ask `jsonschema`", not "invalid".
pub(crate) fn certainly_valid(schema: &Value, draft: Draft, arguments: &Value) -> bool {
    // Drafts 7 and 2020-12 agree on every keyword below; older drafts differ (draft 4's
    // boolean exclusiveMinimum, its non-empty `required`), and 2019-09 is rare.
    matches!(draft, Draft::Draft7 | Draft::Draft202012)
        && is_simple(schema, true)
        && accepts(schema, arguments)
}

/// The whole schema, reached or not, uses only the keywords handled here, each shaped as the
/// draft-07 and 2020-12 meta-schemas require; the meta-schema check then cannot fail.
fn is_simple(schema: &Value, root: bool) -> bool {
    let object = match schema {
        Value::Bool(_) => return true,
        Value::Object(object) => object,
        _ => return false,
    };
    object
        .iter()
        .all(|(keyword, value)| match keyword.as_str() {
            // Already checked to name a known draft (and only the root may declare one: a nested
            // `$schema` makes an embedded resource with its own rules).
            "$schema" => root && value.is_string(),
            "title" | "description" | "$comment" => value.is_string(),
            "default" | "const" => true,
            "examples" | "enum" => value.is_array(),
            "type" => is_type_keyword(value),
            "properties" => value
                .as_object()
                .is_some_and(|properties| properties.values().all(|sub| is_simple(sub, false))),
            // The schema form of `items` only: draft 7's array form means something else in 2020-12.
            "additionalProperties" | "items" => is_simple(value, false),
            "required" => value
                .as_array()
                .is_some_and(|names| names.iter().all(Value::is_string) && all_distinct(names)),
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => value.is_number(),
            "pattern" => value.as_str().and_then(anchored_literal).is_some(),
            // Non-negative integers; bounded so they fit a 32-bit `usize` as well as a 64-bit one,
            // and native and wasm builds compile them alike.
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
            | "maxProperties" => value
                .as_u64()
                .is_some_and(|limit| limit <= u64::from(u32::MAX)),
            _ => false,
        })
}

/// `type`: one type name, or a non-empty array of distinct type names.
fn is_type_keyword(value: &Value) -> bool {
    let is_name = |name: &Value| name.as_str().is_some_and(|name| TYPE_NAMES.contains(&name));
    match value {
        Value::Array(names) => {
            !names.is_empty() && names.iter().all(is_name) && all_distinct(names)
        }
        name => is_name(name),
    }
}

/// No two equal items (few items in practice: `required` lists and `type` arrays).
fn all_distinct(items: &[Value]) -> bool {
    items
        .iter()
        .enumerate()
        .all(|(index, item)| !items[..index].contains(item))
}

/// `instance` satisfies every keyword of a schema that [`is_simple`] accepted.
fn accepts(schema: &Value, instance: &Value) -> bool {
    let object = match schema {
        Value::Bool(accept) => return *accept,
        Value::Object(object) => object,
        _ => return false,
    };
    object
        .iter()
        .all(|(keyword, value)| keyword_accepts(object, keyword, value, instance))
}

fn keyword_accepts(
    schema: &Map<String, Value>,
    keyword: &str,
    value: &Value,
    instance: &Value,
) -> bool {
    match (keyword, instance) {
        ("type", _) => match value {
            Value::Array(names) => names.iter().any(|name| has_type(name, instance)),
            name => has_type(name, instance),
        },
        ("enum", _) => value
            .as_array()
            .is_some_and(|items| items.contains(instance)),
        ("const", _) => value == instance,
        ("properties", Value::Object(members)) => value.as_object().is_some_and(|properties| {
            properties
                .iter()
                .all(|(name, sub)| members.get(name).is_none_or(|member| accepts(sub, member)))
        }),
        ("additionalProperties", Value::Object(members)) => {
            let declared = schema.get("properties").and_then(Value::as_object);
            members
                .iter()
                .filter(|(name, _)| !declared.is_some_and(|declared| declared.contains_key(*name)))
                .all(|(_, member)| accepts(value, member))
        }
        ("required", Value::Object(members)) => value.as_array().is_some_and(|names| {
            names
                .iter()
                .all(|name| name.as_str().is_some_and(|name| members.contains_key(name)))
        }),
        ("items", Value::Array(items)) => items.iter().all(|item| accepts(value, item)),
        ("minimum", Value::Number(number)) => compare(number, value).is_some_and(Ordering::is_ge),
        ("maximum", Value::Number(number)) => compare(number, value).is_some_and(Ordering::is_le),
        ("exclusiveMinimum", Value::Number(number)) => {
            compare(number, value).is_some_and(Ordering::is_gt)
        }
        ("exclusiveMaximum", Value::Number(number)) => {
            compare(number, value).is_some_and(Ordering::is_lt)
        }
        ("pattern", Value::String(text)) => value
            .as_str()
            .and_then(anchored_literal)
            .is_some_and(|prefix| text.starts_with(prefix)),
        ("minLength", Value::String(text)) => within(value, |limit| {
            string_lengths(text).into_iter().all(|n| n >= limit)
        }),
        ("maxLength", Value::String(text)) => within(value, |limit| {
            string_lengths(text).into_iter().all(|n| n <= limit)
        }),
        ("minItems", Value::Array(items)) => within(value, |limit| items.len() as u64 >= limit),
        ("maxItems", Value::Array(items)) => within(value, |limit| items.len() as u64 <= limit),
        ("minProperties", Value::Object(members)) => {
            within(value, |limit| members.len() as u64 >= limit)
        }
        ("maxProperties", Value::Object(members)) => {
            within(value, |limit| members.len() as u64 <= limit)
        }
        // Annotations, and assertions about another type than the instance's.
        (
            "$schema"
            | "title"
            | "description"
            | "$comment"
            | "default"
            | "examples"
            | "properties"
            | "additionalProperties"
            | "required"
            | "items"
            | "pattern"
            | "minimum"
            | "maximum"
            | "exclusiveMinimum"
            | "exclusiveMaximum"
            | "minLength"
            | "maxLength"
            | "minItems"
            | "maxItems"
            | "minProperties"
            | "maxProperties",
            _,
        ) => true,
        _ => false,
    }
}

/// The literal of a pattern that only anchors a literal at the start (`^/` in Claude Code's
/// file tools): a string matches it exactly when it starts with that literal. Regular
/// expressions in general are left to `jsonschema`; the characters allowed here mean
/// themselves in every regex dialect, so the pattern is valid and its meaning unambiguous.
fn anchored_literal(pattern: &str) -> Option<&str> {
    let literal = pattern.strip_prefix('^')?;
    literal
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b':' | b'@' | b' '))
        .then_some(literal)
}

fn within(limit: &Value, check: impl FnOnce(u64) -> bool) -> bool {
    limit.as_u64().is_some_and(check)
}

/// The length in code points and in UTF-16 units: a bound that holds for both holds however the
/// validator counts (they differ only for characters outside the Basic Multilingual Plane).
fn string_lengths(text: &str) -> [u64; 2] {
    let code_points = text.chars().count() as u64;
    let utf16_units = text.encode_utf16().count() as u64;
    [code_points, utf16_units]
}

fn has_type(name: &Value, instance: &Value) -> bool {
    match (name.as_str(), instance) {
        (Some("string"), Value::String(_))
        | (Some("boolean"), Value::Bool(_))
        | (Some("null"), Value::Null)
        | (Some("object"), Value::Object(_))
        | (Some("array"), Value::Array(_))
        | (Some("number"), Value::Number(_)) => true,
        // A float with no fractional part counts as an integer for JSON Schema; whether the
        // validator agrees for every draft is its call, so only true integers are decided here.
        (Some("integer"), Value::Number(number)) => number.is_i64() || number.is_u64(),
        _ => false,
    }
}

/// `number` against `limit`, when it can be decided exactly.
fn compare(number: &Number, limit: &Value) -> Option<Ordering> {
    let limit = limit.as_number()?;
    if let (Some(a), Some(b)) = (integer(number), integer(limit)) {
        return Some(a.cmp(&b));
    }
    exact_f64(number)?.partial_cmp(&exact_f64(limit)?)
}

fn integer(number: &Number) -> Option<i128> {
    number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from))
}

/// The number as an `f64`, if that is exact (every float is; integers up to 2^53 are).
fn exact_f64(number: &Number) -> Option<f64> {
    match integer(number) {
        Some(whole) if whole.unsigned_abs() <= 1 << 53 => Some(whole as f64),
        Some(_) => None,
        None => number.as_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fast(schema: Value, arguments: Value) -> bool {
        certainly_valid(&schema, Draft::Draft7, &arguments)
    }

    /// What `jsonschema` says, configured as `schema.rs` configures it.
    fn full(schema: &Value, draft: Draft, arguments: &Value) -> bool {
        jsonschema::options()
            .offline()
            .with_draft(draft)
            .should_validate_formats(true)
            .build(schema)
            .is_ok_and(|validator| validator.is_valid(arguments))
    }

    #[test]
    fn decides_the_common_case() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "what to run", "minLength": 1},
                "timeout": {"type": "number", "minimum": 0, "maximum": 600000},
                "todos": {"type": "array", "minItems": 1, "items": {
                    "type": "object",
                    "properties": {"status": {"enum": ["pending", "done"]}},
                    "required": ["status"],
                    "additionalProperties": false
                }}
            },
            "required": ["command"],
            "additionalProperties": false
        });
        let arguments = json!({"command": "ls", "timeout": 5.5, "todos": [{"status": "done"}]});
        assert!(fast(schema.clone(), arguments.clone()));
        assert!(full(&schema, Draft::Draft7, &arguments));
    }

    #[test]
    fn never_accepts_what_fails() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"type": "integer", "exclusiveMaximum": 3}, "s": {"maxLength": 2}},
            "required": ["a"],
            "additionalProperties": {"type": "string"}
        });
        for arguments in [
            json!({}),
            json!({"a": 3}),
            json!({"a": "1"}),
            json!({"a": 1, "s": "abc"}),
            json!({"a": 1, "extra": 1}),
        ] {
            assert!(!fast(schema.clone(), arguments.clone()), "{arguments}");
        }
        assert!(fast(schema, json!({"a": 2, "s": "ab", "extra": "x"})));
    }

    #[test]
    fn leaves_everything_else_to_jsonschema() {
        for schema in [
            json!({"type": "object", "properties": {"a": {"pattern": "^x+"}}}),
            json!({"type": "object", "properties": {"a": {"format": "uri"}}}),
            json!({"$defs": {"a": {}}, "properties": {"a": {"$ref": "#/$defs/a"}}}),
            json!({"anyOf": [{"type": "object"}]}),
            json!({"type": "banana"}),
            json!({"type": []}),
            json!({"type": ["object", "object"]}),
            json!({"required": ["a", "a"]}),
            json!({"required": [1]}),
            json!({"minProperties": -1}),
            json!({"minProperties": 1.0}),
            json!({"maxProperties": 5_000_000_000u64}),
            json!({"items": [{"type": "string"}]}),
            json!({"properties": {"a": {"$schema": "http://json-schema.org/draft-07/schema#"}}}),
            json!({"x-vendor": 1}),
            json!("object"),
        ] {
            assert!(!fast(schema.clone(), json!({})), "{schema}");
        }
        let integral_float = json!({"properties": {"n": {"type": "integer"}}});
        assert!(!fast(integral_float, json!({"n": 1.0})));
        let simple = json!({"type": "object"});
        for draft in [Draft::Draft4, Draft::Draft6, Draft::Draft201909] {
            assert!(!certainly_valid(&simple, draft, &json!({})), "{draft:?}");
        }
        assert!(certainly_valid(&simple, Draft::Draft202012, &json!({})));
    }

    #[test]
    fn only_anchored_literal_patterns_are_decided() {
        let path = json!({"properties": {"p": {"type": "string", "pattern": "^/"}}});
        assert!(fast(path.clone(), json!({"p": "/etc/hosts"})));
        assert!(!fast(path.clone(), json!({"p": "etc/hosts"})));
        assert!(!fast(path, json!({"p": 5})), "not a string");
        let untyped = json!({"properties": {"p": {"pattern": "^/"}}});
        assert!(
            fast(untyped, json!({"p": 5})),
            "pattern applies to strings only"
        );
        for pattern in [
            "/", "^/.*", "^a.b", "^(a)", "^a$", "^\\d", "^[a]", "^a|b", "^a+", "^é",
        ] {
            let schema = json!({"properties": {"p": {"pattern": pattern}}});
            assert!(!fast(schema, json!({"p": "x"})), "{pattern}");
        }
    }

    #[test]
    fn numbers_compare_exactly_or_not_at_all() {
        let max = |limit: Value, n: Value| {
            fast(
                json!({"properties": {"n": {"maximum": limit}}}),
                json!({"n": n}),
            )
        };
        assert!(max(json!(u64::MAX), json!(u64::MAX)));
        assert!(!max(json!(u64::MAX - 1), json!(u64::MAX)));
        assert!(max(json!(i64::MIN), json!(i64::MIN)));
        assert!(max(json!(1.5), json!(1)));
        assert!(!max(json!(0.5), json!(1)));
        // 2^53 + 1 is not an f64: no exact answer against a float limit.
        assert!(!max(json!(1e300), json!(9_007_199_254_740_993u64)));
        assert!(max(json!(1e300), json!(9_007_199_254_740_992u64)));
    }

    #[test]
    fn string_lengths_hold_however_characters_are_counted() {
        let max2 = json!({"properties": {"s": {"maxLength": 2}}});
        assert!(fast(max2.clone(), json!({"s": "éé"})));
        assert!(!fast(max2, json!({"s": "😀😀"})), "4 UTF-16 units");
        let min2 = json!({"properties": {"s": {"minLength": 2}}});
        assert!(!fast(min2.clone(), json!({"s": "😀"})), "1 code point");
        assert!(fast(min2, json!({"s": "ab"})));
    }

    /// A tiny deterministic generator, so the test needs no dependency and never flakes.
    struct XorShift(u64);

    impl XorShift {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        fn pick<'a>(&mut self, items: &'a [Value]) -> &'a Value {
            &items[self.below(items.len())]
        }
    }

    fn leaves() -> Vec<Value> {
        vec![
            json!(null),
            json!(true),
            json!(0),
            json!(-1),
            json!(2),
            json!(1.5),
            json!(3.0),
            json!(u64::MAX),
            json!(""),
            json!("a"),
            json!("ab"),
            json!("a-b/"),
            json!("/x"),
            json!("😀"),
            json!([]),
            json!([1, "a"]),
            json!({}),
            json!({"a": 1}),
        ]
    }

    fn random_schema(rng: &mut XorShift, depth: usize) -> Value {
        if depth == 0 || rng.below(5) == 0 {
            return json!(rng.below(4) != 0);
        }
        let leaves = leaves();
        let names = [json!("a"), json!("b")];
        let mut schema = Map::new();
        for _ in 0..1 + rng.below(4) {
            let (keyword, value) = match rng.below(15) {
                0 => ("type", json!(TYPE_NAMES[rng.below(7)])),
                1 => (
                    "type",
                    json!([TYPE_NAMES[rng.below(7)], TYPE_NAMES[rng.below(7)]]),
                ),
                2 => {
                    let mut properties = Map::new();
                    for name in ["a", "b"] {
                        if rng.below(2) == 0 {
                            properties.insert(name.into(), random_schema(rng, depth - 1));
                        }
                    }
                    ("properties", Value::Object(properties))
                }
                3 => ("additionalProperties", random_schema(rng, depth - 1)),
                4 => ("items", random_schema(rng, depth - 1)),
                5 => ("required", json!([rng.pick(&names)])),
                6 => ("enum", json!([rng.pick(&leaves), rng.pick(&leaves)])),
                7 => ("const", rng.pick(&leaves).clone()),
                8 => (
                    ["minimum", "maximum"][rng.below(2)],
                    rng.pick(&leaves[2..8]).clone(),
                ),
                9 => (
                    ["exclusiveMinimum", "exclusiveMaximum"][rng.below(2)],
                    rng.pick(&leaves[2..8]).clone(),
                ),
                10 => (
                    ["minLength", "maxLength"][rng.below(2)],
                    json!(rng.below(3)),
                ),
                11 => (["minItems", "maxItems"][rng.below(2)], json!(rng.below(3))),
                12 => (
                    ["minProperties", "maxProperties"][rng.below(2)],
                    json!(rng.below(3)),
                ),
                13 => (
                    "pattern",
                    json!(["^a", "^", "^ab", "^a-b", "^/"][rng.below(5)]),
                ),
                _ => ("description", json!("d")),
            };
            schema.insert(keyword.into(), value);
        }
        Value::Object(schema)
    }

    fn random_instance(rng: &mut XorShift, depth: usize) -> Value {
        let leaves = leaves();
        if depth == 0 || rng.below(3) != 0 {
            return rng.pick(&leaves).clone();
        }
        if rng.below(2) == 0 {
            Value::Array(
                (0..rng.below(3))
                    .map(|_| random_instance(rng, depth - 1))
                    .collect(),
            )
        } else {
            let mut object = Map::new();
            for name in ["a", "b", "c"] {
                if rng.below(2) == 0 {
                    object.insert(name.into(), random_instance(rng, depth - 1));
                }
            }
            Value::Object(object)
        }
    }

    #[test]
    fn agrees_with_jsonschema_whenever_it_accepts() {
        let mut rng = XorShift(0xfeed_5eed);
        let mut accepted = 0;
        for round in 0..3000 {
            let schema = random_schema(&mut rng, 3);
            let draft = if round % 2 == 0 {
                Draft::Draft7
            } else {
                Draft::Draft202012
            };
            for _ in 0..4 {
                let instance = random_instance(&mut rng, 3);
                if certainly_valid(&schema, draft, &instance) {
                    accepted += 1;
                    assert!(
                        full(&schema, draft, &instance),
                        "accepted but jsonschema refuses: {schema} / {instance} ({draft:?})"
                    );
                }
            }
        }
        // The comparison means something only if the shortcut is taken often.
        assert!(accepted > 1000, "only {accepted} accepted");
    }
}
