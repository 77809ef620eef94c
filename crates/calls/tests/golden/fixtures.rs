//! Reading a transform's fixture directory, each file checked for shape before it is run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use devin_bridge_calls::fixture::{decode_file, Case};
use devin_bridge_calls::TransformKind;
use serde_json::{Map, Value};

/// One fixture file: its text, its JSON, and the call and expectation decoded from it.
pub(crate) struct Fixture {
    pub(crate) path: PathBuf,
    pub(crate) text: String,
    /// The arguments as the file writes them (before the text and byte encodings are undone).
    pub(crate) args: Map<String, Value>,
    /// The call's name as the file writes it.
    pub(crate) call: String,
    pub(crate) case: Case,
}

pub(crate) fn fixture_dir(kind: TransformKind) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(kind.name())
}

/// Every fixture of `kind`, sorted by file name.
pub(crate) fn fixtures(kind: TransformKind) -> Vec<Fixture> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixture_dir(kind))
        .expect("the fixture directory exists")
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths.into_iter().map(|path| load(kind, path)).collect()
}

/// The names of the calls `fixtures` make.
pub(crate) fn calls_of(fixtures: &[Fixture]) -> BTreeSet<&str> {
    fixtures
        .iter()
        .map(|fixture| fixture.call.as_str())
        .collect()
}

/// The error codes `fixtures` expect.
pub(crate) fn error_codes_of(fixtures: &[Fixture]) -> BTreeSet<&str> {
    fixtures
        .iter()
        .filter_map(|fixture| {
            fixture
                .case
                .expect
                .pointer("/err/code")
                .and_then(Value::as_str)
        })
        .collect()
}

/// The text arguments a fixture may give as a JSON value or as exact text (`<name>_raw`).
const TEXT_ARGUMENTS: [&str; 4] = ["request", "tools", "catalog", "classifier_context"];

fn load(kind: TransformKind, path: PathBuf) -> Fixture {
    let file = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let Value::Object(fields) = &value else {
        panic!("{file}: a case is an object");
    };
    let unknown: Vec<&String> = fields
        .keys()
        .filter(|key| !["name", "call", "args", "expect"].contains(&key.as_str()))
        .collect();
    assert!(unknown.is_empty(), "{file}: unknown fields {unknown:?}");
    assert!(
        fields.get("name").is_some_and(Value::is_string),
        "{file}: \"name\" must be a string"
    );
    let Some(Value::String(call)) = fields.get("call") else {
        panic!("{file}: \"call\" must be a string");
    };
    let args = match fields.get("args") {
        Some(Value::Object(args)) => args.clone(),
        None => Map::new(),
        Some(_) => panic!("{file}: \"args\" must be an object"),
    };
    let outcomes = fields.get("expect").and_then(Value::as_object);
    assert!(
        outcomes
            .is_some_and(|expect| expect.len() == 1
                && (expect.contains_key("ok") || expect.contains_key("err"))),
        "{file}: \"expect\" must be {{\"ok\": ...}} or {{\"err\": ...}}"
    );
    for name in TEXT_ARGUMENTS {
        assert!(
            !(args.contains_key(name) && args.contains_key(&format!("{name}_raw"))),
            "{file}: at most one of args.{name} and args.{name}_raw"
        );
    }
    let case = decode_file(kind, &file, &text).unwrap_or_else(|error| panic!("{error}"));
    Fixture {
        path,
        text,
        args,
        call: call.clone(),
        case,
    }
}
