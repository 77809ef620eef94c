//! The session's config options: which model answers, and at what effort.
//!
//! `session/new` (and `session/load`) answer `configOptions`; the model is the select whose
//! `category` is `model` (`{id, type: "select", currentValue, options: [{value, name}]}`, the
//! options possibly grouped). It is set with `session/set_config_option {sessionId, configId,
//! value}`; `session/set_model` is never called (the real CLI does not answer it). A session
//! without a model option (the real CLI's `summarizer` agent type offers only `mode`) runs the
//! model of the process's `--model M`, which the CLI takes before its subcommand (`devin
//! --model M acp`) and, since 3000.3.22, after it (`devin acp --model M`, "the default model
//! for every session"); the bridge writes it before the subcommand, which every version takes,
//! and reads it in either place. Whether such a session obeys `--model` is not recorded: the
//! model that answered is checked against its label ([`super::stats`]).
//!
//! Effort is a `thought_level` select when the session has one; the recorded CLIs have none
//! and express effort as a model variant instead (`swe-2-high`, `swe-2-fast`). Both are read
//! here. Values compare without case, with `.` and `_` taken as `-` (catalog uids use them,
//! ACP values do not).

use agent_client_protocol_schema::v1;
use serde_json::Value;

/// Longest id, value or name kept from the agent (characters).
const MAX_NAME_CHARS: usize = 200;
/// Most values kept from one select.
const MAX_VALUES: usize = 256;

/// One select config option, read leniently and bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Select {
    /// The option's `id` (the `configId` to set it with).
    pub config_id: String,
    pub current: Option<String>,
    /// `(value, name)` in the agent's order.
    pub values: Vec<(String, String)>,
}

impl Select {
    /// The select of `category` among `options`, if there is one.
    pub fn of_category(options: &[v1::SessionConfigOption], category: &str) -> Option<Self> {
        options.iter().find_map(|option| {
            let value = serde_json::to_value(option).ok()?;
            if value.get("category").and_then(Value::as_str) != Some(category) {
                return None;
            }
            let config_id = bounded(value.get("id").and_then(Value::as_str)?);
            let current = value
                .get("currentValue")
                .and_then(Value::as_str)
                .map(bounded);
            let mut values = Vec::new();
            collect_values(value.get("options"), &mut values, 0);
            Some(Select {
                config_id,
                current,
                values,
            })
        })
    }

    /// The session's model select.
    pub fn model(options: &[v1::SessionConfigOption]) -> Option<Self> {
        Self::of_category(options, "model")
    }

    /// The session's effort select, when it has one.
    pub fn thought_level(options: &[v1::SessionConfigOption]) -> Option<Self> {
        Self::of_category(options, "thought_level")
    }

    /// The offered value that means `wanted`, compared as ids.
    pub fn find(&self, wanted: &str) -> Option<&(String, String)> {
        let wanted = normalize_id(wanted);
        self.values
            .iter()
            .find(|(value, _)| normalize_id(value) == wanted)
    }

    /// The display name of `value`, when offered.
    pub fn name_of(&self, value: &str) -> Option<&str> {
        self.find(value).map(|(_, name)| name.as_str())
    }

    /// The offered values, for messages.
    pub fn offered(&self) -> Vec<&str> {
        self.values
            .iter()
            .map(|(value, _)| value.as_str())
            .collect()
    }
}

/// Flat or grouped select options: `[{value, name}]` or `[{group, options: [...]}]`.
fn collect_values(options: Option<&Value>, out: &mut Vec<(String, String)>, depth: u8) {
    let Some(list) = options.and_then(Value::as_array) else {
        return;
    };
    for entry in list {
        if out.len() >= MAX_VALUES {
            return;
        }
        if let Some(value) = entry.get("value").and_then(Value::as_str) {
            if value.is_empty() {
                continue;
            }
            let name = entry.get("name").and_then(Value::as_str).unwrap_or(value);
            out.push((bounded(value), bounded(name)));
        } else if depth == 0 {
            collect_values(entry.get("options"), out, 1);
        }
    }
}

/// What to do to have `wanted` answer in a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// It is the session's model already; `name` is its display name.
    Current { value: String, name: String },
    /// `session/set_config_option {configId, value}`; `name` is the value's display name.
    Set {
        config_id: String,
        value: String,
        name: String,
    },
    /// The session has no model option: only `--model` on the agent's command line picks it.
    NoOption,
    /// The session offers other models only.
    NotOffered { offered: Vec<String> },
}

/// How to make `wanted` (an ACP model id) the session's model.
pub fn choose_model(options: &[v1::SessionConfigOption], wanted: &str) -> ModelChoice {
    let Some(select) = Select::model(options) else {
        return ModelChoice::NoOption;
    };
    let Some((value, name)) = select.find(wanted) else {
        return ModelChoice::NotOffered {
            offered: select.offered().into_iter().map(str::to_owned).collect(),
        };
    };
    if select
        .current
        .as_deref()
        .is_some_and(|current| normalize_id(current) == normalize_id(value))
    {
        ModelChoice::Current {
            value: value.clone(),
            name: name.clone(),
        }
    } else {
        ModelChoice::Set {
            config_id: select.config_id.clone(),
            value: value.clone(),
            name: name.clone(),
        }
    }
}

/// The effort levels the summarizer applies: Claude Code's `/effort` values. Another value is
/// not an effort level (a variant suffix such as `fast` or `lightning` is a routing choice).
pub const EFFORT_LEVELS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

/// Whether `effort` is one of [`EFFORT_LEVELS`] (compared as ids).
pub fn is_effort_level(effort: &str) -> bool {
    let effort = normalize_id(effort);
    EFFORT_LEVELS.contains(&effort.as_str())
}

/// How an effort level reaches the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EffortChoice {
    /// The session's `thought_level` select takes it.
    ThoughtLevel { config_id: String, value: String },
    /// The model has a variant for it (`swe-2` at `high` is `swe-2-high`): set the model.
    Variant { config_id: String, value: String },
    /// Neither: what the model offers instead (thought levels, or its effort variants).
    Unavailable { offered: Vec<String> },
}

/// How to run `model` (the session's model value) at `effort` (`low`, `high`, ...).
pub fn choose_effort(
    options: &[v1::SessionConfigOption],
    model: &str,
    effort: &str,
) -> EffortChoice {
    if let Some(select) = Select::thought_level(options) {
        if let Some((value, _)) = select.find(effort) {
            return EffortChoice::ThoughtLevel {
                config_id: select.config_id.clone(),
                value: value.clone(),
            };
        }
    } else if let Some(models) = Select::model(options) {
        let wanted = format!("{}-{}", normalize_id(model), normalize_id(effort));
        if let Some((value, _)) = models.find(&wanted) {
            return EffortChoice::Variant {
                config_id: models.config_id.clone(),
                value: value.clone(),
            };
        }
    }
    EffortChoice::Unavailable {
        offered: offered_efforts(options, model),
    }
}

/// The efforts `model` (the session's model value) can run at: the session's thought levels
/// when it has that option, else the suffixes of the model's variants (`high` of
/// `swe-2-high`), else none.
pub fn offered_efforts(options: &[v1::SessionConfigOption], model: &str) -> Vec<String> {
    if let Some(select) = Select::thought_level(options) {
        return select.offered().into_iter().map(str::to_owned).collect();
    }
    let Some(models) = Select::model(options) else {
        return Vec::new();
    };
    let prefix = format!("{}-", normalize_id(model));
    models
        .values
        .iter()
        .filter_map(|(value, _)| normalize_id(value).strip_prefix(&prefix).map(str::to_owned))
        .collect()
}

/// The agent's argv with `--model <model>` in front of its subcommand (`devin --model M acp
/// ...`): how a CLI whose sessions have no model option is told which model to run. An
/// earlier `--model` is replaced.
pub fn with_model_flag(args: &[String], model: &str) -> Vec<String> {
    let mut out = vec!["--model".to_owned(), model.to_owned()];
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--model" {
            rest.next();
        } else if !arg.starts_with("--model=") {
            out.push(arg.clone());
        }
    }
    out
}

/// Whether sessions of the agent this argv starts can offer a model option. The CLI's
/// `summarizer` agent type offers only `mode`: its model comes from `--model` on the command
/// line alone, so the host knows before any session that a model goes there. Any other agent
/// type is asked (its `session/new` answer says).
pub fn agent_type_offers_model_option(args: &[String]) -> bool {
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let agent_type = if arg == "--agent-type" {
            rest.next().map(String::as_str)
        } else {
            arg.strip_prefix("--agent-type=")
        };
        if agent_type == Some("summarizer") {
            return false;
        }
    }
    true
}

/// The argv with its `--agent-type` removed: the CLI's full agent, whose sessions list the
/// account's models in their model option (the `summarizer` agent type's sessions list none,
/// so a catalog is read from the full agent of the same CLI, home and login).
pub fn without_agent_type(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--agent-type" {
            rest.next();
        } else if !arg.starts_with("--agent-type=") {
            out.push(arg.clone());
        }
    }
    out
}

/// The model a `--model` on the agent's command line selects, before its subcommand or after
/// it (both select the sessions' default model), if any. The last one given wins.
pub fn launched_model(args: &[String]) -> Option<String> {
    let mut found = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--model" {
            found = rest.next().cloned().or(found);
        } else if let Some(model) = arg.strip_prefix("--model=") {
            found = Some(model.to_owned());
        }
    }
    found.filter(|model| !model.is_empty())
}

/// ACP ids use `-` where catalog uids use `.` or `_`; ids compare without case.
pub fn normalize_id(id: &str) -> String {
    id.chars()
        .map(|c| if c == '.' || c == '_' { '-' } else { c })
        .collect::<String>()
        .to_ascii_lowercase()
}

fn bounded(text: &str) -> String {
    text.chars().take(MAX_NAME_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn options(value: Value) -> Vec<v1::SessionConfigOption> {
        serde_json::from_value(value).expect("config options")
    }

    fn devin_options(current: &str) -> Vec<v1::SessionConfigOption> {
        options(json!([
            {"id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "smart",
             "options": [{"value": "smart", "name": "Smart"}]},
            {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": current,
             "options": [{"value": "swe-2", "name": "SWE-2"}, {"value": "swe-2-high", "name": "SWE-2 High"},
                         {"value": "swe-2-fast", "name": "SWE-2 Fast"}, {"value": "glm-5-2", "name": "GLM 5.2"}]}
        ]))
    }

    #[test]
    fn the_model_select_is_found_by_category_and_read_whole() {
        let select = Select::model(&devin_options("swe-2")).expect("model select");
        assert_eq!(select.config_id, "model");
        assert_eq!(select.current.as_deref(), Some("swe-2"));
        assert_eq!(
            select.offered(),
            ["swe-2", "swe-2-high", "swe-2-fast", "glm-5-2"]
        );
        assert_eq!(select.name_of("glm-5.2"), Some("GLM 5.2"));
        assert!(Select::thought_level(&devin_options("swe-2")).is_none());
    }

    #[test]
    fn grouped_values_are_read() {
        let grouped = options(json!([
            {"id": "m", "name": "Model", "category": "model", "type": "select", "currentValue": "a",
             "options": [{"group": "g1", "name": "G1", "options": [{"value": "a", "name": "A"}]},
                         {"group": "g2", "name": "G2", "options": [{"value": "b", "name": "B"}]}]}
        ]));
        assert_eq!(
            Select::model(&grouped).expect("select").offered(),
            ["a", "b"]
        );
    }

    #[test]
    fn a_model_is_set_only_when_it_is_not_current() {
        assert_eq!(
            choose_model(&devin_options("swe-2"), "swe-2"),
            ModelChoice::Current {
                value: "swe-2".into(),
                name: "SWE-2".into()
            }
        );
        assert_eq!(
            choose_model(&devin_options("swe-2"), "glm-5.2"),
            ModelChoice::Set {
                config_id: "model".into(),
                value: "glm-5-2".into(),
                name: "GLM 5.2".into()
            }
        );
        assert_eq!(
            choose_model(&devin_options("swe-2"), "adaptive"),
            ModelChoice::NotOffered {
                offered: vec![
                    "swe-2".into(),
                    "swe-2-high".into(),
                    "swe-2-fast".into(),
                    "glm-5-2".into()
                ]
            }
        );
        assert_eq!(choose_model(&[], "swe-2"), ModelChoice::NoOption);
        let argv = |line: &str| line.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert!(!agent_type_offers_model_option(&argv(
            "acp --agent-type summarizer"
        )));
        assert!(!agent_type_offers_model_option(&argv(
            "--model m acp --agent-type=summarizer"
        )));
        assert!(agent_type_offers_model_option(&argv("acp")));
        assert!(agent_type_offers_model_option(&argv(
            "acp --agent-type full"
        )));
    }

    #[test]
    fn the_model_flag_goes_before_the_subcommand() {
        let args: Vec<String> = ["acp", "--agent-type", "summarizer"]
            .map(String::from)
            .to_vec();
        let flagged = with_model_flag(&args, "swe-1-6");
        assert_eq!(
            flagged,
            ["--model", "swe-1-6", "acp", "--agent-type", "summarizer"]
        );
        assert_eq!(launched_model(&flagged).as_deref(), Some("swe-1-6"));
        assert_eq!(
            with_model_flag(&flagged, "swe-2"),
            ["--model", "swe-2", "acp", "--agent-type", "summarizer"]
        );
        assert_eq!(launched_model(&args), None);
        let joined: Vec<String> = ["--model=m", "acp"].map(String::from).to_vec();
        assert_eq!(launched_model(&joined).as_deref(), Some("m"));
    }

    #[test]
    fn a_model_after_the_subcommand_is_read_and_replaced_in_front_of_it() {
        // `devin acp --model M` sets the default model of every session (since 3000.3.22).
        let after: Vec<String> = [
            "acp",
            "--agent-type",
            "summarizer",
            "--model",
            "swe-1-6-slow",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(launched_model(&after).as_deref(), Some("swe-1-6-slow"));
        let joined: Vec<String> = ["acp", "--model=swe-2"].map(String::from).to_vec();
        assert_eq!(launched_model(&joined).as_deref(), Some("swe-2"));
        // The bridge's own flag replaces it, in front of the subcommand.
        let flagged = with_model_flag(&after, "glm-5-2");
        assert_eq!(
            flagged,
            ["--model", "glm-5-2", "acp", "--agent-type", "summarizer"]
        );
        assert_eq!(launched_model(&flagged).as_deref(), Some("glm-5-2"));
        let dangling: Vec<String> = ["acp", "--model"].map(String::from).to_vec();
        assert_eq!(launched_model(&dangling), None);
    }

    #[test]
    fn effort_is_a_thought_level_when_offered_else_a_model_variant() {
        assert_eq!(
            choose_effort(&devin_options("swe-2"), "swe-2", "high"),
            EffortChoice::Variant {
                config_id: "model".into(),
                value: "swe-2-high".into()
            }
        );
        assert_eq!(
            choose_effort(&devin_options("swe-2"), "swe-2", "low"),
            EffortChoice::Unavailable {
                offered: vec!["high".into(), "fast".into()]
            }
        );
        let mut with_levels = devin_options("swe-2");
        with_levels.extend(options(json!([
            {"id": "thought_level", "name": "Effort", "category": "thought_level", "type": "select",
             "currentValue": "medium", "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}]}
        ])));
        assert_eq!(
            choose_effort(&with_levels, "swe-2", "HIGH"),
            EffortChoice::ThoughtLevel {
                config_id: "thought_level".into(),
                value: "high".into()
            }
        );
        assert_eq!(
            choose_effort(&with_levels, "swe-2", "max"),
            EffortChoice::Unavailable {
                offered: vec!["low".into(), "high".into()]
            }
        );
        assert_eq!(
            choose_effort(&[], "swe-2", "high"),
            EffortChoice::Unavailable { offered: vec![] }
        );
        assert_eq!(offered_efforts(&with_levels, "swe-2"), ["low", "high"]);
        assert_eq!(
            offered_efforts(&devin_options("swe-2"), "swe-2"),
            ["high", "fast"]
        );
        assert!(offered_efforts(&devin_options("swe-2"), "glm-5-2").is_empty());
    }

    #[test]
    fn only_claude_codes_levels_are_effort_levels() {
        for level in ["low", "medium", "high", "xhigh", "max", "HIGH"] {
            assert!(is_effort_level(level), "{level}");
        }
        for other in ["fast", "lightning", "turbo", "", "default", "high-ish"] {
            assert!(!is_effort_level(other), "{other}");
        }
    }
}
