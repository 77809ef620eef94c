//! The catalog: the JSON of `devin models list --format json`, and an index of its names.
//!
//! Only the fields this transform uses are declared; every other field (`family_label`,
//! `family_uid`, ...) is ignored, so a newer CLI that adds or retypes fields does not break
//! the bridge. `aliases`, `variants` and `label` may be missing or null, and a
//! `max_context_tokens` or `max_output_tokens` that is not a positive integer counts as missing.

use serde::{Deserialize, Deserializer};

use crate::failures;
use crate::names::normalize;
use devin_bridge_types::{Failure, ResolvedModel};

#[derive(Debug, Deserialize)]
pub(crate) struct Catalog {
    families: Vec<Family>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Family {
    pub(crate) slug: String,
    #[serde(default, deserialize_with = "null_as_default")]
    aliases: Vec<String>,
    /// The first variant is the family's default.
    #[serde(default, deserialize_with = "null_as_default")]
    variants: Vec<Variant>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Variant {
    pub(crate) model_uid: String,
    #[serde(default, deserialize_with = "null_as_default")]
    label: String,
    /// The variant's context window in tokens, when the catalog states a usable one.
    #[serde(default, deserialize_with = "positive_or_none")]
    pub(crate) max_context_tokens: Option<u64>,
    /// The most tokens the variant writes in one reply, when the catalog states a usable one.
    #[serde(default, deserialize_with = "positive_or_none")]
    pub(crate) max_output_tokens: Option<u64>,
}

/// A positive integer, or `None` for anything else (null, a string, zero, a fraction).
fn positive_or_none<'de, D>(deserializer: D) -> Result<Option<u64>, D::Error>
where
    D: Deserializer<'de>,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(value.as_u64().filter(|tokens| *tokens > 0))
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

impl Catalog {
    /// Parses and checks the catalog. A family needs a slug and a variant needs a uid: without
    /// them nothing could name it. A family without variants is kept (it can be listed by the
    /// CLI while unavailable to the account) and fails only when it is asked for.
    pub(crate) fn parse(text: &str) -> Result<Self, Failure> {
        let catalog: Self = serde_json::from_str(text).map_err(failures::invalid_catalog)?;
        for (position, family) in catalog.families.iter().enumerate() {
            if family.slug.is_empty() {
                return Err(failures::invalid_catalog(format_args!(
                    "family {position} has an empty slug"
                )));
            }
            if family
                .variants
                .iter()
                .any(|variant| variant.model_uid.is_empty())
            {
                return Err(failures::invalid_catalog(format_args!(
                    "family `{}` has a variant with an empty model_uid",
                    family.slug
                )));
            }
        }
        Ok(catalog)
    }
}

impl Variant {
    /// The uid as ACP spells it.
    pub(crate) fn acp_id(&self) -> String {
        normalize(&self.model_uid)
    }

    /// The display label; the uid when the catalog gives none.
    pub(crate) fn label(&self) -> &str {
        if self.label.is_empty() {
            &self.model_uid
        } else {
            &self.label
        }
    }
}

/// What a name in the catalog stands for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    Variant(VariantRef<'a>),
    /// A family with no variants: it has a name but nothing to resolve to.
    EmptyFamily {
        family: &'a Family,
        position: usize,
    },
}

impl Target<'_> {
    /// Identity of the catalog entry: (family position, variant position).
    pub(crate) fn key(&self) -> (usize, Option<usize>) {
        match self {
            Target::Variant(at) => (at.family_pos, Some(at.variant_pos)),
            Target::EmptyFamily { position, .. } => (*position, None),
        }
    }
}

/// One variant of the catalog, with its family and its position (its identity).
#[derive(Debug, Clone, Copy)]
pub(crate) struct VariantRef<'a> {
    pub(crate) family: &'a Family,
    pub(crate) variant: &'a Variant,
    family_pos: usize,
    variant_pos: usize,
}

impl PartialEq for VariantRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        (self.family_pos, self.variant_pos) == (other.family_pos, other.variant_pos)
    }
}

impl Eq for VariantRef<'_> {}

impl VariantRef<'_> {
    pub(crate) fn resolved(&self) -> ResolvedModel {
        ResolvedModel {
            family: self.family.slug.clone(),
            model_uid: self.variant.model_uid.clone(),
            label: self.variant.label().to_owned(),
            acp_id: self.variant.acp_id(),
        }
    }
}

/// Which catalog field a name comes from; resolution tries them in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    ModelUid,
    Slug,
    Alias,
}

/// One name of the catalog, with its comparison form computed once.
#[derive(Debug)]
pub(crate) struct Name<'a> {
    pub(crate) kind: Kind,
    pub(crate) exact: &'a str,
    pub(crate) normal: String,
    pub(crate) target: Target<'a>,
}

/// Every name and every variant of a catalog, in catalog order.
pub(crate) struct Index<'a> {
    names: Vec<Name<'a>>,
    variants: Vec<VariantRef<'a>>,
}

impl<'a> Index<'a> {
    pub(crate) fn new(catalog: &'a Catalog) -> Self {
        let mut names = Vec::new();
        let mut variants = Vec::new();
        for (family_pos, family) in catalog.families.iter().enumerate() {
            let family_variants: Vec<VariantRef<'a>> = family
                .variants
                .iter()
                .enumerate()
                .map(|(variant_pos, variant)| VariantRef {
                    family,
                    variant,
                    family_pos,
                    variant_pos,
                })
                .collect();
            // A family resolves to its first variant, its default.
            let family_target = match family_variants.first() {
                Some(default) => Target::Variant(*default),
                None => Target::EmptyFamily {
                    family,
                    position: family_pos,
                },
            };
            let name = |kind, exact: &'a str, target| Name {
                kind,
                exact,
                normal: normalize(exact),
                target,
            };
            names.push(name(Kind::Slug, &family.slug, family_target));
            for alias in &family.aliases {
                names.push(name(Kind::Alias, alias, family_target));
            }
            for at in &family_variants {
                names.push(name(
                    Kind::ModelUid,
                    &at.variant.model_uid,
                    Target::Variant(*at),
                ));
            }
            variants.extend(family_variants);
        }
        Self { names, variants }
    }

    pub(crate) fn names(&self) -> &[Name<'a>] {
        &self.names
    }

    /// Every variant, in catalog order.
    pub(crate) fn variants(&self) -> &[VariantRef<'a>] {
        &self.variants
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_tolerated() {
        let catalog = Catalog::parse(
            r#"{"version":3,"families":[{"family_label":"X","family_uid":7,"slug":"x",
                "aliases":["y"],"extra":{"a":[1]},
                "variants":[{"model_uid":"x-1","label":"X 1","max_context_tokens":"lots","speed":"fast"}]}]}"#,
        )
        .expect("valid");
        let index = Index::new(&catalog);
        let kinds: Vec<(Kind, &str)> = index.names().iter().map(|n| (n.kind, n.exact)).collect();
        assert_eq!(
            kinds,
            [
                (Kind::Slug, "x"),
                (Kind::Alias, "y"),
                (Kind::ModelUid, "x-1")
            ]
        );
    }

    #[test]
    fn optional_fields_may_be_missing_or_null() {
        let catalog = Catalog::parse(
            r#"{"families":[{"slug":"a","aliases":null,"variants":[{"model_uid":"a-1","label":null}]},
                {"slug":"b"}]}"#,
        )
        .expect("valid");
        let index = Index::new(&catalog);
        assert_eq!(index.names()[0].target.key(), (0, Some(0)));
        assert_eq!(index.names()[2].target.key(), (1, None));
        assert_eq!(index.variants().len(), 1);
        assert_eq!(index.variants()[0].variant.label(), "a-1");
    }

    #[test]
    fn broken_catalogs_are_500() {
        for text in [
            "",
            "not json",
            "[]",
            "{}",
            r#"{"families":{}}"#,
            r#"{"families":[{"variants":[]}]}"#,
            r#"{"families":[{"slug":"a","variants":[{"label":"no uid"}]}]}"#,
            r#"{"families":[{"slug":"","variants":[]}]}"#,
            r#"{"families":[{"slug":"a","variants":[{"model_uid":""}]}]}"#,
            r#"{"families":[{"slug":"a","aliases":"a","variants":[]}]}"#,
            r#"{"families":[]} trailing"#,
        ] {
            let failure = Catalog::parse(text).expect_err(text);
            assert_eq!(failure.code, "invalid_catalog", "{text}");
            assert_eq!(failure.status, 500, "{text}");
            assert!(!failure.repairable);
        }
    }

    #[test]
    fn resolved_normalizes_the_acp_id() {
        let catalog =
            Catalog::parse(r#"{"families":[{"slug":"glm-5.2","variants":[{"model_uid":"GLM_5.2","label":"GLM 5.2"}]}]}"#)
                .expect("valid");
        let index = Index::new(&catalog);
        let resolved = index.variants()[0].resolved();
        assert_eq!(
            resolved,
            ResolvedModel {
                family: "glm-5.2".into(),
                model_uid: "GLM_5.2".into(),
                label: "GLM 5.2".into(),
                acp_id: "glm-5-2".into(),
            }
        );
    }
}
