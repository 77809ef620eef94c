//! The model that really answered a turn, as the Devin CLI reports it, and how to compare it
//! with the model that was asked for.
//!
//! Three places name it, all recorded from the real CLI:
//! - `_cognition.ai/agent_stopped {cause, sessionId, stats: {modelLabel, ...}}`, sent before
//!   the prompt result: `stats.modelLabel` is the model's display label ("SWE-2 High");
//! - `_cognition.ai/turn_stats {sessionId, turnClientMessageId, turnRequestId,
//!   responseDimensions}`: `responseDimensions` is a list of entries `{uid, groupTitle, label,
//!   kind}`; the model is the entry whose `uid` is `model`, its display label in `kind.value`
//!   (`kind: {type: "metric", value}`);
//! - `usage_update._meta`, where the same entries are written in the CLI's Rust spelling
//!   (`kind: {Metric: {value}}`). The `_meta` key that holds them is not recorded: every
//!   top-level list of `_meta` is searched for the `model` entry.
//!
//! A cancelled turn's `turn_stats` has no `responseDimensions`; some recordings have no
//! `turn_stats` at all. Labels are display names, so [`names_model`] compares them with ids as
//! ids (`SWE-1.6 Slow` names `swe-1-6-slow`) and with the display names a catalog gives the
//! id (the session's option name, the model catalog's label).

use serde_json::Value;

use super::options::normalize_id;

/// `_cognition.ai/agent_stopped`.
pub const AGENT_STOPPED: &str = "_cognition.ai/agent_stopped";
/// `_cognition.ai/turn_stats`.
pub const TURN_STATS: &str = "_cognition.ai/turn_stats";
/// Longest label kept (characters).
pub const MAX_LABEL_CHARS: usize = 200;
/// Most dimension entries read from one list.
pub(crate) const MAX_DIMENSIONS: usize = 256;
/// The `uid` of the model's dimension.
const MODEL_UID: &str = "model";

/// One `responseDimensions` entry: its `uid`, the kind's type (lowercase, without `_`:
/// `metric`, `cumulativemetric`) and the kind's value.
#[derive(Debug, Clone)]
pub(crate) struct Dimension<'a> {
    pub uid: &'a str,
    pub kind: String,
    pub value: &'a Value,
}

/// The entries of a `responseDimensions` list (anything else has none), bounded. The kind is
/// read in both recorded spellings: `{type, value}` and `{Type: {value}}`.
pub(crate) fn dimensions(list: Option<&Value>) -> impl Iterator<Item = Dimension<'_>> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(MAX_DIMENSIONS)
        .filter_map(dimension)
}

fn dimension(entry: &Value) -> Option<Dimension<'_>> {
    let uid = entry.get("uid")?.as_str()?;
    let kind = entry.get("kind")?.as_object()?;
    let (kind_type, value) = match (kind.get("type"), kind.get("value")) {
        (Some(Value::String(kind_type)), Some(value)) => (kind_type.as_str(), value),
        _ => {
            // The Rust spelling: one key, the variant, holding `{value}`.
            let mut variants = kind.iter();
            let (variant, inner) = variants.next()?;
            if variants.next().is_some() {
                return None;
            }
            (variant.as_str(), inner.get("value")?)
        }
    };
    Some(Dimension {
        uid,
        kind: kind_type
            .chars()
            .filter(|c| *c != '_')
            .take(MAX_LABEL_CHARS)
            .collect::<String>()
            .to_ascii_lowercase(),
        value,
    })
}

/// The model an `agent_stopped` notification names: `stats.modelLabel`, else the `model`
/// dimension of its stats.
pub fn stopped_model(params: &Value) -> Option<String> {
    let stats = params.get("stats")?;
    label(stats.get("modelLabel")).or_else(|| dimension_model(stats.get("responseDimensions")))
}

/// The model a `turn_stats` notification names (its `model` dimension).
pub fn turn_stats_model(params: &Value) -> Option<String> {
    dimension_model(params.get("responseDimensions"))
}

/// The model a `usage_update`'s `_meta` names: the `model` entry of any list in it.
pub fn usage_update_model(meta: &Value) -> Option<String> {
    meta.as_object()?
        .values()
        .filter(|value| value.is_array())
        .take(MAX_DIMENSIONS)
        .find_map(|list| dimension_model(Some(list)))
}

/// The model an `agent_stopped` or `turn_stats` notification names, by method.
pub fn model_of(method: &str, params: &Value) -> Option<String> {
    match method {
        AGENT_STOPPED => stopped_model(params),
        TURN_STATS => turn_stats_model(params),
        _ => None,
    }
}

fn dimension_model(list: Option<&Value>) -> Option<String> {
    dimensions(list)
        .find(|dimension| dimension.uid == MODEL_UID)
        .and_then(|dimension| label(Some(dimension.value)))
}

fn label(value: Option<&Value>) -> Option<String> {
    let text = value?.as_str()?.trim();
    (!text.is_empty()).then(|| text.chars().take(MAX_LABEL_CHARS).collect())
}

/// Whether `observed` (a display label or an id) names the model `requested_id` (an ACP id)
/// whose display name is `requested_name`: compared without case, with spaces, `.` and `_` as
/// `-`.
pub fn names_model(observed: &str, requested_id: &str, requested_name: Option<&str>) -> bool {
    names_any(observed, requested_id, requested_name)
}

/// [`names_model`] with every display name known for `requested_id` (the session option's
/// name, the catalog's label): a label that is none of them and does not read as the id is
/// another model.
pub fn names_any<'a>(
    observed: &str,
    requested_id: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> bool {
    let norm = |text: &str| normalize_id(&text.trim().replace(' ', "-"));
    let observed = norm(observed);
    observed == norm(requested_id) || names.into_iter().any(|name| observed == norm(name))
}

/// The display labels a model catalog gives `id` (`families[].variants[]` entries whose
/// `model_uid` is `id`, compared as ids; their `label`), bounded. A catalog that cannot be
/// read gives none.
pub fn catalog_labels(catalog: &Value, id: &str) -> Vec<String> {
    const MAX_LABELS: usize = 16;
    let wanted = normalize_id(id);
    catalog
        .get("families")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|family| family.get("variants").and_then(Value::as_array))
        .flatten()
        .filter(|variant| {
            variant
                .get("model_uid")
                .and_then(Value::as_str)
                .is_some_and(|uid| normalize_id(uid) == wanted)
        })
        .filter_map(|variant| label(variant.get("label")))
        .take(MAX_LABELS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `responseDimensions` as the real CLI sends it in `turn_stats`.
    fn recorded_dimensions(model: &str) -> Value {
        json!([
            {"uid": "duration", "groupTitle": "Response Statistics", "label": "Duration",
             "kind": {"type": "metric", "value": "3.2s"}},
            {"uid": "model", "groupTitle": "Response Statistics", "label": "Model",
             "kind": {"type": "metric", "value": model}},
        ])
    }

    #[test]
    fn turn_stats_names_its_model_by_uid_in_kind_value() {
        let params = json!({"sessionId": "s", "turnClientMessageId": "m", "turnRequestId": "r",
                            "responseDimensions": recorded_dimensions("SWE-1.6 Slow")});
        assert_eq!(turn_stats_model(&params).as_deref(), Some("SWE-1.6 Slow"));
        assert_eq!(
            model_of(TURN_STATS, &params).as_deref(),
            Some("SWE-1.6 Slow")
        );
        assert_eq!(model_of("other", &params), None);
        // The entry's `label` is the row's title, not the model.
        let titled = json!({"responseDimensions": [{"uid": "tier", "label": "model",
                            "kind": {"type": "metric", "value": "x"}}]});
        assert_eq!(turn_stats_model(&titled), None);
        // A cancelled turn: no dimensions.
        assert_eq!(turn_stats_model(&json!({"sessionId": "s"})), None);
        // No `modelLabel` in turn_stats: a field of that name is not read.
        assert_eq!(turn_stats_model(&json!({"modelLabel": "SWE-2"})), None);
    }

    #[test]
    fn the_rust_spelling_of_kind_is_read_in_usage_update_meta() {
        let meta = json!({
            "cognition.ai/inputTokens": 10,
            "cognition.ai/responseDimensions": [
                {"uid": "model", "label": "Model", "kind": {"Metric": {"value": "SWE-2 High"}}}
            ]
        });
        assert_eq!(usage_update_model(&meta).as_deref(), Some("SWE-2 High"));
        assert_eq!(
            usage_update_model(&json!({"cognition.ai/inputTokens": 10})),
            None
        );
        assert_eq!(usage_update_model(&json!("x")), None);
    }

    #[test]
    fn the_guessed_shapes_are_not_read() {
        // An object keyed by name, and `{name|key, value}` pairs: the CLI sends neither.
        for guessed in [
            json!({"model": "SWE-2"}),
            json!([{"name": "model", "value": "SWE-2"}]),
            json!([{"key": "model", "value": "SWE-2"}]),
        ] {
            assert_eq!(
                turn_stats_model(&json!({"responseDimensions": guessed})),
                None
            );
        }
    }

    #[test]
    fn agent_stopped_names_its_model_label_first() {
        let params = json!({"cause": "complete", "sessionId": "s", "stats": {"modelLabel": "SWE-2 High",
                            "responseDimensions": recorded_dimensions("other")}});
        assert_eq!(stopped_model(&params).as_deref(), Some("SWE-2 High"));
        let params = json!({"stats": {"responseDimensions": recorded_dimensions("GLM 5.2")}});
        assert_eq!(stopped_model(&params).as_deref(), Some("GLM 5.2"));
        assert_eq!(stopped_model(&json!({"stats": {}})), None);
        assert_eq!(stopped_model(&json!({"stats": {"modelLabel": 7}})), None);
    }

    #[test]
    fn labels_are_bounded() {
        let long = "m".repeat(10_000);
        let params = json!({"stats": {"modelLabel": long}});
        assert_eq!(
            stopped_model(&params).map(|l| l.len()),
            Some(MAX_LABEL_CHARS)
        );
    }

    #[test]
    fn a_display_label_names_a_model_by_id_or_name() {
        assert!(names_model("SWE-1.7", "swe-1-7", Some("SWE-1.7")));
        assert!(names_model("GLM 5.2", "glm-5-2", Some("GLM 5.2")));
        assert!(names_model("glm-5-2", "glm-5-2", None));
        assert!(names_model("SWE-1.6 Slow", "swe-1-6-slow", None));
        assert!(!names_model("SWE-1.6", "swe-1-7", Some("SWE-1.7")));
        // A label that is not the id read as an id: only a known display name maps it.
        assert!(!names_any(
            "Claude Sonnet (thinking)",
            "claude-4-sonnet-thinking",
            []
        ));
        assert!(names_any(
            "Claude Sonnet (thinking)",
            "claude-4-sonnet-thinking",
            ["Claude Sonnet (thinking)"]
        ));
    }

    #[test]
    fn the_catalog_maps_an_id_to_its_display_labels() {
        let catalog = json!({"families": [
            {"slug": "swe-2", "variants": [
                {"model_uid": "swe-2", "label": "SWE-2"},
                {"model_uid": "swe-2-high", "label": "SWE-2 High"}]},
            {"slug": "glm", "variants": [{"model_uid": "glm-5.2", "label": "GLM 5.2"}]}
        ]});
        assert_eq!(catalog_labels(&catalog, "swe-2-high"), ["SWE-2 High"]);
        assert_eq!(catalog_labels(&catalog, "glm-5-2"), ["GLM 5.2"]);
        assert!(catalog_labels(&catalog, "kimi").is_empty());
        assert!(catalog_labels(&json!("not a catalog"), "swe-2").is_empty());
    }
}
