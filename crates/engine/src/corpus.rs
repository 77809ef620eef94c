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

/// Arguments the fixtures give as JSON values (or as exact text in `<name>_raw`) and the
/// transform takes as text.
const TEXT_ARGUMENTS: [&str; 3] = ["request", "tools", "catalog"];
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

    /// The corpus of a component: shipped with the set its file belongs to, else the embedded
    /// one (always for a built-in component).
    pub fn for_location(
        kind: TransformKind,
        location: &crate::ComponentLocation,
    ) -> Result<Self, EngineError> {
        match location.path() {
            Some(path) => Self::for_component(kind, path),
            // A built-in component is tested against the corpus built in beside it.
            None => Self::embedded(kind),
        }
    }

    /// The corpus of a component file: shipped beside it, else the embedded one.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ImageLimits, PromptOptions};

    #[test]
    fn every_embedded_fixture_decodes() {
        for kind in TransformKind::ALL {
            let cases = cases(kind).unwrap_or_else(|error| panic!("{kind}: {error:?}"));
            assert!(!cases.is_empty(), "{kind} has no cases");
        }
    }

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
