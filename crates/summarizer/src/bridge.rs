//! The summarizer's state, owned here and shared by every connection: built once from a
//! policy by [`Bridge::from_policy`], which refuses everything that is wrong before a socket
//! opens.
//!
//! The state is split by concern, and each part lives with the module that owns it: who may
//! ask (`admission::Admission`: the key, the body limit, the turn slots, the turns running),
//! where turns run (`sessions::Sessions`: the pool, the resident transport, the agents' home
//! and uid), how turns run and are judged (`turn::Turns`: the codec, the cap on calls, whether
//! text streams, the safeguard mode), how answers are rendered (`respond::Responder`), the
//! resends joined to their turn and whether side requests are answered locally, and the
//! metrics every part counts into. The stages take the parts they use, never the bridge: of
//! the request's modules only the edge (`http`) and the request's walk (`walk`, a child of this
//! module) hold it; `startup` builds it and starts the pool's refill and the resident reaper.

mod walk;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use devin_bridge_policy::ModePolicy;
use serde::Serialize;

use crate::admission::Admission;
use crate::auth::{ApiKey, KeyError};
use crate::metrics::Metrics;
use crate::policy::{CatalogSource, SummarizerPolicy, Transport};
use crate::pool::AgentPool;
use crate::resends::Resends;
use crate::resident::Resident;
use crate::respond::Responder;
use crate::serialize::Codec;
use crate::sessions::Sessions;
use crate::turn::Turns;
use crate::{catalog, sandbox};
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

/// The summarizer's parts, shared by all connections (see the module doc).
pub struct Bridge {
    pub agent: AgentInfo,
    pub(crate) admission: Admission,
    pub(crate) sessions: Sessions,
    pub(crate) turns: Turns,
    pub(crate) responder: Responder,
    /// Turns running and just answered, which resends of the same request join.
    pub(crate) resends: Arc<Resends>,
    /// Whether side requests the serializer recognizes are answered without an agent turn
    /// (`[server] local_side_requests`).
    pub(crate) local_side_requests: bool,
    pub(crate) metrics: Arc<Metrics>,
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
        let sessions = sessions(policy, &spec, limits, &client, identity, &catalogs);
        let metrics = Arc::new(Metrics::new(sessions.resident.as_deref()));
        let turns = Turns {
            codec: Codec {
                transforms: transforms.clone(),
                catalogs,
                windows: Arc::default(),
                images: image_limits(policy, probed.takes_images),
            },
            max_tool_calls: policy.agent.max_tool_calls,
            stream_text: policy.server.stream_text,
            safeguard_mode: policy.safeguards.mode,
        };
        let server = &policy.server;
        Ok(Arc::new(Self {
            agent,
            admission: Admission::new(key, server),
            sessions,
            turns,
            responder: Responder {
                transforms,
                metrics: metrics.clone(),
                ping_interval: Duration::from_millis(server.ping_interval_ms),
            },
            resends: Arc::new(Resends::new(
                Duration::from_millis(server.resend_grace_ms),
                Duration::from_millis(server.resend_window_ms),
            )),
            local_side_requests: server.local_side_requests,
            metrics,
        }))
    }

    /// The transforms in force (the live set: a hot swap changes what it holds).
    pub fn transforms(&self) -> &Arc<Transforms> {
        &self.turns.codec.transforms
    }

    /// The per-turn pool of prewarmed agents (it starts none on the resident transport).
    pub fn pool(&self) -> &Arc<AgentPool> {
        &self.sessions.pool
    }

    /// The resident transport, when the policy selects it.
    pub fn resident(&self) -> Option<&Arc<Resident>> {
        self.sessions.resident.as_ref()
    }

    /// Live agent processes (for `/healthz`).
    pub fn agent_processes(&self) -> usize {
        self.sessions.agent_processes()
    }

    /// The model catalog in force now.
    pub fn catalog(&self) -> String {
        self.turns.codec.catalog()
    }

    /// Which catalog is in force (`/healthz`).
    pub fn catalog_status(&self) -> catalog::CatalogStatus {
        self.turns.codec.catalogs.status()
    }

    /// Whether image blocks reach the agent.
    pub fn vision(&self) -> bool {
        self.turns.codec.images.max_images > 0
    }

    /// Turns running now.
    pub fn in_flight(&self) -> usize {
        self.admission.in_flight()
    }
}

/// Where turns run: the resident transport when the policy selects it (it keeps its own
/// processes warm: the pool then prewarms none), else the pool's per-turn agents.
fn sessions(
    policy: &SummarizerPolicy,
    spec: &Spec,
    limits: AgentLimits,
    client: &ClientIdentity,
    identity: &AgentIdentity,
    catalogs: &catalog::Catalogs,
) -> Sessions {
    let resident = match policy.agent.transport {
        Transport::Resident => Some(Resident::new(
            spec.clone(),
            limits,
            client.clone(),
            &policy.agent,
            spec.cwd.clone(),
        )),
        Transport::PerTurn => None,
    };
    let prewarm = if resident.is_some() {
        0
    } else {
        policy.agent.prewarm
    };
    let default_model = catalog::first_model(&catalogs.current());
    let pool =
        AgentPool::with_default_model(spec.clone(), limits, client.clone(), prewarm, default_model);
    let agent_uid = identity.switch_to().map(|(uid, _)| uid);
    Sessions::new(pool, resident, &spec.cwd, agent_uid)
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
