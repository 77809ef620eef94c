//! The embedded default catalog (`policies/models.json`) used by offline runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use devin_bridge_model_alias::{list_models, resolve, validate, PREFIX};
use serde_json::Value;

fn default_catalog() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/models.json");
    std::fs::read_to_string(path).expect("policies/models.json")
}

#[test]
fn default_catalog_lists_every_variant() {
    let catalog = default_catalog();
    let body: Value = serde_json::from_str(&list_models(&catalog, false).unwrap()).unwrap();
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|card| card["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "devin-cli-agentic/swe-1-7",
            "devin-cli-agentic/swe-1-7-lightning",
            "devin-cli-agentic/swe-1-6",
            "devin-cli-agentic/swe-1-6-fast",
            "devin-cli-agentic/swe-2",
            "devin-cli-agentic/kimi-k3",
            "devin-cli-agentic/glm-5-2",
            "devin-cli-agentic/muse-wonder",
        ]
    );
    for id in ids {
        assert_eq!(format!("{PREFIX}{}", validate(id, &catalog).unwrap()), id);
    }
}

#[test]
fn default_catalog_resolves_slugs_and_aliases() {
    let catalog = default_catalog();
    for (requested, uid) in [
        ("swe-1-7", "swe-1-7"),
        ("swe-1.6", "swe-1-6"),
        ("swe_1_6", "swe-1-6"),
        ("SWE-1.6-FAST", "swe-1-6-fast"),
        ("swe-2", "swe-2"),
        ("kimi-k3", "kimi-k3"),
        ("glm-5.2", "glm-5.2"),
        ("glm-5-2", "glm-5.2"),
        ("muse-wonder", "muse-wonder"),
    ] {
        assert_eq!(
            resolve(requested, &catalog).unwrap().model_uid,
            uid,
            "{requested}"
        );
    }
}
