//! Golden fixtures (`tests/fixtures/model-alias/*.json`) against the native library.
//!
//! Every case must match exactly; the same files drive the native-vs-wasm differential test
//! and the host's self-test of a component, so they must also cover every function and
//! every error code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use devin_bridge_model_alias::{
    client_environment, context_windows, list_models, resolve, validate, Failure,
};
use serde::Deserialize;
use serde_json::{json, Value};

const CALLS: [&str; 5] = [
    "validate",
    "client_environment",
    "resolve",
    "list_models",
    "context_windows",
];

const ERROR_CODES: [&str; 8] = [
    "missing_model_prefix",
    "unknown_model",
    "ambiguous_model",
    "unsupported_model",
    "invalid_catalog",
    "unknown_model_setting",
    "empty_model_setting",
    "duplicate_model_setting",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    call: String,
    args: serde_json::Map<String, Value>,
    expect: Value,
}

fn fixtures() -> Vec<(PathBuf, Case)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/model-alias");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixture directory")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("readable fixture");
            let case = serde_json::from_str(&text)
                .unwrap_or_else(|error| panic!("{}: bad fixture: {error}", path.display()));
            (path, case)
        })
        .collect()
}

fn string_arg<'a>(case: &'a Case, name: &str) -> &'a str {
    case.args
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{}: missing string argument `{name}`", case.name))
}

/// `catalog` is a JSON value the harness serialises compactly; `catalog_raw` is exact text
/// (for catalogs that are not valid JSON, or whose error message depends on positions).
fn catalog(case: &Case) -> String {
    match (case.args.get("catalog"), case.args.get("catalog_raw")) {
        (Some(value), None) => value.to_string(),
        (None, Some(Value::String(raw))) => raw.clone(),
        _ => panic!(
            "{}: needs exactly one of `catalog`, `catalog_raw` (text)",
            case.name
        ),
    }
}

fn settings(case: &Case) -> Vec<(String, String)> {
    serde_json::from_value(case.args.get("settings").cloned().unwrap_or(Value::Null))
        .unwrap_or_else(|error| panic!("{}: `settings`: {error}", case.name))
}

fn outcome<T: serde::Serialize>(result: Result<T, Failure>) -> Value {
    match result {
        Ok(value) => json!({ "ok": value }),
        Err(failure) => json!({ "err": failure }),
    }
}

fn run(case: &Case) -> Value {
    let catalog = catalog(case);
    match case.call.as_str() {
        "validate" => outcome(validate(string_arg(case, "reference"), &catalog)),
        "client_environment" => outcome(client_environment(&settings(case), &catalog)),
        "resolve" => outcome(resolve(string_arg(case, "requested"), &catalog)),
        "list_models" => outcome(list_models(
            &catalog,
            case.args
                .get("vision")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        )),
        "context_windows" => outcome(context_windows(&catalog)),
        other => panic!("{}: unknown call `{other}`", case.name),
    }
}

#[test]
fn golden_fixtures_match() {
    let cases = fixtures();
    assert!(
        cases.len() >= 12,
        "expected at least 12 model-alias fixtures"
    );
    let mut failures = Vec::new();
    for (path, case) in &cases {
        let actual = run(case);
        if actual != case.expect {
            failures.push(format!(
                "{} ({}):\n  expected {}\n  actual   {}",
                path.display(),
                case.name,
                case.expect,
                actual
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fixtures_cover_every_function_and_error_code() {
    let cases = fixtures();
    let calls: BTreeSet<&str> = cases.iter().map(|(_, case)| case.call.as_str()).collect();
    for call in CALLS {
        assert!(calls.contains(call), "no fixture calls `{call}`");
    }
    let codes: BTreeSet<&str> = cases
        .iter()
        .filter_map(|(_, case)| case.expect.pointer("/err/code").and_then(Value::as_str))
        .collect();
    for code in ERROR_CODES {
        assert!(codes.contains(code), "no fixture expects `{code}`");
    }
    assert!(
        cases
            .iter()
            .any(|(_, case)| case.args.contains_key("catalog_raw")),
        "no fixture passes `catalog_raw`"
    );
}

/// Every id a `list_models` fixture lists validates back to itself.
#[test]
fn listed_ids_validate() {
    for (path, case) in fixtures() {
        if case.call != "list_models" {
            continue;
        }
        let catalog = catalog(&case);
        let Ok(body) = list_models(&catalog, false) else {
            continue;
        };
        let body: Value = serde_json::from_str(&body).expect("list body is JSON");
        for card in body["data"].as_array().expect("data array") {
            let id = card["id"].as_str().expect("string id");
            let acp_id = validate(id, &catalog)
                .unwrap_or_else(|failure| panic!("{}: {id}: {failure}", path.display()));
            assert_eq!(
                format!("devin-cli-agentic/{acp_id}"),
                id,
                "{}",
                path.display()
            );
        }
    }
}
