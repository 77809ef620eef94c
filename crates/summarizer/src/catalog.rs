//! The model catalog that `/v1/models` lists and requests are validated against: the policy's
//! catalog file, or (`[models] source = "live"`) the account's own catalog, read from the
//! agent and cached for `discovery_cache_ms`.
//!
//! The live catalog comes from a probe: `initialize`, then `session/new`, whose model config
//! option lists the models the account may use (`devin models list` also names ids a session
//! refuses, such as `adaptive`: only the session's option counts). The CLI's `summarizer` agent
//! type offers no model option, so for it the models are read from a session of the same
//! CLI's full agent (the same command, home and login without `--agent-type`), which lists
//! the account's models; the summarizer then runs them with `--model`. When the agent answers that
//! it is not logged in, the probe signs it in once, headless (only when `WINDSURF_API_KEY`
//! reaches the agent), and asks again; a browser flow is never started. A failed probe keeps
//! the file's catalog and is retried when the cache expires.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1;
use serde::Serialize;
use serde_json::json;

use devin_bridge_agent::acp::{AcpError, AgentConnection, AgentLimits};
use devin_bridge_agent::devin::options::{
    agent_type_offers_model_option, without_agent_type, Select,
};
use devin_bridge_agent::devin::ClientIdentity;
use devin_bridge_agent::process::Spec;
use devin_bridge_engine::TransformCalls as _;
use devin_bridge_engine::Transforms;

use crate::window::Windows;

/// Most models kept from one probe.
const MAX_MODELS: usize = 256;

/// Which catalog is in force, for `/healthz`.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogStatus {
    /// `file` or `live`.
    pub source: &'static str,
    /// Models in the catalog in force (`live` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<usize>,
    /// Milliseconds since the live catalog was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_ms: Option<u64>,
    /// Why the last probe failed (a stable code), when the file's catalog is in force because
    /// of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_error: Option<String>,
}

/// The catalog in force and how to refresh it.
pub(crate) struct Catalogs {
    file: String,
    live: Option<Arc<Live>>,
}

struct Live {
    /// The policy's (or the built-in) catalog: the live catalog takes its context windows.
    file: String,
    spec: Spec,
    limits: AgentLimits,
    client: ClientIdentity,
    home: PathBuf,
    ttl: Duration,
    transforms: Arc<Transforms>,
    state: Mutex<Probed>,
    refreshing: AtomicBool,
}

#[derive(Default)]
struct Probed {
    /// The live catalog and its number of models, once a probe succeeded.
    catalog: Option<(String, usize)>,
    /// When the last probe ended (success or not).
    at: Option<Instant>,
    error: Option<String>,
}

impl Catalogs {
    /// The policy's catalog only.
    pub(crate) fn file(catalog: String) -> Self {
        Self {
            file: catalog,
            live: None,
        }
    }

    /// The account's catalog: `first` (the models of the start-up probe, or the failure's
    /// code; the file's catalog then), read again when older than `ttl`.
    pub(crate) async fn live(
        file: String,
        first: Result<Vec<(String, String)>, String>,
        spec: Spec,
        limits: AgentLimits,
        client: ClientIdentity,
        ttl: Duration,
        transforms: Arc<Transforms>,
    ) -> Self {
        let home = spec.cwd.clone();
        let live = Arc::new(Live {
            file: file.clone(),
            spec,
            limits,
            client,
            home,
            ttl,
            transforms,
            state: Mutex::new(Probed::default()),
            refreshing: AtomicBool::new(true),
        });
        live.clone().record(first).await;
        Self {
            file,
            live: Some(live),
        }
    }

    /// The catalog in force now. An expired live catalog is refreshed in the background; the
    /// one in force serves meanwhile.
    pub(crate) fn current(&self) -> String {
        let Some(live) = &self.live else {
            return self.file.clone();
        };
        let (catalog, expired) = {
            let state = live.lock();
            (
                state.catalog.as_ref().map(|(text, _)| text.clone()),
                state.at.is_none_or(|at| at.elapsed() >= live.ttl),
            )
        };
        if expired && !live.refreshing.swap(true, Ordering::AcqRel) {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(live.clone().refresh());
            } else {
                live.refreshing.store(false, Ordering::Release);
            }
        }
        catalog.unwrap_or_else(|| self.file.clone())
    }

    pub(crate) fn status(&self) -> CatalogStatus {
        let Some(live) = &self.live else {
            return CatalogStatus {
                source: "file",
                models: None,
                age_ms: None,
                probe_error: None,
            };
        };
        let state = live.lock();
        CatalogStatus {
            source: if state.catalog.is_some() {
                "live"
            } else {
                "file"
            },
            models: state.catalog.as_ref().map(|(_, models)| *models),
            age_ms: state
                .at
                .filter(|_| state.catalog.is_some())
                .map(|at| u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX)),
            probe_error: state.error.clone(),
        }
    }
}

impl Live {
    fn lock(&self) -> std::sync::MutexGuard<'_, Probed> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// One probe; its result replaces the live catalog, or its failure is recorded (a failed
    /// probe keeps the last good live catalog, or the file's).
    async fn refresh(self: Arc<Self>) {
        let models = match probe(&self.spec, self.limits, &self.client, &self.home, true).await {
            Ok(probe) => probe.models.unwrap_or_else(|| Err("no_models".into())),
            Err(error) => Err(error.code().to_owned()),
        };
        self.record(models).await;
    }

    /// Makes `models` the live catalog, or records why there is none.
    async fn record(&self, models: Result<Vec<(String, String)>, String>) {
        let checked = match models {
            Ok(models) => self.checked(models).await,
            Err(code) => Err(code),
        };
        {
            let mut state = self.lock();
            state.at = Some(Instant::now());
            match checked {
                Ok((catalog, models)) => {
                    tracing::info!(models, "live model catalog read from the agent");
                    state.catalog = Some((catalog, models));
                    state.error = None;
                }
                Err(code) => {
                    tracing::warn!(%code, "reading the live model catalog failed; the catalog in force stays");
                    state.error = Some(code);
                }
            }
        }
        self.refreshing.store(false, Ordering::Release);
    }

    /// The probed models as a catalog the model-alias transform accepts and lists.
    async fn checked(&self, models: Vec<(String, String)>) -> Result<(String, usize), String> {
        if models.is_empty() {
            return Err("no_models".into());
        }
        let count = models.len();
        let transforms = self.transforms.clone();
        let file = self.file.clone();
        let listed = tokio::task::spawn_blocking(move || {
            // The agent lists no context windows: the file's catalog states them for the ids
            // it knows (a failure to list it only loses the windows).
            let windows = match transforms.context_windows(file) {
                Ok(Ok(pairs)) => Windows::from_pairs(pairs),
                _ => Windows::default(),
            };
            let catalog = catalog_of(&models, &windows);
            transforms
                .list_models(catalog.clone(), false)
                .map(|listed| listed.map(|_| catalog))
        })
        .await
        .map_err(|_| "transform_trap".to_owned())?;
        match listed {
            Ok(Ok(catalog)) => Ok((catalog, count)),
            Ok(Err(failure)) => Err(failure.code),
            Err(error) => Err(error.code().to_owned()),
        }
    }
}

/// The first model of a catalog (the first variant of its first family): the model a client
/// configured by `client-env` asks for when nothing else is set.
pub(crate) fn first_model(catalog: &str) -> Option<String> {
    let catalog: serde_json::Value = serde_json::from_str(catalog).ok()?;
    catalog["families"][0]["variants"][0]["model_uid"]
        .as_str()
        .map(str::to_owned)
}

/// A catalog in the format of `devin models list --format json`: one family per model, the
/// model's id as its slug and only variant, with the context window `windows` states for it.
fn catalog_of(models: &[(String, String)], windows: &Windows) -> String {
    let families: Vec<serde_json::Value> = models
        .iter()
        .map(|(id, label)| {
            // ACP spells ids with `-` where the catalog may have `.` or `_`.
            let acp_id = id.replace(['.', '_'], "-");
            json!({
                "slug": id,
                "family_uid": id,
                "family_label": label,
                "aliases": [],
                "variants": [{"model_uid": id, "label": label, "max_context_tokens": windows.of(&acp_id)}],
            })
        })
        .collect();
    json!({ "families": families }).to_string()
}

/// What one probe of the agent found.
pub(crate) struct Probe {
    /// Whether its `initialize` answer advertises image prompts.
    pub images: bool,
    /// When asked for: the values (id, label) of its session's model option, or why they
    /// could not be read (a stable code).
    pub models: Option<Result<Vec<(String, String)>, String>>,
}

/// Starts an agent and reads its capabilities; with `read_models`, also opens a session and
/// reads the model option's values. Then ends the agent. One probe serves both the image
/// capability and the live catalog, so start-up pays for one agent.
pub(crate) async fn probe(
    spec: &Spec,
    limits: AgentLimits,
    client: &ClientIdentity,
    home: &std::path::Path,
    read_models: bool,
) -> Result<Probe, AcpError> {
    let mut connection = AgentConnection::start(spec, limits, client).await?;
    let images = devin_bridge_agent::acp::takes_images(connection.initialize_response());
    let models = if !read_models {
        None
    } else if agent_type_offers_model_option(&spec.args) {
        Some(
            session_models(&mut connection, home)
                .await
                .map_err(|error| error.code().to_owned()),
        )
    } else {
        let full = Spec {
            args: without_agent_type(&spec.args),
            ..spec.clone()
        };
        Some(full_agent_models(&full, limits, client, home).await)
    };
    let _ = connection.close(Duration::from_millis(200)).await;
    Ok(Probe { images, models })
}

/// The models a session of the full agent `spec` starts lists (see the module doc).
async fn full_agent_models(
    spec: &Spec,
    limits: AgentLimits,
    client: &ClientIdentity,
    home: &std::path::Path,
) -> Result<Vec<(String, String)>, String> {
    let mut connection = AgentConnection::start(spec, limits, client)
        .await
        .map_err(|error| error.code().to_owned())?;
    let models = session_models(&mut connection, home)
        .await
        .map_err(|error| error.code().to_owned());
    let _ = connection.close(Duration::from_millis(200)).await;
    models
}

/// `session/new` (signing in once, headless, when the agent asks for it) and the values of
/// the session's model option. The probe's session is released again.
async fn session_models(
    connection: &mut AgentConnection,
    home: &std::path::Path,
) -> Result<Vec<(String, String)>, AcpError> {
    let session = connection.new_session(home).await?;
    connection.release_session(&session.session_id.0).await;
    let options = session.config_options.unwrap_or_default();
    Ok(model_values(&options))
}

/// The values of the session's model select option, bounded.
fn model_values(options: &[v1::SessionConfigOption]) -> Vec<(String, String)> {
    Select::model(options)
        .map(|select| select.values.into_iter().take(MAX_MODELS).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_of_probed_models_lists_them_with_the_files_windows() {
        let windows = Windows::from_pairs(
            devin_bridge_model_alias::context_windows(devin_bridge_policy::BUILTIN_CATALOG)
                .expect("windows"),
        );
        let catalog = catalog_of(
            &[
                ("swe-1-7".into(), "SWE-1.7".into()),
                ("glm-5-2".into(), "GLM 5.2".into()),
                ("brand-new".into(), "Brand new".into()),
            ],
            &windows,
        );
        let listing: serde_json::Value =
            serde_json::from_str(&devin_bridge_model_alias_listing(&catalog)).expect("listing");
        let ids: Vec<&str> = listing["data"]
            .as_array()
            .expect("data")
            .iter()
            .filter_map(|card| card["id"].as_str())
            .collect();
        assert_eq!(
            ids,
            [
                "devin-cli-agentic/swe-1-7",
                "devin-cli-agentic/glm-5-2",
                "devin-cli-agentic/brand-new"
            ]
        );
        let windows: Vec<&serde_json::Value> = listing["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|card| &card["context_window"])
            .collect();
        assert_eq!(windows[0], 256000, "the file's window for a model it knows");
        assert!(windows[1].as_u64().is_some_and(|tokens| tokens > 0));
        assert!(
            windows[2].is_null(),
            "no window for a model the file does not know"
        );
    }

    /// The native model-alias library (a dev-dependency), as the component would list.
    fn devin_bridge_model_alias_listing(catalog: &str) -> String {
        devin_bridge_model_alias::list_models(catalog, false).expect("lists")
    }

    #[test]
    fn the_first_model_is_the_first_variant_of_the_first_family() {
        let catalog = r#"{"families":[{"variants":[{"model_uid":"swe-1-7"},{"model_uid":"x"}]},{"variants":[{"model_uid":"y"}]}]}"#;
        assert_eq!(first_model(catalog).as_deref(), Some("swe-1-7"));
        assert_eq!(first_model(r#"{"families":[]}"#), None);
        assert_eq!(first_model("not json"), None);
    }

    #[test]
    fn model_values_come_from_the_model_select_only() {
        let options: Vec<v1::SessionConfigOption> = serde_json::from_value(json!([
            {"id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "smart",
             "options": [{"value": "smart", "name": "Smart"}]},
            {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "a",
             "options": [{"value": "a", "name": "A"}, {"value": "b", "name": "B"}]}
        ]))
        .expect("options");
        assert_eq!(
            model_values(&options),
            [
                ("a".to_owned(), "A".to_owned()),
                ("b".to_owned(), "B".to_owned())
            ]
        );
        assert!(model_values(&options[..1]).is_empty());
    }
}
