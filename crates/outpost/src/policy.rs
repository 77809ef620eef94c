//! The outpost policy: `mode = "outpost"` and its `[outpost]` section, beside the sections every mode
//! has (`[components]`, `[limits]`, `[engine]`, `[log]`).
//!
//! Parsing is strict (`deny_unknown_fields` everywhere): a misspelt key is an error at load,
//! never a silently ignored setting; a section of another mode is refused by name.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use devin_bridge_policy::{Mode, ModePolicy, PolicyError};

devin_bridge_policy::mode_policy! {
    /// A whole outpost policy file.
    pub struct OutpostPolicy {
        #[serde(default)]
        pub outpost: OutpostSection,
    }
}

impl ModePolicy for OutpostPolicy {
    const MODE: Mode = Mode::Outpost;

    devin_bridge_policy::common_sections_access!();

    fn validate_own(&self) -> Result<(), PolicyError> {
        let outpost = &self.outpost;
        if outpost.max_sessions == 0 || outpost.max_sessions > 256 {
            return Err(self.origin.invalid(format!(
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
            return Err(self.origin.invalid(
                "outpost intervals and timeouts must be positive and its size caps at least 4096 bytes",
            ));
        }
        Ok(())
    }
}

/// `[outpost]`: `devin-bridge outpost start`, a worker that serves Devin Outposts sessions from
/// a fleet queue. Flags win over the environment variables (named in
/// `settings.rs` beside this module), which win over this section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutpostSection {
    /// The outpost whose queue is served, by name or id (`--outpost`); unset: the account's
    /// only outpost, or (with several, stdin a terminal) the one picked at a prompt.
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
    /// The polling interval (`--poll-interval-secs`): when the watch has delivered no complete
    /// event and the queue has not been listed for this long, the queue is listed again (so a
    /// silent or stalled stream hides a session for about this long, and an idle worker sends
    /// one list request per interval); the claimable entries are re-checked this often; and
    /// each running session's entry is read this often.
    pub poll_interval_secs: u64,
    /// A watch stream that delivers no byte for this long is dropped and resumed from its
    /// cursor (the server ends streams within five minutes; this catches stalled ones). Polls
    /// while the stream is open do not reset it.
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
