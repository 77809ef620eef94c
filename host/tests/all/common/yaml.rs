//! YAML helpers of the manifest checks (`compose.rs`, `deploy_manifests.rs`).

use yaml_rust2::Yaml;

/// The string items of a YAML list (empty when it is not a list).
pub(crate) fn strings(value: &Yaml) -> Vec<String> {
    value
        .as_vec()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
