//! Summarizer mode: an Anthropic Messages endpoint answered by the tool-less `summarizer` ACP
//! agent. The host moves bytes, runs processes and enforces limits; every transform of the
//! request and the reply runs in a wasm component.

mod auth;
mod body;
mod calls;
mod catalog;
pub mod control;
pub mod doctor;
mod failures;
mod http;
mod metrics;
pub mod policy;
mod pool;
mod prepare;
mod reload;
mod reply;
mod resends;
mod resident;
mod respond;
mod safeguard;
pub mod sandbox;
mod serialize;
mod shown;
mod side_requests;
pub mod startup;
mod streamed;
mod turn;
mod window;

use devin_bridge_policy::ModePolicy;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::policy::{CatalogSource, SafeguardMode, SummarizerPolicy, Transport};
use crate::pool::AgentPool;
use devin_bridge_agent::acp::AgentLimits;
use devin_bridge_agent::identity::AgentIdentity;
use devin_bridge_engine::TransformCalls as _;
use devin_bridge_engine::{ImageLimits, Transforms};

pub use auth::{read_key_file, ApiKey, KeyError};
pub use calls::INLINE_INPUT_BYTES;
pub use http::serve;
pub use resident::{Resident, Snapshot as ResidentSnapshot, AGENT_HEADER, SESSION_HEADER};
pub use streamed::COALESCE_BYTES;

/// What `/healthz` says about the agent.
#[derive(Debug, Clone, Serialize)]
pub struct AgentInfo {
    pub command: String,
    pub args: Vec<String>,
    pub version: String,
    /// `offline` (the stand-in agent) or `live`.
    pub kind: &'static str,
    /// Whether agents run under their own uid (`separate uid N gid M`) or the host's.
    pub identity: String,
    /// The `clientInfo` agents are introduced to (`name/version`).
    pub client: String,
}

/// Everything a request needs, shared by all connections.
pub struct Bridge {
    pub transforms: Arc<Transforms>,
    pub pool: Arc<AgentPool>,
    /// The resident transport, when the policy selects it.
    pub resident: Option<Arc<Resident>>,
    metrics: metrics::Metrics,
    pub agent: AgentInfo,
    catalogs: catalog::Catalogs,
    /// Which images go with a prompt: none unless the agent advertises image prompts.
    images: ImageLimits,
    /// Tool calls one reply may hold (`[agent] max_tool_calls`).
    max_tool_calls: u32,
    /// Who answers a request's `dangerous_tool_use` safeguard (`[safeguards] mode`).
    safeguard_mode: SafeguardMode,
    /// The context windows of the catalog in force.
    windows: Arc<window::ModelWindows>,
    key: Option<ApiKey>,
    turn_slots: Arc<Semaphore>,
    queue_timeout: Duration,
    ping_interval: Duration,
    max_body: usize,
    home: PathBuf,
    /// Set when agents run under their own uid (then they are counted by uid: the host may
    /// not read another uid's `/proc/<pid>/cwd`).
    agent_uid: Option<u32>,
    in_flight: AtomicUsize,
    /// Turns running and just answered, which resends of the same request join.
    resends: Arc<resends::Resends>,
    /// Whether side requests the serializer recognizes are answered without an agent turn
    /// (`[server] local_side_requests`).
    local_side_requests: bool,
    /// Whether a streamed reply's text goes out as the agent writes it (`[server]
    /// stream_text`).
    stream_text: bool,
}

impl Bridge {
    /// Builds the bridge from a policy: key, sandbox, agent command and version, catalog.
    /// Everything that is wrong is refused here, before a socket is opened (fail closed).
    pub async fn from_policy(
        policy: &SummarizerPolicy,
        transforms: Arc<Transforms>,
        identity: &AgentIdentity,
    ) -> anyhow::Result<Arc<Self>> {
        let key = ApiKey::load(
            policy
                .server
                .api_key_file
                .as_ref()
                .map(|file| policy.resolve(file))
                .as_deref(),
        )?;
        if key.is_none() && policy.server.require_key {
            return Err(KeyError::Missing.into());
        }
        if key.is_none() {
            tracing::warn!("no local API key configured: any local client may use this bridge (offline policy)");
        }
        let spec = sandbox::agent_spec(policy, identity)?;
        let client = policy.agent.client_identity()?;
        if client.is_default() {
            tracing::info!(client = %client, "agents are introduced as the client the Devin CLI accepts");
        } else {
            tracing::warn!(client = %client, "agents are introduced with a client identity other than the default; the Devin service may refuse its prompts");
        }
        let version = agent_version(&spec).await.with_context(|| {
            format!(
                "the agent {} does not answer --version; refusing to start",
                spec.program.display()
            )
        })?;
        let (catalog, catalog_name) = match &policy.models.catalog {
            Some(file) => {
                let path = policy.resolve(file);
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading the model catalog {}", path.display()))?;
                (text, path.display().to_string())
            }
            None => (
                devin_bridge_policy::BUILTIN_CATALOG.to_owned(),
                "(built-in)".to_owned(),
            ),
        };
        // A catalog the model-alias transform cannot read would fail every request: refuse now.
        let listing = transforms.list_models(catalog.clone(), false)?;
        if let Err(failure) = listing {
            anyhow::bail!("model catalog {catalog_name}: {}", failure.message);
        }
        let limits = AgentLimits {
            init_timeout: Duration::from_millis(policy.agent.init_timeout_ms),
            turn_timeout: Duration::from_millis(policy.agent.turn_timeout_ms),
            output_cap: policy.agent.output_cap_bytes,
            // The summarizer needs only the reply text: never wait after the answer.
            stopped_wait: Duration::ZERO,
        };
        let agent = AgentInfo {
            command: spec.program.display().to_string(),
            args: spec.args.clone(),
            version,
            kind: if policy.agent.offline {
                "offline"
            } else {
                "live"
            },
            identity: identity.describe(),
            client: client.to_string(),
        };
        // One agent, started once, says whether it takes images and (for a live catalog) which
        // models the account has. An agent that cannot be probed is taken to take no image
        // (images are then refused with a clear error) and leaves the file's catalog in force.
        let live_catalog = policy.models.source == CatalogSource::Live;
        let (takes_images, first_models) = match catalog::probe(
            &spec,
            limits,
            &client,
            &spec.cwd,
            live_catalog,
        )
        .await
        {
            Ok(probe) => {
                tracing::info!(images = probe.images, "agent capabilities probed");
                (probe.images, probe.models)
            }
            Err(error) => {
                tracing::warn!(code = error.code(), %error, "probing the agent failed; images will be refused");
                (false, Some(Err(error.code().to_owned())))
            }
        };
        let catalogs = match policy.models.source {
            CatalogSource::File => catalog::Catalogs::file(catalog),
            CatalogSource::Live => {
                catalog::Catalogs::live(
                    catalog,
                    first_models.unwrap_or_else(|| Err("no_models".into())),
                    spec.clone(),
                    limits,
                    client.clone(),
                    Duration::from_millis(policy.models.discovery_cache_ms),
                    transforms.clone(),
                )
                .await
            }
        };
        let images = if takes_images {
            ImageLimits {
                max_images: policy.agent.max_images,
                max_image_bytes: policy.agent.max_image_bytes,
            }
        } else {
            ImageLimits::default()
        };
        let home = spec.cwd.clone();
        let resident = match policy.agent.transport {
            Transport::Resident => Some(Resident::new(
                spec.clone(),
                limits,
                client.clone(),
                &policy.agent,
                home.clone(),
            )),
            Transport::PerTurn => None,
        };
        // The resident transport keeps its own processes warm; per-turn agents are not needed.
        let prewarm = if resident.is_some() {
            0
        } else {
            policy.agent.prewarm
        };
        let pool = AgentPool::with_default_model(
            spec,
            limits,
            client,
            prewarm,
            catalog::first_model(&catalogs.current()),
        );
        Ok(Arc::new(Self {
            transforms,
            pool,
            metrics: metrics::Metrics::new(resident.as_deref()),
            resident,
            agent,
            catalogs,
            images,
            max_tool_calls: policy.agent.max_tool_calls,
            safeguard_mode: policy.safeguards.mode,
            windows: Arc::default(),
            key,
            turn_slots: Arc::new(Semaphore::new(policy.server.max_concurrent_turns)),
            queue_timeout: Duration::from_millis(policy.server.queue_timeout_ms),
            ping_interval: Duration::from_millis(policy.server.ping_interval_ms),
            max_body: policy.server.max_body_bytes,
            home,
            agent_uid: identity.switch_to().map(|(uid, _)| uid),
            in_flight: AtomicUsize::new(0),
            resends: Arc::new(resends::Resends::new(
                Duration::from_millis(policy.server.resend_grace_ms),
                Duration::from_millis(policy.server.resend_window_ms),
            )),
            local_side_requests: policy.server.local_side_requests,
            stream_text: policy.server.stream_text,
        }))
    }

    /// Live agent processes (for `/healthz`).
    pub fn agent_processes(&self) -> usize {
        match self.agent_uid {
            Some(uid) => devin_bridge_agent::process::live_processes_of_uid(uid),
            None => devin_bridge_agent::process::live_processes_in(&self.home),
        }
    }

    /// The model catalog in force now.
    pub fn catalog(&self) -> String {
        self.catalogs.current()
    }

    /// Which catalog is in force (`/healthz`).
    pub fn catalog_status(&self) -> catalog::CatalogStatus {
        self.catalogs.status()
    }

    /// Whether image blocks reach the agent.
    pub fn vision(&self) -> bool {
        self.images.max_images > 0
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// Counts a running turn for `/healthz` while alive.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `<agent> --version` in the sandbox (first line, bounded), within 15 s.
pub(crate) async fn agent_version(
    spec: &devin_bridge_agent::process::Spec,
) -> anyhow::Result<String> {
    let mut command = devin_bridge_agent::process::command_for(spec);
    command.arg("--version").stdin(std::process::Stdio::null());
    let output = tokio::time::timeout(Duration::from_secs(15), command.output())
        .await
        .context("timed out")??;
    if !output.status.success() {
        anyhow::bail!("exit status {}", output.status);
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .chars()
        .take(200)
        .collect())
}
