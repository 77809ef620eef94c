//! The summarizer's policy: `mode = "summarizer"` and its sections, `[server]`, `[agent]`,
//! `[models]`, `[safeguards]` and `[control]`, beside the sections every mode has.
//!
//! Parsing is strict (`deny_unknown_fields` everywhere): a misspelt key is an error at load,
//! never a silently ignored setting; a section of another mode is refused by name.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use devin_bridge_agent::process::is_forbidden_env;
use devin_bridge_policy::{Mode, ModePolicy, PolicyError};

devin_bridge_policy::mode_policy! {
    /// A whole summarizer policy file.
    pub struct SummarizerPolicy {
        #[serde(default)]
        pub control: ControlSection,
        #[serde(default)]
        pub server: ServerSection,
        #[serde(default)]
        pub agent: AgentSection,
        #[serde(default)]
        pub models: ModelsSection,
        #[serde(default)]
        pub safeguards: SafeguardsSection,
    }
}

impl ModePolicy for SummarizerPolicy {
    const MODE: Mode = Mode::Summarizer;

    devin_bridge_policy::common_sections_access!();

    fn validate_own(&self) -> Result<(), PolicyError> {
        let invalid = |message: String| self.origin.invalid(message);
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
        if !(1..=64).contains(&self.agent.max_tool_calls) {
            return Err(invalid(format!(
                "agent.max_tool_calls must be between 1 and 64, not {}",
                self.agent.max_tool_calls
            )));
        }
        if let Err(error) = self.agent.client_identity() {
            return Err(invalid(format!("agent.{error}")));
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
        Ok(())
    }
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
    /// How long a turn keeps running after its client went away, so that the client's resend
    /// of the same request (same conversation key, same body) joins it instead of starting
    /// another; 0 ends it with its client.
    pub resend_grace_ms: u64,
    /// How long a finished turn's answer is kept for a resend of the same request; 0 keeps
    /// none.
    pub resend_window_ms: u64,
    /// Answer side requests the serializer recognizes (Claude Code's session title: a request
    /// with every feature of one, see `docs/claude-code.md`)
    /// without an agent turn; false sends every request to the agent.
    pub local_side_requests: bool,
    /// Stream a reply's text to a streaming client as the agent writes it (`text_delta`s of
    /// the text the envelope parser has made certain), its calls at the end; false renders
    /// the whole reply when the turn ends, as one block per piece of prose and call.
    pub stream_text: bool,
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
            resend_grace_ms: 15_000,
            resend_window_ms: 60_000,
            local_side_requests: true,
            stream_text: true,
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
    /// Tool calls one reply may hold (1 to 64): independent calls the agent asks for together
    /// go to the client as one message. More is a repairable `excessive_tool_requests`.
    pub max_tool_calls: u32,
    /// A name on PATH or a path (relative to the policy); `DEVIN_BIN` overrides it.
    pub command: String,
    pub args: Vec<String>,
    /// The `clientInfo.name` the agent is introduced to (`initialize`). The Devin service
    /// refuses every prompt of a client it does not know ("version is out of date"); the
    /// default is the name the Devin CLI accepts.
    pub client_name: String,
    /// The `clientInfo.version`; default the editor version known to pass the same check.
    pub client_version: String,
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

impl AgentSection {
    /// The client identity `client_name` and `client_version` make, checked.
    pub fn client_identity(
        &self,
    ) -> Result<
        devin_bridge_agent::devin::ClientIdentity,
        devin_bridge_agent::devin::identity::IdentityError,
    > {
        devin_bridge_agent::devin::ClientIdentity::new(&self.client_name, &self.client_version)
    }
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
            max_tool_calls: 8,
            command: "devin".into(),
            args: vec!["acp".into(), "--agent-type".into(), "summarizer".into()],
            client_name: devin_bridge_agent::devin::identity::DEFAULT_CLIENT_NAME.into(),
            client_version: devin_bridge_agent::devin::identity::DEFAULT_CLIENT_VERSION.into(),
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

/// `[safeguards]`: how the bridge answers a request's `dangerous_tool_use` safeguard (Claude
/// Code's auto mode asks it to judge every tool call of the reply before the call runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SafeguardsSection {
    pub mode: SafeguardMode,
}

/// Who judges the tool calls of a reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SafeguardMode {
    /// The safeguard component (`[components.safeguard]`) judges each call (default).
    #[default]
    Judge,
    /// The bridge answers `unsupported`: the client classifies by itself (Claude Code then
    /// sends its own classifier requests, which through this bridge are extra agent turns).
    Unsupported,
}

/// `[models]`: the Devin model catalog (`devin models list --format json`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelsSection {
    /// Catalog file, relative to the policy; default: the catalog built into the binary.
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

#[cfg(test)]
mod tests {
    use super::*;
    use devin_bridge_engine::{RuntimeLimits, TransformKind};
    use std::path::Path;

    fn parse(text: &str) -> Result<SummarizerPolicy, PolicyError> {
        SummarizerPolicy::parse(text, Path::new("test.toml"), Path::new("/etc/bridge"))
    }

    #[test]
    fn minimal_policy_gets_safe_defaults() {
        let policy = parse("mode = \"summarizer\"").expect("valid");
        assert_eq!(policy.mode, Mode::Summarizer);
        assert_eq!(policy.limits, RuntimeLimits::default());
    }

    #[test]
    fn side_requests_are_answered_locally_unless_the_policy_says_not() {
        let policy = parse("mode = \"summarizer\"").expect("valid");
        assert!(policy.server.local_side_requests);
        let policy =
            parse("mode = \"summarizer\"\n[server]\nlocal_side_requests = false").expect("valid");
        assert!(!policy.server.local_side_requests);
        assert!(parse("mode = \"summarizer\"\n[server]\nlocal_side_requests = \"no\"").is_err());
    }

    #[test]
    fn relative_paths_resolve_against_the_policy_directory() {
        let policy = parse(&format!(
            "mode = \"summarizer\"\n[components.envelope]\npath = \"c/e.wasm\"\nsha256 = \"{}\"",
            "AB".repeat(32)
        ))
        .expect("valid");
        let config = policy.engine_config();
        let location = config.location(TransformKind::Envelope);
        assert_eq!(location.path(), Some(Path::new("/etc/bridge/c/e.wasm")));
        assert_eq!(location.pin.as_deref(), Some("ab".repeat(32).as_str()));
    }

    #[test]
    fn a_policy_of_another_mode_or_with_its_sections_is_refused() {
        let error = parse("mode = \"companion\"").expect_err("companion policy");
        assert!(
            error.to_string().contains("not a summarizer policy"),
            "{error}"
        );
        let error =
            parse("mode = \"summarizer\"\n[outpost]\nmax_sessions = 2").expect_err("foreign");
        assert!(
            error
                .to_string()
                .contains("[outpost] belongs to the outpost mode"),
            "{error}"
        );
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
