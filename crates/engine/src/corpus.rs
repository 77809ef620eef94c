//! The golden self-test corpus: the fixtures under `tests/fixtures/<transform>/`.
//!
//! A candidate component runs every case of its transform and must keep the contract each
//! expected answer illustrates (see `contract` for exactly what is compared) before it may
//! serve. Where the corpus comes from:
//!
//! - `cargo xtask components` ships it with the component set, as
//!   `corpus/<transform>/<case>.json` next to the components, each file listed with its sha256
//!   in `manifest.json` (`components[].corpus[] = {file, sha256}`);
//! - the host uses the corpus shipped next to a transform's component file (the policy's
//!   path; `components check` uses the one next to the checked file), so a component is held
//!   to the corpus of the set it was built with. A listed file that is missing, outside
//!   `corpus/<transform>/`, or whose digest differs is an error (fail closed);
//! - a set without a corpus (no `manifest.json`, or no `corpus` list for the transform) is
//!   checked against the copy embedded in the host at build time.
//!
//! The same decoding of cases is used by the differential tests.

use std::path::{Path, PathBuf};

use devin_bridge_types::Failure;
use serde_json::{json, Value};

use super::bindings::{Answer, Call};
use super::contract;
use super::runtime::Runtime;
use super::{sha256_hex, EngineError, Loaded, TransformKind};

/// The largest manifest and corpus file read from disk.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;
const MAX_CASE_BYTES: u64 = 16 << 20;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/corpus.rs"));
}

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
                    file: (*file).to_owned(),
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
        "serialize_unseen" => Call::SerializeUnseen {
            request: json_text(args, "request")?.into(),
            options: prompt_options(args)?,
        },
        "serialize_resumed" => Call::SerializeResumed {
            continuation: string(args, "continuation")?,
            resume: typed(args, "resume")?,
            options: prompt_options(args)?,
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
        "parse_review" => Call::ParseReview {
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
        "parse_events" => Call::ParseEvents {
            buffer: bytes(args, "buffer")?,
            max_event_bytes: typed(args, "max_event_bytes")?,
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
            vision: match args.get("vision") {
                None => false,
                Some(_) => typed(args, "vision")?,
            },
        },
        other => return Err(format!("unknown call {other:?}")),
    })
}

/// `held`, `max_images` and `max_image_bytes` of a serializer call (each 0 when absent).
fn prompt_options(args: &Value) -> Result<crate::PromptOptions, String> {
    let number = |key: &str| -> Result<u32, String> {
        match args.get(key) {
            None => Ok(0),
            Some(_) => typed(args, key),
        }
    };
    Ok(crate::PromptOptions {
        held: number("held")?,
        images: crate::ImageLimits {
            max_images: number("max_images")?,
            max_image_bytes: number("max_image_bytes")?,
        },
    })
}

fn string(args: &Value, key: &str) -> Result<String, String> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("argument {key:?} must be a string"))
}

/// `key` as text (its UTF-8 bytes), or `key_bytes` as a list of byte values (for bytes that
/// are not UTF-8).
fn bytes(args: &Value, key: &str) -> Result<Vec<u8>, String> {
    if let Some(raw) = args.get(format!("{key}_bytes")) {
        return serde_json::from_value(raw.clone())
            .map_err(|error| format!("argument {key}_bytes must be a list of bytes: {error}"));
    }
    string(args, key).map(String::into_bytes)
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
        Answer::Unseen(result) => outcome(result),
        Answer::Resumed(result) => outcome(result),
        Answer::Text(text) => json!({ "ok": text }),
        Answer::Reply(result) => outcome(result),
        Answer::Flag(flag) => json!({ "ok": flag }),
        Answer::Model(result) => outcome(result),
        Answer::Environment(result) => outcome(result),
        Answer::Resolved(result) => outcome(result),
        Answer::Review(result) => outcome(result),
        Answer::Frames(result) => outcome(result),
    }
}

/// The cases one transform is checked against, and where they came from.
#[derive(Debug, Clone)]
pub struct Corpus {
    pub kind: TransformKind,
    /// `embedded`, or the manifest the cases were read through.
    pub origin: String,
    pub cases: Vec<Case>,
}

impl Corpus {
    /// The copy embedded in the host at build time.
    pub fn embedded(kind: TransformKind) -> Result<Self, EngineError> {
        let cases = cases(kind).map_err(|error| EngineError::Corpus {
            transform: kind,
            message: error.to_string(),
        })?;
        Ok(Self {
            kind,
            origin: "embedded".into(),
            cases,
        })
    }

    /// The corpus shipped with the component set `component` belongs to, else the embedded one.
    pub fn for_component(kind: TransformKind, component: &Path) -> Result<Self, EngineError> {
        match Self::shipped(kind, component)? {
            Some(corpus) => Ok(corpus),
            None => Self::embedded(kind),
        }
    }

    /// Reads `corpus/<transform>/*.json` as listed (with digests) in the `manifest.json` next
    /// to `component`. `None` when the set ships no corpus for this transform.
    pub fn shipped(kind: TransformKind, component: &Path) -> Result<Option<Self>, EngineError> {
        let error = |message: String| EngineError::Corpus {
            transform: kind,
            message,
        };
        let dir = component.parent().unwrap_or(Path::new("."));
        let manifest_path = dir.join("manifest.json");
        let manifest = match read_bounded(&manifest_path, MAX_MANIFEST_BYTES) {
            Ok(bytes) => bytes,
            Err(problem) if problem.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(problem) => return Err(error(format!("{}: {problem}", manifest_path.display()))),
        };
        let manifest: Value = serde_json::from_slice(&manifest)
            .map_err(|problem| error(format!("{}: {problem}", manifest_path.display())))?;
        let Some(listed) = manifest
            .get("components")
            .and_then(Value::as_array)
            .and_then(|components| {
                components
                    .iter()
                    .find(|entry| entry.get("name").and_then(Value::as_str) == Some(kind.name()))
            })
            .and_then(|entry| entry.get("corpus"))
        else {
            return Ok(None);
        };
        let listed = listed
            .as_array()
            .ok_or_else(|| error(format!("{}: corpus is not a list", manifest_path.display())))?;
        if listed.is_empty() {
            return Err(error(format!(
                "{} lists an empty corpus for {kind}",
                manifest_path.display()
            )));
        }
        let mut cases = Vec::with_capacity(listed.len());
        for item in listed {
            let file = item.get("file").and_then(Value::as_str).unwrap_or("");
            let expected = item.get("sha256").and_then(Value::as_str).unwrap_or("");
            let path = corpus_file(dir, kind, file).ok_or_else(|| {
                error(format!(
                    "{} lists {file:?}, which is not a file under corpus/{kind}/",
                    manifest_path.display()
                ))
            })?;
            let bytes = read_bounded(&path, MAX_CASE_BYTES)
                .map_err(|problem| error(format!("{}: {problem}", path.display())))?;
            let actual = sha256_hex(&bytes);
            if !expected.eq_ignore_ascii_case(&actual) {
                return Err(error(format!(
                    "{} has sha256 {actual}, but {} lists {expected}",
                    path.display(),
                    manifest_path.display()
                )));
            }
            let fixture: Value = serde_json::from_slice(&bytes)
                .map_err(|problem| error(format!("{}: {problem}", path.display())))?;
            let (name, call, expect) = decode_case(kind, &fixture)
                .map_err(|problem| error(format!("{}: {problem}", path.display())))?;
            cases.push(Case {
                file: file.rsplit('/').next().unwrap_or(file).to_owned(),
                name,
                call,
                expect,
            });
        }
        Ok(Some(Self {
            kind,
            origin: manifest_path.display().to_string(),
            cases,
        }))
    }
}

/// `dir/corpus/<kind>/<name>.json` for a listed `corpus/<kind>/<name>.json`, nothing else.
fn corpus_file(dir: &Path, kind: TransformKind, listed: &str) -> Option<PathBuf> {
    let name = listed.strip_prefix(&format!("corpus/{}/", kind.name()))?;
    let valid = name.ends_with(".json")
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    valid.then(|| dir.join("corpus").join(kind.name()).join(name))
}

fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "larger than the {limit} byte limit"
        )));
    }
    Ok(bytes)
}

/// What a self-test run found.
#[derive(Debug, Clone)]
pub struct SelfTestReport {
    pub cases: usize,
    pub corpus: String,
    pub elapsed: std::time::Duration,
}

/// Runs every case of `corpus` on `loaded`; the first broken promise fails the component.
pub fn self_test(
    runtime: &Runtime,
    loaded: &Loaded,
    corpus: &Corpus,
) -> Result<SelfTestReport, EngineError> {
    let started = std::time::Instant::now();
    let kind = loaded.kind;
    if corpus.kind != kind {
        return Err(EngineError::SelfTest {
            transform: kind,
            message: format!("the corpus given is {}'s", corpus.kind),
        });
    }
    if corpus.cases.is_empty() {
        return Err(EngineError::SelfTest {
            transform: kind,
            message: "there are no golden cases for it".into(),
        });
    }
    for case in &corpus.cases {
        let answer = loaded
            .call(runtime, &case.call)
            .map_err(|error| EngineError::SelfTest {
                transform: kind,
                message: format!("fixture {} ({}): {error}", case.file, case.name),
            })?;
        let got = answer_json(&answer);
        contract::check(&case.call, &case.expect, &got).map_err(|difference| {
            EngineError::SelfTest {
                transform: kind,
                message: format!("fixture {} ({}): {difference}", case.file, case.name),
            }
        })?;
    }
    Ok(SelfTestReport {
        cases: corpus.cases.len(),
        corpus: corpus.origin.clone(),
        elapsed: started.elapsed(),
    })
}
