//! Policy files: one TOML file selects a mode and configures everything the host does.
//!
//! Parsing is strict (`deny_unknown_fields` everywhere): a misspelt key is an error at load,
//! never a silently ignored setting. Every field has a safe default, and relative paths are
//! resolved against the directory of the policy file, so a policy means the same thing
//! whatever the working directory of the process.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::TransformKind;

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid policy {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid policy {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The three things the bridge can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Claude Code talks to our Anthropic Messages endpoint; Devin's `summarizer` agent answers.
    Summarizer,
    /// A CLI that delegates tasks and reviews to Devin.
    Companion,
    /// A worker that serves Devin Outposts sessions from a fleet queue.
    Outpost,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Summarizer => "summarizer",
            Mode::Companion => "companion",
            Mode::Outpost => "outpost",
        })
    }
}

/// One transform component: where its bytes are and, optionally, the digest they must have.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentSource {
    /// Path of the `.wasm` component, relative to the policy file.
    pub path: PathBuf,
    /// Hex sha256 the file must have; a mismatch refuses the component.
    pub sha256: Option<String>,
}

/// `[components.<transform>]` tables. A missing table means the built-in default location.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentsTable {
    pub serializer: Option<ComponentSource>,
    pub envelope: Option<ComponentSource>,
    pub sse: Option<ComponentSource>,
    #[serde(rename = "model-alias")]
    pub model_alias: Option<ComponentSource>,
}

/// Limits of the wasm runtime. Each call gets a fresh store with these caps.
/// `memory_mib` and `call_timeout_ms` change live on SIGHUP; `max_instances` needs a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeLimits {
    /// Linear memory cap per call, in MiB.
    pub memory_mib: u32,
    /// Wall-clock deadline per call, in milliseconds (epoch interruption).
    pub call_timeout_ms: u64,
    /// Component instances that can be live at once (the pooling allocator's size).
    pub max_instances: u32,
}

impl RuntimeLimits {
    /// The largest `memory_mib` a policy may set.
    pub const MAX_MEMORY_MIB: u32 = 4096;
}

impl Default for RuntimeLimits {
    fn default() -> Self {
        Self {
            memory_mib: 256,
            call_timeout_ms: 2_000,
            max_instances: 128,
        }
    }
}

/// `[engine]`: where compiled components are cached.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSection {
    /// Directory for precompiled components; default `$XDG_CACHE_HOME/devin-bridge`
    /// (or `~/.cache/devin-bridge`). Must be private to this user.
    pub cache_dir: Option<PathBuf>,
}

/// `[control]`: the local socket that `devin-bridge components swap` talks to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlSection {
    /// Unix socket path; default `$XDG_RUNTIME_DIR/devin-bridge/control.sock`, else
    /// `/tmp/devin-bridge-<uid>/control.sock`.
    pub socket: Option<PathBuf>,
}

/// `[server]`: the Anthropic Messages endpoint (summarizer mode).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSection {
    /// Listen address; `--listen` overrides it.
    pub listen: String,
    /// Largest accepted request body (413 beyond it).
    pub max_body_bytes: usize,
    /// Agent turns that may run at once.
    pub max_concurrent_turns: usize,
    /// How long a request waits for a turn slot before `529 overloaded_error`.
    pub queue_timeout_ms: u64,
    /// Interval of `ping` events while a streamed turn runs.
    pub ping_interval_ms: u64,
    /// On SIGTERM, how long running turns may finish before they are killed.
    pub shutdown_grace_ms: u64,
    /// Refuse to start without a local API key (`BRIDGE_API_KEY` or `api_key_file`).
    pub require_key: bool,
    /// A file holding the local API key (must not be readable by group or others).
    pub api_key_file: Option<PathBuf>,
    /// Open client connections at most; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// When started as root: the user (name, uid or uid:gid) the host switches to before it
    /// serves, keeping only the capabilities it needs to run agents under `[agent] user`.
    pub user: Option<String>,
}

impl Default for ServerSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:20128".into(),
            max_body_bytes: 32 << 20,
            max_concurrent_turns: 4,
            queue_timeout_ms: 30_000,
            ping_interval_ms: 10_000,
            shutdown_grace_ms: 30_000,
            require_key: true,
            api_key_file: None,
            max_connections: 256,
            user: None,
        }
    }
}

/// How the summarizer talks to its agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// A fresh agent process and session for every turn, sent the whole conversation.
    #[default]
    PerTurn,
    /// Pooled agent processes, each serving several sessions; a conversation keeps its session
    /// across turns and sends only the messages the session has not seen.
    Resident,
}

/// `[agent]`: the tool-less summarizer agent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentSection {
    /// `per-turn` (default) or `resident`.
    pub transport: Transport,
    /// Resident transport: a conversation's session is forgotten after this long without a
    /// turn, and a process with no session left is ended after this long.
    pub session_idle_ms: u64,
    /// Resident transport: sessions one agent process serves at most.
    pub sessions_per_process: usize,
    /// Resident transport: conversation sessions kept in all (the least recently used idle
    /// one is forgotten beyond it).
    pub max_sessions: usize,
    /// Resident transport: MiB of request bodies that sessions keep, all together, so that a
    /// conversation's next request is parsed only where it differs (a session beyond the
    /// budget keeps none, and its next request is serialized whole). 0 keeps none.
    pub resume_memory_mib: u64,
    /// When the agent takes image prompts: images attached to one prompt at most (the most
    /// recent ones; 0 refuses every image).
    pub max_images: u32,
    /// Largest image attached (decoded bytes); a larger one stays an `[image]` placeholder.
    pub max_image_bytes: u32,
    /// A name on PATH or a path (relative to the policy); `DEVIN_BIN` overrides it.
    pub command: String,
    pub args: Vec<String>,
    /// The agent's HOME and working directory: `/home/bridge` or a directory under `/.sandbox/`.
    pub home: PathBuf,
    /// Agents kept spawned and initialized ahead of demand (each serves one turn).
    pub prewarm: usize,
    pub init_timeout_ms: u64,
    pub turn_timeout_ms: u64,
    /// Largest reply text accepted from the agent (502 beyond it).
    pub output_cap_bytes: usize,
    pub stderr_tail_bytes: usize,
    /// Between SIGTERM and SIGKILL of the agent's process group.
    pub kill_grace_ms: u64,
    /// Egress proxy for the agent; injected only if it is exactly the trusted guard URL.
    pub proxy: Option<String>,
    /// Extra environment variable names passed through to the agent (never credentials of
    /// other providers: those names are refused at load).
    pub pass_env: Vec<String>,
    /// Informational: this policy runs the offline stand-in agent.
    pub offline: bool,
    /// The dedicated user (name, uid or uid:gid) every agent process runs as. Unset: agents
    /// share the host's identity (said once at start). A live policy that sets it and cannot
    /// switch refuses to start.
    pub user: Option<String>,
    /// The agent's TMPDIR; default `<home>/tmp`. With a separate user it must already exist;
    /// outside the agent's home it must also belong to that user and be 0700.
    pub tmpdir: Option<PathBuf>,
}

impl Default for AgentSection {
    fn default() -> Self {
        Self {
            transport: Transport::PerTurn,
            session_idle_ms: 900_000,
            sessions_per_process: 8,
            max_sessions: 256,
            resume_memory_mib: 256,
            max_images: 8,
            max_image_bytes: 5 << 20,
            command: "devin".into(),
            args: vec!["acp".into(), "--agent-type".into(), "summarizer".into()],
            home: PathBuf::from("/home/bridge"),
            prewarm: 1,
            init_timeout_ms: 30_000,
            turn_timeout_ms: 120_000,
            output_cap_bytes: 1 << 20,
            stderr_tail_bytes: 16 << 10,
            kill_grace_ms: 2_000,
            proxy: None,
            pass_env: Vec::new(),
            offline: false,
            user: None,
            tmpdir: None,
        }
    }
}

/// `[log]`: what the host logs (on stderr).
///
/// `filter` uses the `tracing` directive syntax (`info`, `devin_bridge=debug,info`, ...); the
/// default is `info`. `DEVIN_BRIDGE_LOG` (or `RUST_LOG`), when set, wins over it. It changes
/// live on SIGHUP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    pub filter: Option<String>,
}

impl LogSection {
    /// The filter when no environment variable overrides it.
    pub fn filter_or_default(&self) -> &str {
        self.filter.as_deref().unwrap_or("info")
    }
}

/// `[models]`: the Devin model catalog (`devin models list --format json`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelsSection {
    /// Catalog file, relative to the policy; default `models.json` beside it.
    pub catalog: Option<PathBuf>,
    /// `file` (default): the catalog file. `live`: the account's own catalog, read from the
    /// agent (its session's model option) and cached; the file when that fails.
    pub source: CatalogSource,
    /// How long a live catalog is used before it is read again.
    pub discovery_cache_ms: u64,
}

impl Default for ModelsSection {
    fn default() -> Self {
        Self {
            catalog: None,
            source: CatalogSource::File,
            discovery_cache_ms: 300_000,
        }
    }
}

/// Where the model catalog comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CatalogSource {
    #[default]
    File,
    Live,
}

/// `[companion]`: `devin-bridge companion`, the helper a Claude Code plugin calls to delegate
/// tasks and reviews to the Devin CLI. Every duration can also be set by an environment
/// variable (named in `host/src/companion/settings.rs`), which wins over the policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompanionSection {
    /// Where job records, the private agent HOME and caches live; default
    /// `~/.claude/plugins/data/devin-claude-code-fusion`. `DEVIN_COMPANION_DATA` wins.
    pub data_dir: Option<PathBuf>,
    /// The Devin CLI: a name on PATH or an absolute path; `DEVIN_BIN` wins.
    pub command: String,
    /// Wall-clock budget of one agent run.
    pub timeout_ms: u64,
    /// After the prompt result: how long the agent may take to exit once its stdin is closed.
    pub exit_grace_ms: u64,
    /// `result --wait`: how long to wait for a running job.
    pub wait_timeout_ms: u64,
    /// `result --wait`: the polling interval.
    pub wait_poll_ms: u64,
    /// A running record without a worker stamp older than this is `died`.
    pub pidless_running_grace_ms: u64,
    /// Jobs listed by `history` and `status` without `--limit`.
    pub history_limit: usize,
    /// `devin --version` and `devin models list` deadline.
    pub probe_timeout_ms: u64,
    /// How long the model catalog cache (`<data>/models.json`) is fresh.
    pub models_cache_secs: u64,
    /// Largest prompt accepted (arguments or stdin).
    pub max_prompt_bytes: usize,
    /// Largest reply text kept from the agent.
    pub output_cap_bytes: usize,
}

impl Default for CompanionSection {
    fn default() -> Self {
        Self {
            data_dir: None,
            command: "devin".into(),
            timeout_ms: 540_000,
            exit_grace_ms: 15_000,
            wait_timeout_ms: 240_000,
            wait_poll_ms: 1_000,
            pidless_running_grace_ms: 10_000,
            history_limit: 20,
            probe_timeout_ms: 10_000,
            models_cache_secs: 3_600,
            max_prompt_bytes: 1 << 20,
            output_cap_bytes: 1 << 20,
        }
    }
}

/// `[outpost]`: `devin-bridge outpost start`, a worker that serves Devin Outposts sessions from
/// a fleet queue. Flags win over the environment variables (named in
/// `host/src/outpost/settings.rs`), which win over this section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutpostSection {
    /// The outpost whose queue is served, by name or id (`--outpost`).
    pub outpost: Option<String>,
    /// A file holding the fleet API token (must not be readable by group or others).
    pub token_file: Option<PathBuf>,
    /// Devin API base URL (`--api-url`, `DEVIN_API_URL`).
    pub api_url: String,
    /// Where `devin-remote` binaries are published (`--static-base-url`).
    pub static_base_url: String,
    /// Gateway URL used when a claim answer carries none (`--gateway-url`).
    pub gateway_url: Option<String>,
    /// `devin-remote` commit used when a session pins none (`--remote-binary-sha`).
    pub remote_binary_sha: Option<String>,
    /// Sessions run from here (their repositories live in `repos/`); default: the directory
    /// the worker was started from.
    pub work_dir: Option<PathBuf>,
    /// The acceptor id file and per-session state directories; default `~/.devin/worker`.
    pub data_dir: Option<PathBuf>,
    /// Downloaded `devin-remote` binaries (`--cache-dir`); default `~/.devin/worker/cache`.
    pub cache_dir: Option<PathBuf>,
    /// Sessions served at once.
    pub max_sessions: usize,
    /// With other workers on the same queue, a claim waits a per-worker delay below this
    /// (more when this worker is busy) and is skipped if another worker takes the session
    /// meanwhile; 0 claims at once and races.
    pub claim_spread_ms: u64,
    /// The platform this machine serves (`linux`, `macos`, `windows`); default: this machine's.
    pub platform: Option<String>,
    /// Queue re-scan and session status polling interval (`--poll-interval-secs`).
    pub poll_interval_secs: u64,
    /// A watch stream that delivers no byte for this long is dropped and resumed from its
    /// cursor (the server ends streams within five minutes; this catches stalled ones).
    pub watch_idle_timeout_secs: u64,
    /// Deadline of one fleet API request (the watch stream excepted).
    pub request_timeout_ms: u64,
    /// Largest fleet API answer read (a list page, an entry, a claim).
    pub max_response_bytes: usize,
    /// Largest single watch event.
    pub max_event_bytes: u32,
    /// Between SIGTERM and SIGKILL of a remote's process group.
    pub remote_kill_grace_ms: u64,
    /// After a remote exits cleanly: how many times the entry is re-read to see its session
    /// suspended or terminated, and how long apart (the status may lag the exit).
    pub exit_confirm_reads: u32,
    pub exit_confirm_interval_ms: u64,
    /// On SIGTERM: how long the remotes get to end before they are killed and released.
    pub shutdown_grace_ms: u64,
    /// Chromium for the remote's browser tool (`DEVIN_CHROME_PATH`).
    pub chrome_path: Option<PathBuf>,
    /// Set `DEVIN_OUTPOST_DESKTOP=true` for the remotes.
    pub desktop: bool,
    /// A fixed PTY bridge port (`--pty-bridge-port`).
    pub pty_bridge_port: Option<u16>,
    /// How a session's network policy is enforced: `auto` (a network namespace when the
    /// worker may create one, else the per-session guard as the remote's proxy), `namespace`
    /// (refuse sessions with a network policy when no namespace can be made) or `proxy`.
    pub network_enforcement: NetworkEnforcement,
}

/// See [`OutpostSection::network_enforcement`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkEnforcement {
    Auto,
    Namespace,
    Proxy,
}

impl Default for OutpostSection {
    fn default() -> Self {
        Self {
            outpost: None,
            token_file: None,
            api_url: "https://api.devin.ai".into(),
            static_base_url: "https://static.devin.ai/devin-rs/remote".into(),
            gateway_url: None,
            remote_binary_sha: None,
            work_dir: None,
            data_dir: None,
            cache_dir: None,
            max_sessions: 1,
            claim_spread_ms: 40,
            platform: None,
            poll_interval_secs: 5,
            watch_idle_timeout_secs: 305,
            request_timeout_ms: 30_000,
            max_response_bytes: 8 << 20,
            max_event_bytes: 1 << 20,
            remote_kill_grace_ms: 10_000,
            exit_confirm_reads: 5,
            exit_confirm_interval_ms: 1_000,
            shutdown_grace_ms: 30_000,
            chrome_path: None,
            desktop: false,
            pty_bridge_port: None,
            network_enforcement: NetworkEnforcement::Auto,
        }
    }
}

/// Environment variables that must never reach an agent, even when a policy asks.
pub fn is_forbidden_env(name: &str) -> bool {
    const PREFIXES: [&str; 10] = [
        "ANTHROPIC_",
        "CLAUDE_",
        "AWS_",
        "GOOGLE_",
        "GCLOUD_",
        "CLOUDSDK_",
        "VERTEX",
        "BEDROCK",
        "AZURE_",
        "OPENAI_",
    ];
    const NAMES: [&str; 6] = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
    ];
    let upper = name.to_ascii_uppercase();
    PREFIXES.iter().any(|prefix| upper.starts_with(prefix))
        || NAMES.contains(&upper.as_str())
        || upper.starts_with("DEVIN_")
}

/// A whole policy file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub mode: Mode,
    #[serde(default)]
    pub components: ComponentsTable,
    #[serde(default)]
    pub limits: RuntimeLimits,
    #[serde(default)]
    pub engine: EngineSection,
    #[serde(default)]
    pub control: ControlSection,
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub agent: AgentSection,
    #[serde(default)]
    pub models: ModelsSection,
    #[serde(default)]
    pub log: LogSection,
    #[serde(default)]
    pub companion: CompanionSection,
    #[serde(default)]
    pub outpost: OutpostSection,
    /// Directory of the policy file; relative paths are resolved against it.
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// Where the policy was read from (for messages).
    #[serde(skip)]
    pub source: PathBuf,
}

impl Policy {
    /// Reads and validates a policy file.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        let absolute = std::path::absolute(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        let base_dir = absolute
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        Self::parse(&text, path, &base_dir)
    }

    /// Parses a policy embedded in the binary (a mode's built-in default, named `name` in
    /// messages). Its relative paths resolve against this build's `policies/` directory, as
    /// they would for the shipped file; components default to `DEVIN_BRIDGE_COMPONENTS`.
    pub fn builtin(text: &str, name: &str) -> Result<Self, PolicyError> {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
        Self::parse(text, Path::new(name), &normalize(&base))
    }

    /// Parses policy text; `source` names it in messages, `base_dir` anchors relative paths.
    pub fn parse(text: &str, source: &Path, base_dir: &Path) -> Result<Self, PolicyError> {
        let mut policy: Policy = toml::from_str(text).map_err(|error| PolicyError::Parse {
            path: source.to_owned(),
            message: error.to_string(),
        })?;
        policy.base_dir = base_dir.to_owned();
        policy.source = source.to_owned();
        policy.validate()?;
        Ok(policy)
    }

    fn validate(&self) -> Result<(), PolicyError> {
        let invalid = |message: String| PolicyError::Invalid {
            path: self.source.clone(),
            message,
        };
        if self.limits.memory_mib == 0 || self.limits.memory_mib > RuntimeLimits::MAX_MEMORY_MIB {
            return Err(invalid(format!(
                "limits.memory_mib must be between 1 and {}, not {}",
                RuntimeLimits::MAX_MEMORY_MIB,
                self.limits.memory_mib
            )));
        }
        if let Some(filter) = &self.log.filter {
            if let Err(error) = tracing_subscriber::EnvFilter::try_new(filter) {
                return Err(invalid(format!(
                    "log.filter {filter:?} is not a valid filter: {error}"
                )));
            }
        }
        if self.limits.call_timeout_ms == 0 || self.limits.call_timeout_ms > 600_000 {
            return Err(invalid(format!(
                "limits.call_timeout_ms must be between 1 and 600000, not {}",
                self.limits.call_timeout_ms
            )));
        }
        if self.limits.max_instances == 0 || self.limits.max_instances > 10_000 {
            return Err(invalid(format!(
                "limits.max_instances must be between 1 and 10000, not {}",
                self.limits.max_instances
            )));
        }
        for name in &self.agent.pass_env {
            if is_forbidden_env(name) || name.is_empty() || name.contains('=') {
                return Err(invalid(format!(
                    "agent.pass_env may not pass {name:?} to the agent"
                )));
            }
        }
        if self.server.max_concurrent_turns == 0 || self.server.max_connections == 0 {
            return Err(invalid(
                "server.max_concurrent_turns and server.max_connections must be at least 1".into(),
            ));
        }
        let companion = &self.companion;
        if companion.timeout_ms == 0
            || companion.wait_poll_ms == 0
            || companion.probe_timeout_ms == 0
            || companion.history_limit == 0
            || companion.max_prompt_bytes == 0
            || companion.output_cap_bytes == 0
        {
            return Err(invalid(
                "companion timeouts, intervals, limits and caps must be positive".into(),
            ));
        }
        let outpost = &self.outpost;
        if outpost.max_sessions == 0 || outpost.max_sessions > 256 {
            return Err(invalid(format!(
                "outpost.max_sessions must be between 1 and 256, not {}",
                outpost.max_sessions
            )));
        }
        if outpost.poll_interval_secs == 0
            || outpost.watch_idle_timeout_secs == 0
            || outpost.request_timeout_ms == 0
            || outpost.max_response_bytes < 4096
            || outpost.max_event_bytes < 4096
            || outpost.exit_confirm_interval_ms == 0
        {
            return Err(invalid(
                "outpost intervals and timeouts must be positive and its size caps at least 4096 bytes".into(),
            ));
        }
        if self.agent.prewarm > 64 {
            return Err(invalid(format!(
                "agent.prewarm must be at most 64, not {}",
                self.agent.prewarm
            )));
        }
        if !(1..=64).contains(&self.agent.sessions_per_process) {
            return Err(invalid(format!(
                "agent.sessions_per_process must be between 1 and 64, not {}",
                self.agent.sessions_per_process
            )));
        }
        if !(1..=4096).contains(&self.agent.max_sessions) {
            return Err(invalid(format!(
                "agent.max_sessions must be between 1 and 4096, not {}",
                self.agent.max_sessions
            )));
        }
        if self.agent.resume_memory_mib > 16 << 10 {
            return Err(invalid(format!(
                "agent.resume_memory_mib must be at most 16384, not {}",
                self.agent.resume_memory_mib
            )));
        }
        if self.agent.max_images > 64 || self.agent.max_image_bytes > 32 << 20 {
            return Err(invalid(format!(
                "agent.max_images must be at most 64 and agent.max_image_bytes at most 32 MiB, not {} and {}",
                self.agent.max_images, self.agent.max_image_bytes
            )));
        }
        if self.agent.turn_timeout_ms == 0
            || self.agent.init_timeout_ms == 0
            || self.agent.session_idle_ms == 0
            || self.models.discovery_cache_ms == 0
            || self.server.ping_interval_ms == 0
        {
            return Err(invalid("timeouts and intervals must be positive".into()));
        }
        for kind in TransformKind::ALL {
            if let Some(pin) = self
                .component(kind)
                .and_then(|source| source.sha256.as_deref())
            {
                if pin.len() != 64 || !pin.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(invalid(format!(
                        "components.{kind}.sha256 must be 64 hex digits, not {pin:?}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Dotted names of every setting whose value differs between `self` and `other`
    /// (`server.listen`, `components.sse.path`, ...), in a stable order. A table present in one
    /// policy and absent (defaulted) in the other differs field by field.
    pub fn changed_fields(&self, other: &Policy) -> Vec<String> {
        let mut changed = Vec::new();
        match (serde_json::to_value(self), serde_json::to_value(other)) {
            (Ok(old), Ok(new)) => diff_values("", &old, &new, &mut changed),
            // Cannot happen for these types; if it did, report the whole policy as changed.
            _ => changed.push("(policy)".to_owned()),
        }
        changed
    }

    /// The configured source of one transform, if the policy names one.
    pub fn component(&self, kind: TransformKind) -> Option<&ComponentSource> {
        match kind {
            TransformKind::Serializer => self.components.serializer.as_ref(),
            TransformKind::Envelope => self.components.envelope.as_ref(),
            TransformKind::Sse => self.components.sse.as_ref(),
            TransformKind::ModelAlias => self.components.model_alias.as_ref(),
        }
    }

    /// Where a transform's component is read from and the pin it must match.
    ///
    /// Without a `[components.<t>]` table the component is `<t>.wasm` in the default
    /// components directory (`DEVIN_BRIDGE_COMPONENTS`, else `target/components` beside the
    /// policy directory, which is where `cargo xtask build` writes them).
    pub fn component_location(&self, kind: TransformKind) -> (PathBuf, Option<String>) {
        match self.component(kind) {
            Some(source) => (
                self.resolve(&source.path),
                source.sha256.as_ref().map(|pin| pin.to_ascii_lowercase()),
            ),
            None => (
                normalize(&default_components_dir(&self.base_dir).join(kind.file_name())),
                None,
            ),
        }
    }

    /// Resolves a policy-relative path, normalising `.` and `..` lexically (so the result can
    /// be checked component by component, e.g. for the sandbox home).
    pub fn resolve(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            normalize(path)
        } else {
            normalize(&self.base_dir.join(path))
        }
    }
}

/// Collects the dotted paths of the leaves that differ between two JSON values.
fn diff_values(
    path: &str,
    old: &serde_json::Value,
    new: &serde_json::Value,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (old, new) {
        (Value::Object(old_map), Value::Object(new_map)) => {
            let keys: std::collections::BTreeSet<&String> =
                old_map.keys().chain(new_map.keys()).collect();
            for key in keys {
                let null = Value::Null;
                diff_values(
                    &join(key),
                    old_map.get(key).unwrap_or(&null),
                    new_map.get(key).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Object(map), Value::Null) | (Value::Null, Value::Object(map)) => {
            for key in map.keys() {
                out.push(join(key));
            }
        }
        _ if old != new => out.push(path.to_owned()),
        _ => {}
    }
}

/// Lexical normalisation: drops `.`, and `..` removes the previous component (never above `/`).
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !matches!(
                    out.components().next_back(),
                    None | Some(Component::RootDir)
                ) {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The directory `cargo xtask build` writes components to, or `DEVIN_BRIDGE_COMPONENTS`.
pub fn default_components_dir(policy_dir: &Path) -> PathBuf {
    match std::env::var_os("DEVIN_BRIDGE_COMPONENTS") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => policy_dir.join("..").join("target").join("components"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Policy, PolicyError> {
        Policy::parse(text, Path::new("test.toml"), Path::new("/etc/bridge"))
    }

    #[test]
    fn minimal_policy_gets_safe_defaults() {
        let policy = parse("mode = \"summarizer\"").expect("valid");
        assert_eq!(policy.mode, Mode::Summarizer);
        assert_eq!(policy.limits, RuntimeLimits::default());
    }

    #[test]
    fn unknown_mode_is_refused() {
        let error = parse("mode = \"proxy-everything\"").expect_err("unknown mode");
        assert!(error.to_string().contains("unknown variant"), "{error}");
    }

    #[test]
    fn unknown_fields_are_refused_everywhere() {
        for text in [
            "mode = \"summarizer\"\nlisten = \"x\"",
            "mode = \"summarizer\"\n[limits]\nmemory = 3",
            "mode = \"summarizer\"\n[components.serializer]\npath = \"a\"\nsha = \"b\"",
            "mode = \"summarizer\"\n[components.tokenizer]\npath = \"a\"",
        ] {
            assert!(parse(text).is_err(), "accepted: {text}");
        }
    }

    #[test]
    fn pins_must_be_hex_digests() {
        let error =
            parse("mode = \"summarizer\"\n[components.sse]\npath = \"a.wasm\"\nsha256 = \"abc\"")
                .expect_err("short pin");
        assert!(error.to_string().contains("64 hex digits"), "{error}");
    }

    #[test]
    fn relative_paths_resolve_against_the_policy_directory() {
        let policy = parse(&format!(
            "mode = \"summarizer\"\n[components.envelope]\npath = \"c/e.wasm\"\nsha256 = \"{}\"",
            "AB".repeat(32)
        ))
        .expect("valid");
        let (path, pin) = policy.component_location(TransformKind::Envelope);
        assert_eq!(path, PathBuf::from("/etc/bridge/c/e.wasm"));
        assert_eq!(pin.as_deref(), Some("ab".repeat(32).as_str()));
    }

    #[test]
    fn credentials_of_other_providers_cannot_be_passed_to_the_agent() {
        for name in [
            "ANTHROPIC_API_KEY",
            "anthropic_base_url",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "HTTPS_PROXY",
            "DEVIN_API_TOKEN",
            "LD_PRELOAD",
        ] {
            let text = format!("mode = \"summarizer\"\n[agent]\npass_env = [{name:?}]");
            assert!(parse(&text).is_err(), "{name} accepted");
        }
        assert!(parse("mode = \"summarizer\"\n[agent]\npass_env = [\"TZ\"]").is_ok());
    }

    #[test]
    fn normalisation_is_lexical_and_stops_at_the_root() {
        assert_eq!(
            normalize(Path::new("/a/b/../.sandbox/./h")),
            PathBuf::from("/a/.sandbox/h")
        );
        assert_eq!(normalize(Path::new("/../../etc")), PathBuf::from("/etc"));
    }

    #[test]
    fn changed_fields_names_each_differing_setting() {
        let old = parse("mode = \"summarizer\"\n[server]\nlisten = \"127.0.0.1:1\"").expect("old");
        let new = parse(
            "mode = \"summarizer\"\n[server]\nlisten = \"127.0.0.1:2\"\nrequire_key = false\n\
             [limits]\ncall_timeout_ms = 5\n[components.sse]\npath = \"s.wasm\"",
        )
        .expect("new");
        assert_eq!(
            new.changed_fields(&old),
            [
                "components.sse.path",
                "components.sse.sha256",
                "limits.call_timeout_ms",
                "server.listen",
                "server.require_key"
            ]
        );
        assert!(old.changed_fields(&old.clone()).is_empty());
    }

    #[test]
    fn log_filters_are_validated() {
        assert!(
            parse("mode = \"summarizer\"\n[log]\nfilter = \"devin_bridge=debug,info\"").is_ok()
        );
        let error =
            parse("mode = \"summarizer\"\n[log]\nfilter = \"a=b=c[\"").expect_err("bad filter");
        assert!(error.to_string().contains("log.filter"), "{error}");
    }

    #[test]
    fn limits_are_range_checked() {
        assert!(parse("mode = \"summarizer\"\n[limits]\nmemory_mib = 0").is_err());
        assert!(parse("mode = \"summarizer\"\n[limits]\ncall_timeout_ms = 0").is_err());
    }

    #[test]
    fn the_resume_budget_defaults_to_256_mib_and_is_bounded() {
        let policy = parse("mode = \"summarizer\"").expect("valid");
        assert_eq!(policy.agent.resume_memory_mib, 256);
        let agent = |value: u64| {
            parse(&format!(
                "mode = \"summarizer\"\n[agent]\nresume_memory_mib = {value}"
            ))
        };
        assert_eq!(
            agent(0).expect("zero keeps none").agent.resume_memory_mib,
            0
        );
        assert!(agent(16384).is_ok());
        let error = agent(16385).expect_err("too large");
        assert!(error.to_string().contains("resume_memory_mib"), "{error}");
    }
}
