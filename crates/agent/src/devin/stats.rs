//! The model that really answered a turn, as the Devin CLI reports it.
//!
//! `_cognition.ai/agent_stopped {cause, sessionId, stats: {modelLabel, responseDimensions, ...}}`
//! comes before the prompt result; `_cognition.ai/turn_stats {sessionId, turnClientMessageId,
//! turnRequestId, responseDimensions}` carries no `modelLabel`, only the `model` response
//! dimension. The dimensions' shape is not recorded: an object (`{"model": ...}`) and a list
//! of `{name|key, value}` pairs are both read.

use serde_json::Value;

/// `_cognition.ai/agent_stopped`.
pub const AGENT_STOPPED: &str = "_cognition.ai/agent_stopped";
/// `_cognition.ai/turn_stats`.
pub const TURN_STATS: &str = "_cognition.ai/turn_stats";
/// Longest label kept (characters).
pub const MAX_LABEL_CHARS: usize = 200;

/// The model an `agent_stopped` notification names: `stats.modelLabel`, else the `model`
/// response dimension of its stats.
pub fn stopped_model(params: &Value) -> Option<String> {
    let stats = params.get("stats")?;
    label(stats.get("modelLabel")).or_else(|| dimension_model(stats.get("responseDimensions")))
}

/// The model a `turn_stats` notification names (its `model` response dimension).
pub fn turn_stats_model(params: &Value) -> Option<String> {
    dimension_model(params.get("responseDimensions"))
}

/// The model an `agent_stopped` or `turn_stats` notification names, by method.
pub fn model_of(method: &str, params: &Value) -> Option<String> {
    match method {
        AGENT_STOPPED => stopped_model(params),
        TURN_STATS => turn_stats_model(params),
        _ => None,
    }
}

fn dimension_model(dimensions: Option<&Value>) -> Option<String> {
    match dimensions? {
        Value::Object(map) => label(map.get("model")),
        Value::Array(list) => list.iter().find_map(|entry| {
            let name = entry.get("name").or_else(|| entry.get("key"))?.as_str()?;
            (name == "model")
                .then(|| label(entry.get("value")))
                .flatten()
        }),
        _ => None,
    }
}

fn label(value: Option<&Value>) -> Option<String> {
    let text = value?.as_str()?.trim();
    (!text.is_empty()).then(|| text.chars().take(MAX_LABEL_CHARS).collect())
}

/// Whether `observed` (a label or an id) names the model `requested_id` (an ACP id) whose
/// display name is `requested_name`: compared without case, with spaces, `.` and `_` as `-`.
pub fn names_model(observed: &str, requested_id: &str, requested_name: Option<&str>) -> bool {
    let norm = |text: &str| super::options::normalize_id(&text.trim().replace(' ', "-"));
    let observed = norm(observed);
    observed == norm(requested_id) || requested_name.is_some_and(|name| observed == norm(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agent_stopped_names_its_model_label_first() {
        let params = json!({"cause": "complete", "sessionId": "s", "stats": {"modelLabel": "SWE-2", "responseDimensions": {"model": "other"}}});
        assert_eq!(stopped_model(&params).as_deref(), Some("SWE-2"));
        let params = json!({"stats": {"responseDimensions": {"model": "GLM 5.2"}}});
        assert_eq!(stopped_model(&params).as_deref(), Some("GLM 5.2"));
        assert_eq!(stopped_model(&json!({"stats": {}})), None);
        assert_eq!(stopped_model(&json!({"stats": {"modelLabel": 7}})), None);
    }

    #[test]
    fn turn_stats_names_its_model_dimension_in_either_shape() {
        let object = json!({"sessionId": "s", "responseDimensions": {"model": "SWE-2"}});
        assert_eq!(turn_stats_model(&object).as_deref(), Some("SWE-2"));
        let list = json!({"responseDimensions": [{"name": "tier", "value": "x"}, {"key": "model", "value": "SWE-2"}]});
        assert_eq!(turn_stats_model(&list).as_deref(), Some("SWE-2"));
        // No `modelLabel` in turn_stats: a field of that name is not read.
        assert_eq!(turn_stats_model(&json!({"modelLabel": "SWE-2"})), None);
        assert_eq!(model_of(TURN_STATS, &object).as_deref(), Some("SWE-2"));
        assert_eq!(model_of("other", &object), None);
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
    fn a_label_names_a_model_by_id_or_name() {
        assert!(names_model("SWE-1.7", "swe-1-7", Some("SWE-1.7")));
        assert!(names_model("GLM 5.2", "glm-5-2", Some("GLM 5.2")));
        assert!(names_model("glm-5-2", "glm-5-2", None));
        assert!(!names_model("SWE-1.6", "swe-1-7", Some("SWE-1.7")));
    }
}
