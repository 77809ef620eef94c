//! Unit tests of the public functions.

use super::*;
use serde_json::{json, Value};

const CATALOG: &str = r#"{"families":[
    {"family_label":"SWE-1.7","family_uid":"swe-1-7","slug":"swe-1-7","aliases":[],"variants":[
        {"model_uid":"swe-1-7","label":"SWE-1.7","max_context_tokens":256000},
        {"model_uid":"swe-1-7-lightning","label":"SWE-1.7 Lightning","max_context_tokens":256000}]},
    {"family_label":"GLM 5.2","family_uid":"glm-5.2","slug":"glm-5.2","aliases":["glm"],"variants":[
        {"model_uid":"glm-5.2","label":"GLM 5.2","max_context_tokens":200000}]}
]}"#;

fn list(catalog: &str) -> Value {
    serde_json::from_str(&list_models(catalog, false).expect("lists")).expect("valid JSON")
}

#[test]
fn validate_returns_the_acp_id() {
    assert_eq!(
        validate("devin-cli-agentic/swe-1-7", CATALOG).unwrap(),
        "swe-1-7"
    );
    assert_eq!(
        validate("devin-cli-agentic/glm-5.2", CATALOG).unwrap(),
        "glm-5-2"
    );
    assert_eq!(
        validate("devin-cli-agentic/GLM_5_2", CATALOG).unwrap(),
        "glm-5-2"
    );
    assert_eq!(
        validate("devin-cli-agentic/glm", CATALOG).unwrap(),
        "glm-5-2"
    );
}

#[test]
fn validate_requires_the_exact_prefix() {
    for reference in [
        "swe-1-7",
        "Devin-CLI-Agentic/swe-1-7",
        "devin-cli-agentic:swe-1-7",
        " devin-cli-agentic/swe-1-7",
        "claude-sonnet-4-5",
        "",
    ] {
        let failure = validate(reference, CATALOG).expect_err(reference);
        assert_eq!(failure.code, "missing_model_prefix", "{reference:?}");
        assert_eq!(failure.status, 400);
        assert!(!failure.repairable);
    }
}

#[test]
fn validate_resolves_the_rest() {
    let code = |reference| validate(reference, CATALOG).unwrap_err().code;
    assert_eq!(code("devin-cli-agentic/"), "unknown_model");
    assert_eq!(code("devin-cli-agentic/swe-9"), "unknown_model");
    assert_eq!(
        code("devin-cli-agentic/devin-cli-agentic/swe-1-7"),
        "unknown_model"
    );
    assert_eq!(code("devin-cli-agentic/adaptive"), "unsupported_model");
    assert_eq!(
        code("devin-cli-agentic/fusion-swe-1-7"),
        "unsupported_model"
    );
}

#[test]
fn a_broken_catalog_is_reported_first() {
    for call in [
        validate("no-prefix", "{").unwrap_err(),
        resolve("swe-1-7", "{").unwrap_err(),
        list_models("{", false).unwrap_err(),
        client_environment(&[("NOPE".into(), String::new())], "{").unwrap_err(),
    ] {
        assert_eq!(call.code, "invalid_catalog");
        assert_eq!(call.status, 500);
    }
}

#[test]
fn resolve_returns_the_whole_model() {
    assert_eq!(
        resolve("swe-1-7-lightning", CATALOG).unwrap(),
        ResolvedModel {
            family: "swe-1-7".into(),
            model_uid: "swe-1-7-lightning".into(),
            label: "SWE-1.7 Lightning".into(),
            acp_id: "swe-1-7-lightning".into(),
        }
    );
}

#[test]
fn list_models_shape() {
    assert_eq!(
        list(CATALOG),
        json!({"data":[
            {"type":"model","id":"devin-cli-agentic/swe-1-7","display_name":"SWE-1.7",
             "created_at":"2025-01-01T00:00:00Z",
             "capabilities":{"tool_calling":true,"vision":false,"reasoning":false},
             "context_window":256000},
            {"type":"model","id":"devin-cli-agentic/swe-1-7-lightning","display_name":"SWE-1.7 Lightning",
             "created_at":"2025-01-01T00:00:00Z",
             "capabilities":{"tool_calling":true,"vision":false,"reasoning":false},
             "context_window":256000},
            {"type":"model","id":"devin-cli-agentic/glm-5-2","display_name":"GLM 5.2",
             "created_at":"2025-01-01T00:00:00Z",
             "capabilities":{"tool_calling":true,"vision":false,"reasoning":false},
             "context_window":200000}],
         "has_more":false,
         "first_id":"devin-cli-agentic/swe-1-7",
         "last_id":"devin-cli-agentic/glm-5-2"})
    );
}

/// The windows are the listing's `context_window`s, by id, without reading the listing back.
#[test]
fn context_windows_are_the_listed_windows() {
    let listed: Vec<(String, u64)> = list(CATALOG)["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|card| {
            let id = card["id"].as_str()?.strip_prefix(PREFIX)?.to_owned();
            Some((id, card["context_window"].as_u64()?))
        })
        .collect();
    assert_eq!(context_windows(CATALOG).unwrap(), listed);
    assert_eq!(
        listed,
        [
            ("swe-1-7".to_owned(), 256_000),
            ("swe-1-7-lightning".to_owned(), 256_000),
            ("glm-5-2".to_owned(), 200_000)
        ]
    );
    assert_eq!(
        context_windows("[").unwrap_err().code,
        "invalid_catalog",
        "the catalog is checked as everywhere"
    );
}

#[test]
fn list_models_empty() {
    assert_eq!(
        list_models(r#"{"families":[]}"#, false).unwrap(),
        r#"{"data":[],"has_more":false,"first_id":null,"last_id":null}"#
    );
    assert_eq!(
        list_models(r#"{"families":[{"slug":"x","variants":[]}]}"#, false).unwrap(),
        r#"{"data":[],"has_more":false,"first_id":null,"last_id":null}"#
    );
}

#[test]
fn list_models_only_lists_ids_that_validate_back() {
    let catalog = r#"{"families":[
        {"slug":"glm","variants":[{"model_uid":"glm-5.2"},{"model_uid":"glm_5_2"},{"model_uid":"glm-6"}]},
        {"slug":"auto","variants":[{"model_uid":"adaptive"}]},
        {"slug":"fusion-pair","variants":[{"model_uid":"fp-1"}]},
        {"slug":"dup","variants":[{"model_uid":"glm-6","label":"again"}]}
    ]}"#;
    let body = list(catalog);
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|card| card["id"].as_str().unwrap())
        .collect();
    // glm-5.2 / glm_5_2 collide once normalized; adaptive and fusion-* are refused as input;
    // glm-6 appears in two families and is ambiguous even exactly.
    assert_eq!(ids, Vec::<&str>::new());
    let catalog = r#"{"families":[
        {"slug":"a","variants":[{"model_uid":"a-1"},{"model_uid":"a.1"}]},
        {"slug":"b","variants":[{"model_uid":"b.2","label":""}]}]}"#;
    let body = list(catalog);
    // `a.1` normalizes to `a-1`, which names the exact uid `a-1`: only that one is listed.
    assert_eq!(body["data"][0]["id"], "devin-cli-agentic/a-1");
    assert_eq!(body["data"][1]["id"], "devin-cli-agentic/b-2");
    assert_eq!(
        body["data"][1]["display_name"], "b.2",
        "empty label falls back to uid"
    );
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
}

#[test]
fn every_listed_id_validates_to_itself() {
    let body = list(CATALOG);
    for card in body["data"].as_array().unwrap() {
        let id = card["id"].as_str().unwrap();
        let acp_id = validate(id, CATALOG).unwrap();
        assert_eq!(format!("{PREFIX}{acp_id}"), id);
    }
}

#[test]
fn client_environment_maps_validated_settings() {
    let settings = vec![
        (
            "BRIDGE_SONNET_MODEL".to_owned(),
            "devin-cli-agentic/glm".to_owned(),
        ),
        (
            "BRIDGE_PRIMARY_MODEL".to_owned(),
            "devin-cli-agentic/swe-1-7".to_owned(),
        ),
    ];
    assert_eq!(
        client_environment(&settings, CATALOG).unwrap(),
        vec![
            (
                "ANTHROPIC_MODEL".to_owned(),
                "devin-cli-agentic/swe-1-7".to_owned()
            ),
            (
                "ANTHROPIC_DEFAULT_SONNET_MODEL".to_owned(),
                "devin-cli-agentic/glm".to_owned()
            ),
            // GLM's 200k is smaller than SWE-1.7's 256k.
            (
                "CLAUDE_CODE_AUTO_COMPACT_WINDOW".to_owned(),
                "200000".to_owned()
            ),
        ]
    );
}

#[test]
fn long_input_is_not_echoed_in_full() {
    let requested = "x".repeat(10_000);
    let failure = resolve(&requested, CATALOG).unwrap_err();
    assert_eq!(failure.code, "unknown_model");
    assert!(failure.message.len() < 200, "{}", failure.message.len());
}

#[test]
fn list_models_carries_the_stated_windows_only() {
    let body = list(
        r#"{"families":[
        {"slug":"a","variants":[{"model_uid":"a","max_context_tokens":128000,"max_output_tokens":8192}]},
        {"slug":"b","variants":[{"model_uid":"b","max_context_tokens":"lots","max_output_tokens":0}]}]}"#,
    );
    assert_eq!(body["data"][0]["context_window"], 128000);
    assert_eq!(body["data"][0]["max_output_tokens"], 8192);
    let unknown = body["data"][1].as_object().unwrap();
    assert!(!unknown.contains_key("context_window"), "{unknown:?}");
    assert!(!unknown.contains_key("max_output_tokens"), "{unknown:?}");
}
