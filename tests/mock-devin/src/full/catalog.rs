//! The full agent's model catalog: what `mock-devin models list --format json` prints and what
//! `session/new` offers as the `model` config option.
//!
//! `devin models list` names variants with `.` and `_` (`glm-5.2`); ACP config values use `-`
//! in their place (`glm-5-2`). Families marked `not_offered` (`adaptive`, `legacy-9`) are
//! listed but not offered in `session/new`: setting one answers "Model not found".

use serde_json::{json, Value};

/// One model variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Variant {
    /// The catalog's `model_uid` (may contain `.` or `_`).
    pub model_uid: &'static str,
    pub label: &'static str,
    pub max_context_tokens: u64,
}

/// One model family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Family {
    pub family_label: &'static str,
    pub family_uid: &'static str,
    pub slug: &'static str,
    pub aliases: &'static [&'static str],
    pub variants: &'static [Variant],
    /// Listed in the catalog but not available in sessions (absent from `session/new`).
    pub not_offered: bool,
}

pub(crate) const FAMILIES: &[Family] = &[
    Family {
        family_label: "SWE-2",
        family_uid: "swe-2",
        slug: "swe-2",
        aliases: &[],
        variants: &[
            Variant {
                model_uid: "swe-2",
                label: "SWE-2",
                max_context_tokens: 256_000,
            },
            Variant {
                model_uid: "swe-2-fast",
                label: "SWE-2 Fast",
                max_context_tokens: 256_000,
            },
            Variant {
                model_uid: "swe-2-high",
                label: "SWE-2 High",
                max_context_tokens: 256_000,
            },
        ],
        not_offered: false,
    },
    Family {
        family_label: "Kimi K3",
        family_uid: "kimi-k3",
        slug: "kimi-k3",
        aliases: &["kimi"],
        variants: &[Variant {
            model_uid: "kimi-k3",
            label: "Kimi K3",
            max_context_tokens: 262_144,
        }],
        not_offered: false,
    },
    Family {
        family_label: "GLM-5.2",
        family_uid: "glm-5.2",
        slug: "glm-5.2",
        aliases: &["glm"],
        variants: &[Variant {
            model_uid: "glm-5.2",
            label: "GLM-5.2",
            max_context_tokens: 200_000,
        }],
        not_offered: false,
    },
    Family {
        family_label: "Muse Wonder",
        family_uid: "muse-wonder",
        slug: "muse-wonder",
        aliases: &[],
        variants: &[Variant {
            model_uid: "muse-wonder",
            label: "Muse Wonder",
            max_context_tokens: 400_000,
        }],
        not_offered: false,
    },
    Family {
        family_label: "Adaptive",
        family_uid: "adaptive",
        slug: "adaptive",
        aliases: &[],
        variants: &[Variant {
            model_uid: "adaptive",
            label: "Adaptive",
            max_context_tokens: 256_000,
        }],
        not_offered: true,
    },
    Family {
        family_label: "Legacy 9",
        family_uid: "legacy-9",
        slug: "legacy-9",
        aliases: &[],
        variants: &[Variant {
            model_uid: "legacy-9",
            label: "Legacy 9",
            max_context_tokens: 128_000,
        }],
        not_offered: true,
    },
];

/// The ACP id selected when a session starts.
pub(crate) const DEFAULT_MODEL: &str = "swe-2";

/// The model whose sessions offer no `thought_level` option.
pub(crate) const NO_THOUGHT_LEVEL_MODEL: &str = "glm-5-2";

/// A catalog id as ACP spells it: `.` and `_` become `-`.
pub(crate) fn acp_id(model_uid: &str) -> String {
    model_uid.replace(['.', '_'], "-")
}

/// Every variant offered in `session/new`, as `(ACP id, variant)`, in catalog order.
pub(crate) fn offered() -> impl Iterator<Item = (String, &'static Variant)> {
    FAMILIES
        .iter()
        .filter(|family| !family.not_offered)
        .flat_map(|family| family.variants.iter())
        .map(|variant| (acp_id(variant.model_uid), variant))
}

/// The offered variant with this ACP id.
pub(crate) fn find_offered(id: &str) -> Option<&'static Variant> {
    offered()
        .find(|(acp, _)| acp == id)
        .map(|(_, variant)| variant)
}

/// The `{"families":[...]}` document of `devin models list --format json`.
pub(crate) fn catalog_json() -> Value {
    let families: Vec<Value> = FAMILIES
        .iter()
        .map(|family| {
            json!({
                "family_label": family.family_label,
                "family_uid": family.family_uid,
                "slug": family.slug,
                "aliases": family.aliases,
                "variants": family.variants.iter().map(|v| json!({
                    "model_uid": v.model_uid,
                    "label": v.label,
                    "max_context_tokens": v.max_context_tokens,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "families": families })
}

/// The plain listing of `devin models list`: one `family_uid  model_uid  label` line per variant.
pub(crate) fn catalog_text() -> String {
    let mut out = String::new();
    for family in FAMILIES {
        for variant in family.variants {
            out.push_str(&format!(
                "{:<14} {:<14} {}\n",
                family.family_uid, variant.model_uid, variant.label
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_models_exclude_legacy_and_use_acp_ids() {
        let ids: Vec<String> = offered().map(|(id, _)| id).collect();
        assert_eq!(
            ids,
            [
                "swe-2",
                "swe-2-fast",
                "swe-2-high",
                "kimi-k3",
                "glm-5-2",
                "muse-wonder"
            ]
        );
        assert_eq!(find_offered("adaptive"), None);
        assert_eq!(
            find_offered("swe-2-high").map(|v| v.label),
            Some("SWE-2 High")
        );
        assert_eq!(find_offered("glm-5-2").map(|v| v.label), Some("GLM-5.2"));
        assert_eq!(find_offered("glm-5.2"), None);
        assert_eq!(find_offered("legacy-9"), None);
        assert_eq!(find_offered(DEFAULT_MODEL).map(|v| v.label), Some("SWE-2"));
    }

    #[test]
    fn catalog_lists_every_family_in_the_policy_format() {
        let catalog = catalog_json();
        let families = catalog["families"].as_array().expect("families");
        let uids: Vec<&str> = families
            .iter()
            .filter_map(|f| f["family_uid"].as_str())
            .collect();
        assert_eq!(
            uids,
            [
                "swe-2",
                "kimi-k3",
                "glm-5.2",
                "muse-wonder",
                "adaptive",
                "legacy-9"
            ]
        );
        assert_eq!(families[1]["aliases"], json!(["kimi"]));
        assert_eq!(families[2]["variants"][0]["model_uid"], "glm-5.2");
        for family in families {
            for key in ["family_label", "slug"] {
                assert!(family[key].is_string(), "{family}");
            }
            for variant in family["variants"].as_array().expect("variants") {
                assert!(variant["label"].is_string());
                assert!(variant["max_context_tokens"].is_u64());
            }
        }
        assert!(catalog_text().contains("legacy-9"));
        assert!(catalog_text().contains("Adaptive"));
    }
}
