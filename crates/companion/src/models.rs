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
use devin_bridge_engine::{Component, EngineError, ResolvedModel, TransformCalls, TransformKind};

/// Largest catalog accepted from the CLI.
const MAX_CATALOG_BYTES: usize = 4 << 20;

/// Why the catalog or a model could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
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
pub fn is_routing_name(name: &str) -> bool {
    let lower = name.trim().to_ascii_lowercase();
    lower == "adaptive" || lower.starts_with("fusion-") || lower == "fusion"
}

/// ACP ids use `-` where the catalog uses `.` or `_`.
pub fn normalise_id(id: &str) -> String {
    id.chars()
        .map(|c| if c == '.' || c == '_' { '-' } else { c })
        .collect::<String>()
        .to_ascii_lowercase()
}

/// Where the catalog is cached.
pub fn cache_path(data_dir: &Path) -> PathBuf {
    data_dir.join("models.json")
}

/// The catalog text: the cache when it is younger than `ttl` (and `refresh` is off), else a
/// fresh `devin models list --format json`, which is then cached.
pub async fn catalog(
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
pub fn load_component(
    policy: &CompanionPolicy,
    kind: TransformKind,
) -> Result<Component, EngineError> {
    let config = policy.engine_config();
    devin_bridge_engine::load_one(config.location(kind), policy.limits, kind)
}

/// Resolves `--model` against the catalog with the model-alias component. Unknown names and
/// routing pairings are `input`.
pub fn resolve(
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

/// A select config option of a session, found by category.
pub fn option_by_category<'a>(
    options: &'a [v1::SessionConfigOption],
    category: &str,
) -> Option<&'a v1::SessionConfigOption> {
    options.iter().find(|option| {
        serde_json::to_value(option)
            .ok()
            .and_then(|value| {
                value
                    .get("category")
                    .and_then(|c| c.as_str())
                    .map(|c| c == category)
            })
            .unwrap_or(false)
    })
}

/// The id and the option values of a select config option.
pub fn option_values(option: &v1::SessionConfigOption) -> (String, Vec<(String, String)>) {
    let value = serde_json::to_value(option).unwrap_or_default();
    let id = value
        .get("id")
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned();
    let mut values = Vec::new();
    collect_values(value.get("options"), &mut values);
    (id, values)
}

/// The current value of the session's model option (the account's default model when no
/// `--model` was given).
pub fn session_current_model(options: &[v1::SessionConfigOption]) -> Option<String> {
    let option = option_by_category(options, "model")?;
    serde_json::to_value(option)
        .ok()?
        .get("currentValue")?
        .as_str()
        .map(str::to_owned)
}

/// Flat or grouped select options: `[{value, name}]` or `[{group, options:[...]}]`.
fn collect_values(options: Option<&serde_json::Value>, out: &mut Vec<(String, String)>) {
    let Some(list) = options.and_then(|o| o.as_array()) else {
        return;
    };
    for entry in list {
        if let Some(value) = entry.get("value").and_then(|v| v.as_str()) {
            let name = entry
                .get("name")
                .and_then(|v| v.as_str())
                .unwrap_or(value)
                .to_owned();
            out.push((value.to_owned(), name));
        } else {
            collect_values(entry.get("options"), out);
        }
    }
}

/// The session's model option value for a resolved catalog entry, or `setup` when the
/// account's session does not offer it.
pub fn session_model_value(
    options: &[v1::SessionConfigOption],
    resolved: &ResolvedModel,
) -> Result<(String, String), ModelsError> {
    let Some(option) = option_by_category(options, "model") else {
        return Err(ModelsError::Setup(
            "the Devin session offers no model choice".into(),
        ));
    };
    let (id, values) = option_values(option);
    let wanted = normalise_id(&resolved.acp_id);
    let wanted_uid = normalise_id(&resolved.model_uid);
    values
        .into_iter()
        .find(|(value, _)| {
            let value = normalise_id(value);
            value == wanted || value == wanted_uid
        })
        .map(|(value, _)| (id, value))
        .ok_or_else(|| {
            ModelsError::Setup(format!(
                "model {} ({}) is in the catalog but not available to this account's sessions",
                resolved.family, resolved.model_uid
            ))
        })
}

/// The session's thought-level value for `--effort`: `None` for `default` (the model's own),
/// else the exact offered value; anything not offered is `input`.
pub fn session_effort_value(
    options: &[v1::SessionConfigOption],
    effort: &str,
) -> Result<Option<(String, String)>, ModelsError> {
    if effort == "default" {
        return Ok(None);
    }
    if is_routing_name(effort) {
        return Err(ModelsError::Input(format!(
            "--effort {effort} is not an effort level"
        )));
    }
    let Some(option) = option_by_category(options, "thought_level") else {
        return Err(ModelsError::Input(format!(
            "--effort {effort}: the selected model has no effort levels (use default)"
        )));
    };
    let (id, values) = option_values(option);
    values
        .iter()
        .find(|(value, _)| value.eq_ignore_ascii_case(effort))
        .map(|(value, _)| Some((id.clone(), value.clone())))
        .ok_or_else(|| {
            let offered: Vec<&str> = values.iter().map(|(v, _)| v.as_str()).collect();
            ModelsError::Input(format!(
                "--effort {effort} is not offered by the selected model (offered: default, {})",
                offered.join(", ")
            ))
        })
}

/// The speed option set to `standard`, when the session offers it.
pub fn session_speed_standard(options: &[v1::SessionConfigOption]) -> Option<(String, String)> {
    let option = option_by_category(options, "speed")?;
    let (id, values) = option_values(option);
    values
        .iter()
        .any(|(value, _)| value == "standard")
        .then(|| (id, "standard".to_owned()))
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

    #[test]
    fn catalog_ids_match_session_values_after_normalising() {
        let resolved = ResolvedModel {
            family: "glm-5.2".into(),
            model_uid: "glm-5.2".into(),
            label: "GLM 5.2".into(),
            acp_id: "glm-5-2".into(),
        };
        assert_eq!(
            session_model_value(&options(), &resolved).expect("offered"),
            ("model".into(), "glm-5-2".into())
        );
        let legacy = ResolvedModel {
            family: "legacy-9".into(),
            model_uid: "legacy_9".into(),
            label: "Legacy 9".into(),
            acp_id: "legacy-9".into(),
        };
        assert!(matches!(
            session_model_value(&options(), &legacy),
            Err(ModelsError::Setup(_))
        ));
    }

    #[test]
    fn effort_default_leaves_the_model_alone_and_unknown_levels_are_input() {
        assert_eq!(
            session_effort_value(&options(), "default").expect("default"),
            None
        );
        assert_eq!(
            session_effort_value(&options(), "high").expect("high"),
            Some(("thought_level".into(), "high".into()))
        );
        assert!(matches!(
            session_effort_value(&options(), "medium"),
            Err(ModelsError::Input(_))
        ));
        assert!(matches!(
            session_effort_value(&options()[..1], "high"),
            Err(ModelsError::Input(_))
        ));
        assert_eq!(session_current_model(&options()).as_deref(), Some("swe-2"));
        assert_eq!(
            session_speed_standard(&options()),
            Some(("speed".into(), "standard".into()))
        );
    }
}
