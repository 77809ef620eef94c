//! One session's state and its config options, for both agents: the record (stored when
//! sessions persist), the permission rules read when it started, and what its last turn was
//! decided on.

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};

use crate::full::catalog::NO_THOUGHT_LEVEL_MODEL;
use crate::full::permissions::Permissions;
use crate::full::store::{Entry, Record, Role};
use crate::profile::Profile;
use crate::rpc::INVALID_PARAMS;
use crate::wire::{self, pairs, select, Refusal, MODES};

pub(crate) const THOUGHT_LEVELS: [(&str, &str); 3] =
    [("low", "Low"), ("medium", "Medium"), ("high", "High")];
pub(crate) const DEFAULT_THOUGHT_LEVEL: &str = "medium";

pub(crate) struct Session {
    pub record: Record,
    /// The `config.json` rules when the session started or was loaded (empty when the agent
    /// reads no config file).
    pub permissions: Permissions,
    /// What the session's last turn was decided on: the bridge dialect continues this trace.
    pub context: Option<String>,
}

pub(crate) type SessionRef = Arc<Mutex<Session>>;

impl Session {
    pub(crate) fn new(record: Record, permissions: Permissions) -> SessionRef {
        Arc::new(Mutex::new(Self {
            record,
            permissions,
            context: None,
        }))
    }
}

/// Locks a session; a panicked turn leaves the record usable.
pub(crate) fn lock(session: &SessionRef) -> MutexGuard<'_, Session> {
    session
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The session's config options: the mode, the model (unless turned off) and, when turned on,
/// `thought_level` (not offered for GLM-5.2).
pub(crate) fn config_options(record: &Record, profile: &Profile) -> Value {
    let mut options = vec![wire::mode_option(&record.mode)];
    if profile.model_option {
        options.push(wire::model_option(
            &record.model,
            profile
                .models
                .iter()
                .map(|(id, label)| (id.as_str(), *label)),
        ));
    }
    if offers_thought_level(record, profile) {
        options.push(select(
            "thought_level",
            "Thought level",
            "thought_level",
            &record.thought_level,
            pairs(&THOUGHT_LEVELS),
        ));
    }
    Value::Array(options)
}

/// Whether the session offers the `thought_level` option now: when turned on, under every
/// model but GLM-5.2.
pub(crate) fn offers_thought_level(record: &Record, profile: &Profile) -> bool {
    profile.thought_level && record.model != NO_THOUGHT_LEVEL_MODEL
}

/// Sets one config option of `record`. An unknown model is the CLI's "Resource not found"
/// error; anything else refused is -32602.
pub(crate) fn set_option(
    record: &mut Record,
    profile: &Profile,
    id: &str,
    value: &str,
) -> Result<(), Refusal> {
    if id == "model" && profile.model_option && !profile.offers(value) {
        return Err(wire::model_not_found(
            value,
            profile.models.iter().map(|(id, _)| id.as_str()),
        ));
    }
    set_known_option(record, profile, id, value).map_err(|message| (INVALID_PARAMS, message, None))
}

/// Sets an option whose value is checked here; the error is the message of a -32602 answer.
fn set_known_option(
    record: &mut Record,
    profile: &Profile,
    id: &str,
    value: &str,
) -> Result<(), String> {
    let known = |values: &[(&str, &str)]| values.iter().any(|(v, _)| *v == value);
    let thought_level = profile.thought_level;
    match id {
        "mode" if profile.fixed_mode => {
            return Err("Invalid params: the summarizer agent's mode cannot be changed".to_owned())
        }
        "mode" if known(&MODES) => record.mode = value.to_owned(),
        "model" if profile.model_option => record.model = value.to_owned(),
        "thought_level" if thought_level && record.model == NO_THOUGHT_LEVEL_MODEL => {
            return Err(format!(
                "Invalid params: config option `thought_level` is not offered for model \
                 {NO_THOUGHT_LEVEL_MODEL}"
            ))
        }
        "thought_level" if thought_level && known(&THOUGHT_LEVELS) => {
            record.thought_level = value.to_owned();
        }
        "mode" | "thought_level" if id == "mode" || thought_level => {
            return Err(format!(
                "Invalid params: {value:?} is not a value of config option `{id}`"
            ))
        }
        _ => return Err(format!("Invalid params: unknown config option {id:?}")),
    }
    Ok(())
}

/// The history as `user_message_chunk` / `agent_message_chunk` notifications.
pub(crate) fn replay(record: &Record) -> Vec<Value> {
    record
        .history
        .iter()
        .map(|entry| {
            let kind = match entry.role {
                Role::User => "user_message_chunk",
                Role::Agent => "agent_message_chunk",
            };
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": record.session_id,
                "update": {"sessionUpdate": kind, "content": {"type": "text", "text": entry.text}},
            }})
        })
        .collect()
}

/// Appends one turn to the record.
pub(crate) fn record_turn(record: &mut Record, prompt: &str, reply: &str) {
    record.history.push(Entry {
        role: Role::User,
        text: prompt.to_owned(),
    });
    record.history.push(Entry {
        role: Role::Agent,
        text: reply.to_owned(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::full::catalog;
    use crate::profile::AgentType;

    fn record() -> Record {
        Record {
            session_id: "mock-1".into(),
            cwd: "/w".into(),
            mode: wire::DEFAULT_MODE.into(),
            model: catalog::DEFAULT_MODEL.into(),
            thought_level: DEFAULT_THOUGHT_LEVEL.into(),
            history: Vec::new(),
        }
    }

    fn profile(model_option: bool, thought_level: bool) -> Profile {
        let mut profile = Profile::new(AgentType::Full, None).expect("profile");
        profile.model_option = model_option;
        profile.thought_level = thought_level;
        profile
    }

    fn categories(options: &Value) -> Vec<&str> {
        options
            .as_array()
            .expect("options")
            .iter()
            .filter_map(|o| o["category"].as_str())
            .collect()
    }

    #[test]
    fn config_options_are_the_mode_and_the_model_by_default() {
        let mut record = record();
        let plain = profile(true, false);
        let options = config_options(&record, &plain);
        assert_eq!(categories(&options), ["mode", "model"]);
        assert_eq!(options[0]["currentValue"], "accept-edits");
        assert_eq!(options[1]["currentValue"], "swe-2");
        assert_eq!(options[1]["id"], "model");
        let models: Vec<&str> = options[1]["options"]
            .as_array()
            .expect("models")
            .iter()
            .filter_map(|o| o["value"].as_str())
            .collect();
        assert_eq!(
            models,
            [
                "swe-2",
                "swe-2-fast",
                "swe-2-high",
                "kimi-k3",
                "glm-5-2",
                "muse-wonder"
            ]
        );
        // Without the thought-level switch there is no such option to set.
        assert!(set_option(&mut record, &plain, "thought_level", "high")
            .unwrap_err()
            .1
            .contains("unknown config option"));
        assert!(set_option(&mut record, &plain, "speed", "fast").is_err());
        // Without the model option only --model picks the model.
        let none = profile(false, false);
        assert_eq!(categories(&config_options(&record, &none)), ["mode"]);
        assert!(set_option(&mut record, &none, "model", "kimi-k3").is_err());
    }

    #[test]
    fn thought_level_follows_the_model_when_switched_on() {
        let mut record = record();
        let thought = profile(true, true);
        let options = config_options(&record, &thought);
        assert_eq!(categories(&options), ["mode", "model", "thought_level"]);
        assert_eq!(options[2]["currentValue"], "medium");
        set_option(&mut record, &thought, "thought_level", "high").expect("high");
        set_option(&mut record, &thought, "model", "glm-5-2").expect("glm");
        assert_eq!(
            categories(&config_options(&record, &thought)),
            ["mode", "model"]
        );
        assert!(set_option(&mut record, &thought, "thought_level", "low")
            .unwrap_err()
            .1
            .contains("not offered"));
        set_option(&mut record, &thought, "model", "kimi-k3").expect("kimi");
        // The earlier choice comes back with the option.
        assert_eq!(config_options(&record, &thought)[2]["currentValue"], "high");
        assert_eq!(thought.label(&record.model), "Kimi K3");
    }

    #[test]
    fn unknown_options_and_values_are_refused() {
        let mut record = record();
        let plain = profile(true, false);
        for model in ["legacy-9", "adaptive", "glm-5.2"] {
            let (code, message, data) =
                set_option(&mut record, &plain, "model", model).unwrap_err();
            assert_eq!((code, message.as_str()), (-32002, "Resource not found"));
            let uri = data.expect("data")["uri"].as_str().expect("uri").to_owned();
            assert!(
                uri.starts_with(&format!(
                    "Model not found: {model}. Available models: swe-2, "
                )),
                "{uri}"
            );
        }
        assert!(set_option(&mut record, &plain, "colour", "red")
            .unwrap_err()
            .1
            .contains("unknown config option"));
        assert!(set_option(&mut record, &plain, "mode", "yolo").is_err());
        set_option(&mut record, &plain, "mode", "bypass").expect("mode");
        assert_eq!(wire::modes(&record.mode)["currentModeId"], "bypass");
        set_option(&mut record, &plain, "model", "swe-2-high").expect("effort variant");
        assert_eq!(plain.label(&record.model), "SWE-2 High");
        // A fixed mode cannot be changed at all.
        let mut fixed = profile(true, false);
        fixed.fixed_mode = true;
        assert!(set_option(&mut record, &fixed, "mode", "smart")
            .unwrap_err()
            .1
            .contains("mode cannot be changed"));
    }

    #[test]
    fn replay_follows_the_history() {
        let mut record = record();
        record_turn(&mut record, "do it", "done");
        let messages = replay(&record);
        assert_eq!(messages.len(), 2);
        assert_eq!(
            messages[0]["params"]["update"]["sessionUpdate"],
            "user_message_chunk"
        );
        assert_eq!(messages[1]["params"]["update"]["content"]["text"], "done");
        assert_eq!(record.turns(), 1);
    }
}
