//! Strict JSON parsing into `serde_json::Value`.
//!
//! Two differences from `serde_json::from_str::<Value>`:
//! - a duplicate object key is an error, because parsers disagree on which duplicate wins and the
//!   client must run exactly the call that was checked;
//! - object keys are inserted in sorted order, so a `Value` iterates the same way whether or not
//!   another crate in the build enables serde_json's `preserve_order` feature. Validation messages
//!   and "first key" choices then never depend on a feature flag.
//!
//! serde_json's recursion limit (128 levels) still applies, so deep nesting is an error, not a
//! stack overflow.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};
use std::fmt;

/// Parses `text` as one JSON value (surrounding whitespace allowed), rejecting duplicate keys.
pub(crate) fn parse_strict(text: &str) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = StrictValue.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Seed that deserializes any JSON value strictly.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        // JSON text cannot spell NaN or infinity; serde_json rejects out-of-range numbers itself.
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        // The smallest repeated key, reported once the whole object is read: the same key and
        // position whatever order the duplicates come in.
        let mut duplicate: Option<String> = None;
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(StrictValue)?;
            match object.entry(key) {
                Entry::Vacant(entry) => {
                    entry.insert(value);
                }
                Entry::Occupied(entry) => {
                    let key = entry.key();
                    if duplicate.as_ref().is_none_or(|smallest| key < smallest) {
                        duplicate = Some(key.clone());
                    }
                }
            }
        }
        if let Some(key) = duplicate {
            return Err(de::Error::custom(format_args!(
                "duplicate key {:?}",
                crate::failure::excerpt(&key, crate::failure::EXCERPT_CHARS)
            )));
        }
        // serde_json's default map is sorted already; with `preserve_order` it keeps insertion
        // order, and is then rebuilt in key order.
        let sorted = object.keys().zip(object.keys().skip(1)).all(|(a, b)| a < b);
        if !sorted {
            let mut entries: Vec<(String, Value)> =
                std::mem::take(&mut object).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            object.extend(entries);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_of_value() {
        let value = parse_strict(r#" {"b":[1,-2,3.5,true,null,"x"],"a":{}} "#).expect("valid");
        assert_eq!(
            value,
            serde_json::json!({"a":{},"b":[1,-2,3.5,true,null,"x"]})
        );
    }

    #[test]
    fn keys_come_out_sorted() {
        let value = parse_strict(r#"{"z":1,"a":2,"m":{"y":1,"b":2}}"#).expect("valid");
        let keys: Vec<_> = value.as_object().expect("object").keys().cloned().collect();
        assert_eq!(keys, ["a", "m", "z"]);
    }

    #[test]
    fn duplicate_keys_are_rejected_at_any_depth() {
        let top = parse_strict(r#"{"name":"Read","name":"Bash"}"#).expect_err("duplicate");
        assert!(top.to_string().contains("duplicate key \"name\""), "{top}");
        assert!(parse_strict(r#"{"a":{"b":1,"b":1}}"#).is_err());
        assert!(
            parse_strict(r#"[{"a":1},{"a":1}]"#).is_ok(),
            "separate objects"
        );
    }

    #[test]
    fn trailing_garbage_and_deep_nesting_are_errors() {
        assert!(parse_strict("{} x").is_err());
        assert!(parse_strict("").is_err());
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(parse_strict(&deep).is_err(), "recursion limit applies");
    }

    #[test]
    fn big_numbers_keep_serde_json_semantics() {
        assert_eq!(
            parse_strict("18446744073709551615").expect("u64"),
            serde_json::json!(u64::MAX)
        );
        assert!(parse_strict("1e400").is_err(), "out of range");
    }
}
