//! The Devin model catalog (`devin models list --format json`, cached for an hour) and the
//! resolution of `--model` / `--effort` against it and against a session's config options.
//!
//! Name resolution itself runs in the model-alias transform component (the same code the
//! summarizer uses); only that component is loaded, and only when `--model` is given, so a
//! companion call without a model pays nothing for the wasm engine.

use devin_bridge_policy::ModePolicy;
use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_client_protocol_schema::v1;

use super::preflight::{probe, ProbeError};
use crate::policy::CompanionPolicy;
use devin_bridge_agent::devin::options::{
    choose_effort, choose_model, EffortChoice, ModelChoice, Select,
};
use devin_bridge_engine::{Component, EngineError, ResolvedModel, TransformCalls, TransformKind};

/// Largest catalog accepted from the CLI.
const MAX_CATALOG_BYTES: usize = 4 << 20;

/// Why the catalog or a model could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ModelsError {
    /// The request itself is wrong (`input`).
    #[error("{0}")]
    Input(String),
    /// The CLI or account cannot serve it (`setup`).
    #[error("{0}")]
    Setup(String),
    #[error("model resolution is unavailable: {0}")]
    Engine(#[from] EngineError),
    #[error("cannot write the model catalog cache {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Names that select a routing pairing rather than one model; the companion runs one model.
pub(crate) fn is_routing_name(name: &str) -> bool {
    let lower = name.trim().to_ascii_lowercase();
    lower == "adaptive" || lower.starts_with("fusion-") || lower == "fusion"
}

/// Where the catalog is cached.
pub(crate) fn cache_path(data_dir: &Path) -> PathBuf {
    data_dir.join("models.json")
}

/// The catalog text: the cache when it is younger than `ttl` (and `refresh` is off), else a
/// fresh `devin models list --format json`, which is then cached.
pub(crate) async fn catalog(
    data_dir: &Path,
    devin: &Path,
    env: Vec<(OsString, OsString)>,
    cwd: &Path,
    timeout: Duration,
    ttl: Duration,
    refresh: bool,
) -> Result<String, ModelsError> {
    let cache = cache_path(data_dir);
    if !refresh {
        if let Ok(meta) = std::fs::metadata(&cache) {
            let fresh = meta
                .modified()
                .ok()
                .and_then(|modified| modified.elapsed().ok())
                .is_some_and(|age| age < ttl);
            if fresh {
                if let Ok(text) = std::fs::read_to_string(&cache) {
                    if valid_catalog(&text) {
                        return Ok(text);
                    }
                }
            }
        }
    }
    let text = list_models(devin, env, cwd, timeout).await?;
    write_cache(&cache, &text)?;
    Ok(text)
}

fn valid_catalog(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .is_some_and(|value| value.get("families").is_some_and(|f| f.is_array()))
}

async fn list_models(
    devin: &Path,
    env: Vec<(OsString, OsString)>,
    cwd: &Path,
    timeout: Duration,
) -> Result<String, ModelsError> {
    let output = match probe(
        devin,
        &["models", "list", "--format", "json"],
        env,
        cwd,
        timeout,
    )
    .await
    {
        Err(ProbeError::TimedOut) => {
            return Err(ModelsError::Setup(format!(
                "`devin models list` did not answer within {} ms",
                timeout.as_millis()
            )))
        }
        Err(ProbeError::Io(error)) => {
            return Err(ModelsError::Setup(format!(
                "cannot run `devin models list`: {error}"
            )))
        }
        Ok(output) => output,
    };
    if !output.status.success() || output.stdout.len() > MAX_CATALOG_BYTES {
        return Err(ModelsError::Setup(
            "`devin models list --format json` failed".into(),
        ));
    }
    let text = String::from_utf8(output.stdout)
        .map_err(|_| ModelsError::Setup("the model catalog is not UTF-8".into()))?;
    if !valid_catalog(&text) {
        return Err(ModelsError::Setup(
            "the model catalog has no `families` list".into(),
        ));
    }
    Ok(text)
}

fn write_cache(path: &Path, text: &str) -> Result<(), ModelsError> {
    use std::io::Write;
    let io = |source| ModelsError::Io {
        path: path.to_owned(),
        source,
    };
    let temp = path.with_extension(format!("json.tmp-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&temp, path).map_err(io)
}

/// Loads one transform component of `policy` (from the compile cache when it is warm).
pub(crate) fn load_component(
    policy: &CompanionPolicy,
    kind: TransformKind,
) -> Result<Component, EngineError> {
    let config = policy.engine_config();
    devin_bridge_engine::load_one(config.location(kind), policy.limits, kind)
}

/// Resolves `--model` against the catalog with the model-alias component. Unknown names and
/// routing pairings are `input`.
pub(crate) fn resolve(
    policy: &CompanionPolicy,
    requested: &str,
    catalog: &str,
) -> Result<ResolvedModel, ModelsError> {
    if is_routing_name(requested) {
        return Err(ModelsError::Input(format!(
            "--model {requested} selects a routing pairing; the companion runs one model"
        )));
    }
    let component = load_component(policy, TransformKind::ModelAlias)?;
    match component.resolve_model(requested.to_owned(), catalog.to_owned())? {
        Ok(resolved) => Ok(resolved),
        Err(failure) if failure.code == "invalid_catalog" => Err(ModelsError::Setup(format!(
            "the model catalog is invalid: {}",
            failure.message
        ))),
        Err(failure) => Err(ModelsError::Input(failure.message)),
    }
}

/// The session's current model value (the account's default model when no `--model` was
/// given, or a resumed session's own).
pub(crate) fn session_current_model(options: &[v1::SessionConfigOption]) -> Option<String> {
    Select::model(options)?.current
}

/// The session's model for a resolved catalog entry: the offered value, and the model
/// option's id when the value must be set (`None`: it is already the current one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionModel {
    pub value: String,
    pub set: Option<String>,
}

/// Matches a resolved catalog entry (its ACP id, else its variant uid) against the session's
/// model option. A model the session does not offer (the catalog lists some, `adaptive`
/// among them, that ACP refuses) is `input` naming the offered ones; a session without a
/// model option is `setup`.
pub(crate) fn session_model(
    options: &[v1::SessionConfigOption],
    resolved: &ResolvedModel,
) -> Result<SessionModel, ModelsError> {
    let mut choice = choose_model(options, &resolved.acp_id);
    if matches!(choice, ModelChoice::NotOffered { .. }) {
        choice = choose_model(options, &resolved.model_uid);
    }
    match choice {
        ModelChoice::Current { value, .. } => Ok(SessionModel { value, set: None }),
        ModelChoice::Set {
            config_id, value, ..
        } => Ok(SessionModel {
            value,
            set: Some(config_id),
        }),
        ModelChoice::NoOption => Err(ModelsError::Setup(
            "the Devin session offers no model choice".into(),
        )),
        ModelChoice::NotOffered { offered } => Err(ModelsError::Input(format!(
            "model {} ({}) is not offered by this account's Devin sessions; they offer: {}",
            resolved.family,
            resolved.model_uid,
            list(&offered)
        ))),
    }
}

/// How `--effort` is applied to a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionEffort {
    /// The option to set and its value: the thought-level option, or the model option when
    /// the effort is a variant of the model (`swe-2` + `high` is the model `swe-2-high`).
    pub config_id: String,
    pub value: String,
    /// Whether `value` is a model (a variant) rather than a thought level.
    pub variant: bool,
}

/// `--effort` for a session whose model is `model`: `None` for `default` (the model's own
/// level); else the session's thought-level option when it has one, else the model's variant
/// with that suffix. Anything neither offers is `input` naming what the model offers.
pub(crate) fn session_effort(
    options: &[v1::SessionConfigOption],
    model: &str,
    effort: &str,
) -> Result<Option<SessionEffort>, ModelsError> {
    if effort == "default" {
        return Ok(None);
    }
    if is_routing_name(effort) {
        return Err(ModelsError::Input(format!(
            "--effort {effort} is not an effort level"
        )));
    }
    match choose_effort(options, model, effort) {
        EffortChoice::ThoughtLevel { config_id, value } => Ok(Some(SessionEffort {
            config_id,
            value,
            variant: false,
        })),
        EffortChoice::Variant { config_id, value } => Ok(Some(SessionEffort {
            config_id,
            value,
            variant: true,
        })),
        EffortChoice::Unavailable { offered } if offered.is_empty() => Err(ModelsError::Input(
            format!("--effort {effort}: model {model} has no effort levels (use default)"),
        )),
        EffortChoice::Unavailable { offered } => Err(ModelsError::Input(format!(
            "--effort {effort} is not offered by model {model} (offered: default, {})",
            list(&offered)
        ))),
    }
}

/// The speed option set to `standard`, only when the session offers a speed option with that
/// value and it is not already current. Current Devin sessions have none (speed is part of
/// the model value, `-fast`), so this usually does nothing.
pub(crate) fn session_speed_standard(
    options: &[v1::SessionConfigOption],
) -> Option<(String, String)> {
    let select = Select::of_category(options, "speed")?;
    let (value, _) = select.find("standard")?;
    if select.current.as_deref() == Some(value.as_str()) {
        return None;
    }
    Some((select.config_id.clone(), value.clone()))
}

/// At most a few dozen values, joined for a message.
fn list(values: &[String]) -> String {
    const SHOWN: usize = 40;
    let mut text = values
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if values.len() > SHOWN {
        text.push_str(&format!(" and {} more", values.len() - SHOWN));
    }
    if text.is_empty() {
        text.push_str("none");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Vec<v1::SessionConfigOption> {
        serde_json::from_value(serde_json::json!([
            {"id":"model","name":"Model","category":"model","type":"select","currentValue":"swe-2",
             "options":[{"value":"swe-2","name":"SWE-2"},{"value":"glm-5-2","name":"GLM 5.2"}]},
            {"id":"thought_level","name":"Effort","category":"thought_level","type":"select",
             "currentValue":"medium","options":[{"value":"low","name":"Low"},{"value":"high","name":"High"}]},
            {"id":"speed","name":"Speed","category":"speed","type":"select","currentValue":"fast",
             "options":[{"value":"standard","name":"Standard"},{"value":"fast","name":"Fast"}]}
        ]))
        .expect("options")
    }

    #[test]
    fn routing_pairings_are_refused_by_name() {
        assert!(is_routing_name("adaptive"));
        assert!(is_routing_name("fusion-swe"));
        assert!(!is_routing_name("swe-2"));
    }

    fn resolved(uid: &str, acp_id: &str) -> ResolvedModel {
        ResolvedModel {
            family: uid.into(),
            model_uid: uid.into(),
            label: uid.to_uppercase(),
            acp_id: acp_id.into(),
        }
    }

    /// What current Devin sessions offer: a model option whose values carry the effort and
    /// speed variants, and no thought-level or speed option.
    fn devin_options() -> Vec<v1::SessionConfigOption> {
        serde_json::from_value(serde_json::json!([
            {"id":"model","name":"Model","category":"model","type":"select","currentValue":"swe-2",
             "options":[{"value":"swe-2","name":"SWE-2"},{"value":"swe-2-high","name":"SWE-2 High"},
                        {"value":"swe-2-fast","name":"SWE-2 Fast"},{"value":"glm-5-2","name":"GLM 5.2"}]}
        ]))
        .expect("options")
    }

    #[test]
    fn catalog_ids_match_session_values_after_normalising() {
        assert_eq!(
            session_model(&options(), &resolved("glm-5.2", "glm-5-2")).expect("offered"),
            SessionModel {
                value: "glm-5-2".into(),
                set: Some("model".into())
            }
        );
        // The variant uid decides when the ACP id is not offered.
        assert_eq!(
            session_model(&options(), &resolved("glm_5.2", "glm-5-2-x")).expect("offered"),
            SessionModel {
                value: "glm-5-2".into(),
                set: Some("model".into())
            }
        );
        assert_eq!(
            session_model(&options(), &resolved("swe-2", "swe-2")).expect("current"),
            SessionModel {
                value: "swe-2".into(),
                set: None
            }
        );
    }

    #[test]
    fn a_model_the_session_does_not_offer_is_input_naming_the_offered_ones() {
        match session_model(&options(), &resolved("adaptive", "adaptive")) {
            Err(ModelsError::Input(message)) => {
                assert!(message.contains("adaptive"), "{message}");
                assert!(message.contains("swe-2, glm-5-2"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            session_model(&options()[1..], &resolved("swe-2", "swe-2")),
            Err(ModelsError::Setup(_))
        ));
    }

    #[test]
    fn effort_is_a_thought_level_when_offered() {
        assert_eq!(
            session_effort(&options(), "swe-2", "default").expect("default"),
            None
        );
        assert_eq!(
            session_effort(&options(), "swe-2", "high").expect("high"),
            Some(SessionEffort {
                config_id: "thought_level".into(),
                value: "high".into(),
                variant: false
            })
        );
        match session_effort(&options(), "swe-2", "medium") {
            Err(ModelsError::Input(message)) => {
                assert!(message.contains("offered: default, low, high"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            session_effort(&options(), "swe-2", "adaptive"),
            Err(ModelsError::Input(_))
        ));
    }

    #[test]
    fn effort_is_a_model_variant_when_there_is_no_thought_level() {
        assert_eq!(
            session_effort(&devin_options(), "swe-2", "high").expect("variant"),
            Some(SessionEffort {
                config_id: "model".into(),
                value: "swe-2-high".into(),
                variant: true
            })
        );
        match session_effort(&devin_options(), "swe-2", "low") {
            Err(ModelsError::Input(message)) => {
                assert!(message.contains("model swe-2"), "{message}");
                assert!(
                    message.contains("offered: default, high, fast"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        match session_effort(&devin_options(), "glm-5-2", "high") {
            Err(ModelsError::Input(message)) => {
                assert!(message.contains("has no effort levels"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn speed_is_set_only_when_a_speed_option_offers_standard() {
        assert_eq!(session_current_model(&options()).as_deref(), Some("swe-2"));
        assert_eq!(
            session_speed_standard(&options()),
            Some(("speed".into(), "standard".into()))
        );
        assert_eq!(session_speed_standard(&devin_options()), None);
    }
}
