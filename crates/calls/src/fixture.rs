//! The golden fixture format (`tests/fixtures/<transform>/<case>.json`, described in
//! `tests/fixtures/README.md`): `{name, call, args, expect}`, decoded into a [`Call`] and the
//! expected [`Answer`] in its JSON encoding.
//!
//! The fixtures give text arguments as JSON values (or exact text in `<name>_raw`) and byte
//! arguments as text (or byte values in `<name>_bytes`); decoding turns them into the plain
//! arguments serde reads a [`Call`] from. A call that belongs to another transform than the
//! fixture's directory, or an `expect` without `ok` or `err`, is refused.

use serde_json::{json, Value};

use devin_bridge_types::TransformKind;

use crate::{Answer, Call};

/// One golden case.
#[derive(Debug, Clone)]
pub struct Case {
    pub file: String,
    pub name: String,
    pub call: Call,
    pub expect: Value,
}

/// Why a fixture could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("fixture {file}: {message}")]
pub struct CaseError {
    pub file: String,
    pub message: String,
}

/// Decodes one fixture file's text (`file` names it in errors).
pub fn decode_file(kind: TransformKind, file: &str, text: &str) -> Result<Case, CaseError> {
    let error = |message: String| CaseError {
        file: file.to_owned(),
        message,
    };
    let fixture: Value =
        serde_json::from_str(text).map_err(|problem| error(problem.to_string()))?;
    let (name, call, expect) = decode_case(kind, &fixture).map_err(error)?;
    Ok(Case {
        file: file.to_owned(),
        name,
        call,
        expect,
    })
}

/// Decodes `{name, call, args, expect}` into a typed call and the expected answer.
pub fn decode_case(kind: TransformKind, fixture: &Value) -> Result<(String, Call, Value), String> {
    let name = fixture
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("(unnamed)")
        .to_owned();
    let call_name = fixture
        .get("call")
        .and_then(Value::as_str)
        .ok_or("missing \"call\"")?;
    let empty = json!({});
    let args = fixture.get("args").unwrap_or(&empty);
    let call = decode_call(call_name, args)?;
    if call.transform() != kind {
        return Err(format!("call {call_name} does not belong to {kind}"));
    }
    let expect = fixture.get("expect").cloned().ok_or("missing \"expect\"")?;
    if expect.get("ok").is_none() && expect.get("err").is_none() {
        return Err("\"expect\" needs \"ok\" or \"err\"".into());
    }
    Ok((name, call, expect))
}

/// Arguments the fixtures give as JSON values (or as exact text in `<name>_raw`) and the
/// transform takes as text.
const TEXT_ARGUMENTS: [&str; 4] = ["request", "tools", "catalog", "classifier_context"];
/// Arguments the fixtures give as text (or as a list of byte values in `<name>_bytes`, for bytes
/// that are not UTF-8) and the transform takes as bytes.
const BYTE_ARGUMENTS: [&str; 1] = ["buffer"];

/// Decodes one call by name from its JSON arguments (see `tests/fixtures/README.md`): the
/// fixtures' encodings become plain arguments, then serde reads the [`Call`].
pub fn decode_call(call_name: &str, args: &Value) -> Result<Call, String> {
    let mut plain = match args {
        Value::Object(map) => map.clone(),
        Value::Null => serde_json::Map::new(),
        other => return Err(format!("\"args\" must be an object, not {other}")),
    };
    for name in TEXT_ARGUMENTS {
        let raw = plain.remove(&format!("{name}_raw"));
        match (raw, plain.get(name)) {
            (Some(Value::String(text)), _) => {
                plain.insert(name.to_owned(), Value::String(text));
            }
            (Some(_), _) => return Err(format!("argument {name}_raw must be a string")),
            (None, Some(value)) => {
                let text = value.to_string();
                plain.insert(name.to_owned(), Value::String(text));
            }
            (None, None) => {}
        }
    }
    for name in BYTE_ARGUMENTS {
        if let Some(list) = plain.remove(&format!("{name}_bytes")) {
            plain.insert(name.to_owned(), list);
        } else if let Some(Value::String(text)) = plain.get(name) {
            let bytes = text.bytes().map(Value::from).collect();
            plain.insert(name.to_owned(), Value::Array(bytes));
        }
    }
    // A call without arguments (`stream_ping`) has no content at all.
    let mut call = serde_json::Map::new();
    call.insert("call".to_owned(), Value::String(call_name.to_owned()));
    if !plain.is_empty() {
        call.insert("args".to_owned(), Value::Object(plain));
    }
    serde_json::from_value(Value::Object(call)).map_err(|error| format!("{call_name}: {error}"))
}

/// An answer in the fixtures' encoding: `{"ok": value}` or `{"err": failure}`.
pub fn answer_json(answer: &Answer) -> Value {
    match answer {
        Ok(value) => json!({ "ok": value }),
        Err(failure) => json!({ "err": failure }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devin_bridge_types::{ImageLimits, PromptOptions};

    #[test]
    fn the_fixture_encodings_become_plain_arguments() {
        // A JSON value for a text argument is its compact text, even a JSON string.
        let call = decode_call("serialize", &json!({"request": {"model": "m"}})).unwrap();
        assert_eq!(
            call,
            Call::Serialize {
                request: r#"{"model":"m"}"#.into()
            }
        );
        let call = decode_call("serialize", &json!({"request": "x"})).unwrap();
        assert_eq!(
            call,
            Call::Serialize {
                request: r#""x""#.into()
            }
        );
        // `<name>_raw` is the exact text.
        let call = decode_call("serialize", &json!({"request_raw": "{not json"})).unwrap();
        assert_eq!(
            call,
            Call::Serialize {
                request: "{not json".into()
            }
        );
        assert!(decode_call("serialize", &json!({"request_raw": 3})).is_err());
        // Bytes: text as its UTF-8 bytes, or `<name>_bytes`.
        let call = decode_call(
            "parse_events",
            &json!({"buffer": "ab", "max_event_bytes": 9}),
        )
        .unwrap();
        assert_eq!(
            call,
            Call::ParseEvents {
                buffer: b"ab".to_vec(),
                max_event_bytes: 9
            }
        );
        let call = decode_call(
            "parse_events",
            &json!({"buffer_bytes": [255, 0], "max_event_bytes": 9}),
        )
        .unwrap();
        assert_eq!(
            call,
            Call::ParseEvents {
                buffer: vec![255, 0],
                max_event_bytes: 9
            }
        );
        // Prompt options stand beside the other arguments, 0 when absent.
        let call =
            decode_call("serialize_unseen", &json!({"request": {}, "max_images": 2})).unwrap();
        assert_eq!(
            call,
            Call::SerializeUnseen {
                request: std::sync::Arc::new("{}".to_owned()),
                options: PromptOptions {
                    held: 0,
                    images: ImageLimits {
                        max_images: 2,
                        max_image_bytes: 0
                    },
                },
            }
        );
        // No arguments, defaults, and refusals.
        assert_eq!(
            decode_call("stream_ping", &json!({})).unwrap(),
            Call::StreamPing
        );
        let call = decode_call("list_models", &json!({"catalog": []})).unwrap();
        assert_eq!(
            call,
            Call::ListModels {
                catalog: "[]".into(),
                vision: false
            }
        );
        assert!(decode_call("no_such_call", &json!({})).is_err());
        assert!(
            decode_call("parse", &json!({"output": "x"})).is_err(),
            "missing arguments"
        );
        assert!(
            decode_call("serialize", &json!([1])).is_err(),
            "args not an object"
        );
    }
}
