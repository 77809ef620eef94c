//! Resolution of a requested name against the catalog's names ([`resolve`]), and of a client's
//! `devin-cli-agentic/<id>` reference, whose prefix is checked first ([`reference`]).
//!
//! Tiers, first match wins: exact variant uid, exact family slug, exact family alias, then
//! the same three on the normalized spelling. Exact tiers come first so that a name spelled
//! exactly as the catalog spells it always means that entry, even when another entry has
//! the same normalized form. Within one tier, names that lead to two different entries make
//! the request ambiguous: we refuse rather than guess.

use crate::catalog::{Index, Kind, Name, Target, VariantRef};
use crate::failures;
use crate::names::{is_routing_pairing, normalize, PREFIX};
use devin_bridge_types::Failure;

#[derive(Clone, Copy)]
enum Spelling {
    Exact,
    Normalised,
}

const TIERS: [(Kind, Spelling); 6] = [
    (Kind::ModelUid, Spelling::Exact),
    (Kind::Slug, Spelling::Exact),
    (Kind::Alias, Spelling::Exact),
    (Kind::ModelUid, Spelling::Normalised),
    (Kind::Slug, Spelling::Normalised),
    (Kind::Alias, Spelling::Normalised),
];

/// The catalog variant a `devin-cli-agentic/<id>` reference names.
pub(crate) fn reference<'a>(index: &Index<'a>, reference: &str) -> Result<VariantRef<'a>, Failure> {
    let requested = reference
        .strip_prefix(PREFIX)
        .ok_or_else(|| failures::missing_prefix(reference))?;
    resolve(index, requested)
}

/// Resolves `requested` (no prefix) to one variant.
pub(crate) fn resolve<'a>(index: &Index<'a>, requested: &str) -> Result<VariantRef<'a>, Failure> {
    if requested.is_empty() {
        return Err(failures::empty_model());
    }
    let normal = normalize(requested);
    if is_routing_pairing(&normal) {
        return Err(failures::routing_pairing(requested));
    }
    for (kind, spelling) in TIERS {
        let matches = |name: &&Name<'a>| {
            name.kind == kind
                && match spelling {
                    Spelling::Exact => name.exact == requested,
                    Spelling::Normalised => name.normal == normal,
                }
        };
        let targets = distinct(index.names().iter().filter(matches).map(|name| name.target));
        match targets.as_slice() {
            [] => continue,
            [target] => return accept(requested, *target),
            several => return Err(failures::ambiguous(requested, &describe(several))),
        }
    }
    Err(failures::unknown_model(requested))
}

/// The single entry a request matched, if it can serve: it must have a variant, and a
/// catalog that lists a routing pairing does not make it acceptable input.
fn accept<'a>(requested: &str, target: Target<'a>) -> Result<VariantRef<'a>, Failure> {
    match target {
        Target::EmptyFamily { family, .. } => {
            Err(failures::family_without_variants(requested, &family.slug))
        }
        Target::Variant(at) => {
            if is_routing_pairing(&normalize(&at.family.slug))
                || is_routing_pairing(&normalize(&at.variant.model_uid))
            {
                Err(failures::routing_pairing(requested))
            } else {
                Ok(at)
            }
        }
    }
}

/// Targets without repeats, in first-seen (catalog) order.
fn distinct<'a>(targets: impl Iterator<Item = Target<'a>>) -> Vec<Target<'a>> {
    let mut out: Vec<Target<'a>> = Vec::new();
    for target in targets {
        if !out.iter().any(|seen| seen.key() == target.key()) {
            out.push(target);
        }
    }
    out
}

/// How candidates are named in an ambiguity message: catalog names, which are not secret
/// (`GET /v1/models` lists them).
fn describe(targets: &[Target<'_>]) -> Vec<String> {
    targets
        .iter()
        .map(|target| match target {
            Target::Variant(at) => {
                format!("`{}` in family `{}`", at.variant.model_uid, at.family.slug)
            }
            Target::EmptyFamily { family, .. } => format!("family `{}`", family.slug),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    const CATALOG: &str = r#"{"families":[
        {"slug":"swe-1-7","aliases":[],"variants":[
            {"model_uid":"swe-1-7","label":"SWE-1.7"},
            {"model_uid":"swe-1-7-lightning","label":"SWE-1.7 Lightning"}]},
        {"slug":"swe-1-6","aliases":["swe-1.6","swe"],"variants":[
            {"model_uid":"swe-1-6-fast","label":"SWE-1.6 Fast"},
            {"model_uid":"swe-1-6","label":"SWE-1.6"}]},
        {"slug":"glm-5.2","aliases":[],"variants":[{"model_uid":"glm-5.2","label":"GLM 5.2"}]},
        {"slug":"empty","aliases":["nothing"],"variants":[]}
    ]}"#;

    fn resolve_uid(catalog: &str, requested: &str) -> Result<String, Failure> {
        let catalog = Catalog::parse(catalog)?;
        let index = Index::new(&catalog);
        resolve(&index, requested).map(|at| at.variant.model_uid.clone())
    }

    fn code(result: Result<String, Failure>) -> String {
        result.expect_err("must fail").code
    }

    #[test]
    fn exact_variant_uid() {
        assert_eq!(
            resolve_uid(CATALOG, "swe-1-7-lightning").unwrap(),
            "swe-1-7-lightning"
        );
    }

    #[test]
    fn exact_uid_beats_family_default() {
        // The family swe-1-6 defaults to swe-1-6-fast, but the uid swe-1-6 is an exact match.
        assert_eq!(resolve_uid(CATALOG, "swe-1-6").unwrap(), "swe-1-6");
    }

    #[test]
    fn family_slug_and_alias_resolve_to_first_variant() {
        assert_eq!(resolve_uid(CATALOG, "swe-1-7").unwrap(), "swe-1-7");
        assert_eq!(resolve_uid(CATALOG, "swe").unwrap(), "swe-1-6-fast");
        assert_eq!(resolve_uid(CATALOG, "swe-1.6").unwrap(), "swe-1-6-fast");
    }

    #[test]
    fn normalized_spellings() {
        assert_eq!(
            resolve_uid(CATALOG, "SWE_1_7_LIGHTNING").unwrap(),
            "swe-1-7-lightning"
        );
        assert_eq!(resolve_uid(CATALOG, "glm-5-2").unwrap(), "glm-5.2");
        assert_eq!(resolve_uid(CATALOG, "GLM_5_2").unwrap(), "glm-5.2");
        // Normalised uid tier comes before the normalized alias tier.
        assert_eq!(resolve_uid(CATALOG, "SWE_1.6").unwrap(), "swe-1-6");
        assert_eq!(resolve_uid(CATALOG, "Swe").unwrap(), "swe-1-6-fast");
    }

    #[test]
    fn unknown_and_empty() {
        assert_eq!(code(resolve_uid(CATALOG, "swe-3")), "unknown_model");
        assert_eq!(code(resolve_uid(CATALOG, "")), "unknown_model");
        assert_eq!(code(resolve_uid(CATALOG, " swe-1-7")), "unknown_model");
        assert_eq!(
            code(resolve_uid(CATALOG, "devin-cli-agentic/swe-1-7")),
            "unknown_model"
        );
    }

    #[test]
    fn family_without_variants_cannot_serve() {
        for name in ["empty", "nothing", "EMPTY"] {
            let failure = resolve_uid(CATALOG, name).expect_err(name);
            assert_eq!(failure.code, "unknown_model");
            assert!(
                failure.message.contains("no variants"),
                "{}",
                failure.message
            );
        }
    }

    #[test]
    fn normalized_collision_is_ambiguous_but_exact_is_not() {
        let catalog = r#"{"families":[
            {"slug":"glm","variants":[{"model_uid":"glm-5.2"},{"model_uid":"glm-5-2"}]}]}"#;
        assert_eq!(resolve_uid(catalog, "glm-5.2").unwrap(), "glm-5.2");
        assert_eq!(resolve_uid(catalog, "glm-5-2").unwrap(), "glm-5-2");
        let failure = resolve_uid(catalog, "GLM_5_2").expect_err("ambiguous");
        assert_eq!(failure.code, "ambiguous_model");
        assert_eq!(failure.status, 400);
        assert!(
            failure.message.contains("`glm-5.2` in family `glm`"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn shared_alias_is_ambiguous() {
        let catalog = r#"{"families":[
            {"slug":"a","aliases":["best"],"variants":[{"model_uid":"a-1"}]},
            {"slug":"b","aliases":["best"],"variants":[{"model_uid":"b-1"}]}]}"#;
        assert_eq!(code(resolve_uid(catalog, "best")), "ambiguous_model");
    }

    #[test]
    fn same_entry_through_several_names_is_not_ambiguous() {
        let catalog = r#"{"families":[
            {"slug":"k","aliases":["k-alias","K_ALIAS"],"variants":[{"model_uid":"k-1"}]}]}"#;
        assert_eq!(resolve_uid(catalog, "k.alias").unwrap(), "k-1");
    }

    #[test]
    fn routing_pairings_are_refused() {
        for name in [
            "adaptive",
            "ADAPTIVE",
            "fusion-swe-1-7",
            "Fusion_Kimi",
            "fusion",
        ] {
            assert_eq!(
                code(resolve_uid(CATALOG, name)),
                "unsupported_model",
                "{name}"
            );
        }
        // Even when the catalog lists them, directly or behind an alias.
        let catalog = r#"{"families":[
            {"slug":"auto","aliases":["smart"],"variants":[{"model_uid":"adaptive"}]},
            {"slug":"fusion-pair","variants":[{"model_uid":"fp-1"}]}]}"#;
        assert_eq!(code(resolve_uid(catalog, "adaptive")), "unsupported_model");
        assert_eq!(code(resolve_uid(catalog, "smart")), "unsupported_model");
        assert_eq!(code(resolve_uid(catalog, "fp-1")), "unsupported_model");
    }
}
