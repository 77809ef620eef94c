//! The golden self-test corpus: the fixtures under `tests/fixtures/`, embedded at build time.
//!
//! A candidate component runs every case of its transform and must reproduce each expected
//! answer exactly before it may serve. The same decoding of cases is used by the differential
//! tests, so "the corpus passes" and "native and wasm agree" mean the same thing.

use devin_bridge_types::Failure;
use serde_json::{json, Value};

use super::bindings::{Answer, Call};
use super::runtime::Runtime;
use super::{EngineError, Loaded, TransformKind};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/corpus.rs"));
}

/// One golden case.
#[derive(Debug, Clone)]
pub struct Case {
    pub file: &'static str,
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

/// The embedded fixture files of one transform: (file name, JSON text).
pub fn files(kind: TransformKind) -> &'static [(&'static str, &'static str)] {
    match kind {
        TransformKind::Serializer => embedded::SERIALIZER,
        TransformKind::Envelope => embedded::ENVELOPE,
        TransformKind::Sse => embedded::SSE,
        TransformKind::ModelAlias => embedded::MODEL_ALIAS,
    }
}

/// Every embedded case of one transform.
pub fn cases(kind: TransformKind) -> Result<Vec<Case>, CaseError> {
    files(kind)
        .iter()
        .map(|(file, text)| {
            let fixture: Value = serde_json::from_str(text).map_err(|error| CaseError {
                file: (*file).to_owned(),
                message: error.to_string(),
            })?;
            decode_case(kind, &fixture)
                .map(|(name, call, expect)| Case {
                    file,
                    name,
                    call,
                    expect,
                })
                .map_err(|message| CaseError {
                    file: (*file).to_owned(),
                    message,
                })
        })
        .collect()
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

/// Decodes one call by name from its JSON arguments (see `tests/fixtures/README.md`).
pub fn decode_call(call_name: &str, args: &Value) -> Result<Call, String> {
    Ok(match call_name {
        "serialize" => Call::Serialize {
            request: json_text(args, "request")?,
        },
        "repair" => Call::Repair {
            prompt: string(args, "prompt")?,
            rejection: typed(args, "rejection")?,
        },
        "parse" => Call::Parse {
            output: string(args, "output")?,
            tools: json_text(args, "tools")?,
            id_seed: string(args, "id_seed")?,
        },
        "narrates_unexecuted_action" => Call::NarratesUnexecutedAction {
            output: string(args, "output")?,
        },
        "stream_start" => Call::StreamStart {
            head: typed(args, "head")?,
        },
        "stream_ping" => Call::StreamPing,
        "stream_finish" => Call::StreamFinish {
            reply: typed(args, "reply")?,
            usage: typed(args, "usage")?,
        },
        "render_stream" => Call::RenderStream {
            head: typed(args, "head")?,
            reply: typed(args, "reply")?,
        },
        "render_json" => Call::RenderJson {
            head: typed(args, "head")?,
            reply: typed(args, "reply")?,
        },
        "error_event" => Call::ErrorEvent {
            failure: typed(args, "failure")?,
        },
        "error_body" => Call::ErrorBody {
            failure: typed(args, "failure")?,
        },
        "agent_error_message" => Call::AgentErrorMessage {
            raw: string(args, "raw")?,
        },
        "validate" => Call::Validate {
            reference: string(args, "reference")?,
            catalog: json_text(args, "catalog")?,
        },
        "client_environment" => Call::ClientEnvironment {
            settings: typed(args, "settings")?,
            catalog: json_text(args, "catalog")?,
        },
        "resolve" => Call::Resolve {
            requested: string(args, "requested")?,
            catalog: json_text(args, "catalog")?,
        },
        "list_models" => Call::ListModels {
            catalog: json_text(args, "catalog")?,
        },
        other => return Err(format!("unknown call {other:?}")),
    })
}

fn string(args: &Value, key: &str) -> Result<String, String> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("argument {key:?} must be a string"))
}

/// `key` as a JSON value serialised compactly, or `key_raw` as exact text.
fn json_text(args: &Value, key: &str) -> Result<String, String> {
    if let Some(raw) = args.get(format!("{key}_raw")) {
        return raw
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("argument {key}_raw must be a string"));
    }
    args.get(key)
        .map(|value| value.to_string())
        .ok_or_else(|| format!("missing argument {key:?} (or {key}_raw)"))
}

fn typed<T: serde::de::DeserializeOwned>(args: &Value, key: &str) -> Result<T, String> {
    let value = args
        .get(key)
        .ok_or_else(|| format!("missing argument {key:?}"))?;
    serde_json::from_value(value.clone()).map_err(|error| format!("argument {key:?}: {error}"))
}

/// An answer in the fixtures' encoding: `{"ok": value}` or `{"err": failure}`.
pub fn answer_json(answer: &Answer) -> Value {
    fn outcome<T: serde::Serialize>(result: &Result<T, Failure>) -> Value {
        match result {
            Ok(value) => json!({ "ok": value }),
            Err(failure) => json!({ "err": failure }),
        }
    }
    match answer {
        Answer::Prompt(result) => outcome(result),
        Answer::Text(text) => json!({ "ok": text }),
        Answer::Reply(result) => outcome(result),
        Answer::Flag(flag) => json!({ "ok": flag }),
        Answer::Model(result) => outcome(result),
        Answer::Environment(result) => outcome(result),
        Answer::Resolved(result) => outcome(result),
    }
}

/// What a self-test run found.
#[derive(Debug, Clone)]
pub struct SelfTestReport {
    pub cases: usize,
    pub elapsed: std::time::Duration,
}

/// Runs every case of `loaded`'s transform; the first mismatch fails the component.
pub fn self_test(runtime: &Runtime, loaded: &Loaded) -> Result<SelfTestReport, EngineError> {
    let started = std::time::Instant::now();
    let kind = loaded.kind;
    let cases = cases(kind).map_err(|error| EngineError::SelfTest {
        transform: kind,
        message: error.to_string(),
    })?;
    if cases.is_empty() {
        return Err(EngineError::SelfTest {
            transform: kind,
            message: "this build has no golden cases for it".into(),
        });
    }
    for case in &cases {
        let answer = loaded
            .call(runtime, &case.call)
            .map_err(|error| EngineError::SelfTest {
                transform: kind,
                message: format!("case {} ({}): {error}", case.file, case.name),
            })?;
        let got = answer_json(&answer);
        if got != case.expect {
            return Err(EngineError::SelfTest {
                transform: kind,
                message: format!(
                    "case {} ({}): expected {}, got {}",
                    case.file,
                    case.name,
                    excerpt(&case.expect),
                    excerpt(&got)
                ),
            });
        }
    }
    Ok(SelfTestReport {
        cases: cases.len(),
        elapsed: started.elapsed(),
    })
}

/// A bounded rendering of a value for error messages.
fn excerpt(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}
