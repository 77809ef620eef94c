//! The model alias's fixtures cover every function and error code, and what they list
//! validates back to itself.

use devin_bridge_calls::{Call, TransformKind};
use serde_json::Value;

use crate::fixtures::{calls_of, error_codes_of, fixtures};
use crate::text_of;

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

#[test]
fn model_alias_fixtures_cover_every_function_and_error_code() {
    let cases = fixtures(TransformKind::ModelAlias);
    let calls = calls_of(&cases);
    for call in CALLS {
        assert!(calls.contains(call), "no fixture calls `{call}`");
    }
    let codes = error_codes_of(&cases);
    for code in ERROR_CODES {
        assert!(codes.contains(code), "no fixture expects `{code}`");
    }
    assert!(
        cases
            .iter()
            .any(|fixture| fixture.args.contains_key("catalog_raw")),
        "no fixture passes `catalog_raw`"
    );
}

/// Every id a `list_models` fixture lists validates back to itself.
#[test]
fn listed_ids_validate() {
    let mut listed = 0;
    for fixture in fixtures(TransformKind::ModelAlias) {
        let Call::ListModels { catalog, .. } = &fixture.case.call else {
            continue;
        };
        let listing = Call::ListModels {
            catalog: catalog.clone(),
            vision: false,
        };
        if listing.run_native().is_err() {
            continue;
        }
        let body: Value = serde_json::from_str(&text_of(&listing)).expect("list body is JSON");
        for card in body["data"].as_array().expect("data array") {
            let id = card["id"].as_str().expect("string id");
            let validate = Call::Validate {
                reference: id.to_owned(),
                catalog: catalog.clone(),
            };
            let acp_id = match validate.run_native() {
                Ok(devin_bridge_calls::Output::Text(acp_id)) => acp_id,
                other => panic!("{}: {id}: {other:?}", fixture.path.display()),
            };
            assert_eq!(
                format!("devin-cli-agentic/{acp_id}"),
                id,
                "{}",
                fixture.path.display()
            );
            listed += 1;
        }
    }
    assert!(listed > 0, "no list_models fixture lists a model");
}
