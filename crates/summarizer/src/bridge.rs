//! The summarizer's state, shared by every connection: built once from a policy by
//! [`Bridge::from_policy`], which refuses everything that is wrong before a socket opens.
//!
//! The modules a turn walks through take only what they use where they sit below this one
//! (the serializer and the resident sessions take [`Codec`], the reply's failures the
//! transforms); the request's own modules (`http`, `respond`, `turn`, ...) take the bridge.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use devin_bridge_policy::ModePolicy;
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::auth::{ApiKey, KeyError};
use crate::policy::{CatalogSource, SafeguardMode, SummarizerPolicy, Transport};
use crate::pool::AgentPool;
use crate::resident::Resident;
use crate::serialize::Codec;
use crate::{catalog, metrics, resends, sandbox};
use devin_bridge_agent::acp::AgentLimits;
use devin_bridge_agent::devin::ClientIdentity;
use devin_bridge_agent::identity::AgentIdentity;
use devin_bridge_agent::process::Spec;
use devin_bridge_engine::TransformCalls as _;
use devin_bridge_engine::{ImageLimits, Transforms};

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
    pub(crate) metrics: metrics::Metrics,
    pub agent: AgentInfo,
    /// What serializing a request needs: the transforms, the catalog in force, its context
    /// windows and the image limits.
    pub(crate) codec: Codec,
    /// Tool calls one reply may hold (`[agent] max_tool_calls`).
    pub(crate) max_tool_calls: u32,
    /// Who answers a request's `dangerous_tool_use` safeguard (`[safeguards] mode`).
    pub(crate) safeguard_mode: SafeguardMode,
    pub(crate) key: Option<ApiKey>,
    pub(crate) turn_slots: Arc<Semaphore>,
    pub(crate) queue_timeout: Duration,
    pub(crate) ping_interval: Duration,
    pub(crate) max_body: usize,
    pub(crate) home: PathBuf,
    /// Set when agents run under their own uid (then they are counted by uid: the host may
    /// not read another uid's `/proc/<pid>/cwd`).
    agent_uid: Option<u32>,
    pub(crate) in_flight: AtomicUsize,
    /// Turns running and just answered, which resends of the same request join.
    pub(crate) resends: Arc<resends::Resends>,
    /// Whether side requests the serializer recognizes are answered without an agent turn
    /// (`[server] local_side_requests`).
    pub(crate) local_side_requests: bool,
    /// Whether a streamed reply's text goes out as the agent writes it (`[server]
    /// stream_text`).
    pub(crate) stream_text: bool,
}

/// What the agent said of itself at start-up: whether it takes images, and (for a live
/// catalog) the models of its account or why they could not be read.
struct Probed {
    takes_images: bool,
    first_models: Option<Result<Vec<(String, String)>, String>>,
}

impl Bridge {
    /// Builds the bridge from a policy: key, sandbox, agent command and version, catalog.
    /// Everything that is wrong is refused here, before a socket is opened (fail closed).
    pub async fn from_policy(
        policy: &SummarizerPolicy,
        transforms: Arc<Transforms>,
        identity: &AgentIdentity,
    ) -> anyhow::Result<Arc<Self>> {
        let key = load_key(policy)?;
        let spec = sandbox::agent_spec(policy, identity)?;
        let client = client_identity(policy)?;
        let version = sandbox::agent_version(&spec).await.with_context(|| {
            format!(
                "the agent {} does not answer --version; refusing to start",
                spec.program.display()
            )
        })?;
        let catalog = read_catalog(policy, &transforms)?;
        let limits = agent_limits(policy);
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
        let probed = probe_agent(policy, &spec, limits, &client).await;
        let catalogs = match policy.models.source {
            CatalogSource::File => catalog::Catalogs::file(catalog),
            CatalogSource::Live => {
                let first = probed
                    .first_models
                    .unwrap_or_else(|| Err("no_models".into()));
                let ttl = Duration::from_millis(policy.models.discovery_cache_ms);
                let (spec, client, transforms) = (spec.clone(), client.clone(), transforms.clone());
                catalog::Catalogs::live(catalog, first, spec, limits, client, ttl, transforms).await
            }
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
        let default_model = catalog::first_model(&catalogs.current());
        let pool = AgentPool::with_default_model(spec, limits, client, prewarm, default_model);
        let codec = Codec {
            transforms: transforms.clone(),
            catalogs,
            windows: Arc::default(),
            images: image_limits(policy, probed.takes_images),
        };
        Ok(Arc::new(Self {
            transforms,
            pool,
            metrics: metrics::Metrics::new(resident.as_deref()),
            resident,
            agent,
            codec,
            max_tool_calls: policy.agent.max_tool_calls,
            safeguard_mode: policy.safeguards.mode,
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
        self.codec.catalog()
    }

    /// Which catalog is in force (`/healthz`).
    pub fn catalog_status(&self) -> catalog::CatalogStatus {
        self.codec.catalogs.status()
    }

    /// Whether image blocks reach the agent.
    pub fn vision(&self) -> bool {
        self.codec.images.max_images > 0
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// The local API key clients must present, if the policy names one; refused when the policy
/// requires a key and names none.
fn load_key(policy: &SummarizerPolicy) -> anyhow::Result<Option<ApiKey>> {
    let file = policy
        .server
        .api_key_file
        .as_ref()
        .map(|file| policy.resolve(file));
    let key = ApiKey::load(file.as_deref())?;
    if key.is_none() && policy.server.require_key {
        return Err(KeyError::Missing.into());
    }
    if key.is_none() {
        tracing::warn!(
            "no local API key configured: any local client may use this bridge (offline policy)"
        );
    }
    Ok(key)
}

/// The client identity agents are introduced with, and a warning when it is not the default.
fn client_identity(policy: &SummarizerPolicy) -> anyhow::Result<ClientIdentity> {
    let client = policy.agent.client_identity()?;
    if client.is_default() {
        tracing::info!(client = %client, "agents are introduced as the client the Devin CLI accepts");
    } else {
        tracing::warn!(client = %client, "agents are introduced with a client identity other than the default; the Devin service may refuse its prompts");
    }
    Ok(client)
}

/// The catalog file's text (or the built-in one), refused when the model-alias transform
/// cannot read it: such a catalog would fail every request.
fn read_catalog(policy: &SummarizerPolicy, transforms: &Transforms) -> anyhow::Result<String> {
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
    let listing = transforms.list_models(catalog.clone(), false)?;
    if let Err(failure) = listing {
        anyhow::bail!("model catalog {catalog_name}: {}", failure.message);
    }
    Ok(catalog)
}

/// The limits of every agent the summarizer starts.
fn agent_limits(policy: &SummarizerPolicy) -> AgentLimits {
    AgentLimits {
        init_timeout: Duration::from_millis(policy.agent.init_timeout_ms),
        turn_timeout: Duration::from_millis(policy.agent.turn_timeout_ms),
        output_cap: policy.agent.output_cap_bytes,
        // The summarizer needs only the reply text: never wait after the answer.
        stopped_wait: Duration::ZERO,
    }
}

/// One agent, started once, says whether it takes images and (for a live catalog) which
/// models the account has. An agent that cannot be probed is taken to take no image (images
/// are then refused with a clear error) and leaves the file's catalog in force.
async fn probe_agent(
    policy: &SummarizerPolicy,
    spec: &Spec,
    limits: AgentLimits,
    client: &ClientIdentity,
) -> Probed {
    let live_catalog = policy.models.source == CatalogSource::Live;
    match catalog::probe(spec, limits, client, &spec.cwd, live_catalog).await {
        Ok(probe) => {
            tracing::info!(images = probe.images, "agent capabilities probed");
            Probed {
                takes_images: probe.images,
                first_models: probe.models,
            }
        }
        Err(error) => {
            tracing::warn!(code = error.code(), %error, "probing the agent failed; images will be refused");
            Probed {
                takes_images: false,
                first_models: Some(Err(error.code().to_owned())),
            }
        }
    }
}

/// Which images go with a prompt: none unless the agent takes images.
fn image_limits(policy: &SummarizerPolicy, takes_images: bool) -> ImageLimits {
    if takes_images {
        ImageLimits {
            max_images: policy.agent.max_images,
            max_image_bytes: policy.agent.max_image_bytes,
        }
    } else {
        ImageLimits::default()
    }
}

/// Counts a running turn for `/healthz` while alive.
pub(crate) struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    pub(crate) fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
