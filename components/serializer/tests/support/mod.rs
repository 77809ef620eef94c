//! Reading the serializer's golden fixtures and running a case natively, for the `bless`
//! example (the golden test itself is `devin-bridge-calls`'s, which runs every transform).

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use devin_bridge_serializer::{repair, serialize, serialize_resumed, serialize_unseen, Failure};
use serde_json::{json, Value};

pub(crate) fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/serializer")
}

pub(crate) fn fixtures() -> Vec<(PathBuf, String, Value)> {
    let mut paths: Vec<PathBuf> = fs::read_dir(fixture_dir())
        .expect("fixture directory exists")
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = fs::read_to_string(&path).expect("readable fixture");
            let case: Value = serde_json::from_str(&text)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            (path, text, case)
        })
        .collect()
}

/// Runs one case and encodes its result as the fixture's `expect` shape.
pub(crate) fn run(case: &Value) -> Value {
    let args = &case["args"];
    let request = || match (&args["request_raw"], &args["request"]) {
        (Value::String(raw), _) => raw.clone(),
        (Value::Null, Value::Null) => panic!("serialize needs request or request_raw"),
        (Value::Null, request) => serde_json::to_string(request).expect("serializable"),
        (other, _) => panic!("request_raw must be a string, not {other}"),
    };
    match case["call"].as_str() {
        Some("serialize") => match serialize(&request()) {
            Ok(prompt) => json!({ "ok": serde_json::to_value(prompt).expect("serializable") }),
            Err(failure) => json!({ "err": failure }),
        },
        Some("serialize_unseen") => match serialize_unseen(&request(), options(args)) {
            Ok(unseen) => json!({ "ok": serde_json::to_value(unseen).expect("serializable") }),
            Err(failure) => json!({ "err": failure }),
        },
        Some("serialize_resumed") => {
            let continuation = args["continuation"]
                .as_str()
                .expect("serialize_resumed needs a string continuation");
            let resume = serde_json::from_value(args["resume"].clone())
                .expect("resume is {messages, history, trace_chars, tool_uses, tool_names}");
            match serialize_resumed(continuation, &resume, options(args)) {
                Ok(resumed) => {
                    json!({ "ok": serde_json::to_value(resumed).expect("serializable") })
                }
                Err(failure) => json!({ "err": failure }),
            }
        }
        Some("repair") => {
            let prompt = args["prompt"]
                .as_str()
                .expect("repair needs a string prompt");
            let rejection: Failure =
                serde_json::from_value(args["rejection"].clone()).expect("rejection is a failure");
            json!({ "ok": repair(prompt, &rejection) })
        }
        other => panic!("unknown call {other:?}"),
    }
}

/// `held`, `max_images` and `max_image_bytes` (each 0 when absent).
fn options(args: &Value) -> devin_bridge_serializer::PromptOptions {
    let number = |key: &str| {
        args[key]
            .as_u64()
            .map_or(0, |n| u32::try_from(n).expect("a u32 argument"))
    };
    devin_bridge_serializer::PromptOptions {
        held: number("held"),
        images: devin_bridge_serializer::ImageLimits {
            max_images: number("max_images"),
            max_image_bytes: number("max_image_bytes"),
        },
    }
}
