//! `mock-devin`: an offline stand-in for `devin acp --agent-type summarizer`.
//!
//! It speaks the Agent Client Protocol as the real CLI does (JSON-RPC 2.0, one message per
//! line on stdout, logs only on stderr) and can fail in every way the real one can. It is used
//! by the host's tests, the benchmark, the end-to-end test with the real Claude Code, and
//! `cargo xtask serve` when no `devin` CLI is installed.
//!
//! # Invocation
//! - `mock-devin acp --agent-type summarizer`: serve ACP on stdin/stdout. Any other argv: a
//!   message on stderr and exit status 64.
//! - `mock-devin --version`: prints `mock-devin 3000.2.17 (offline)`.
//!
//! # Protocol checks
//! `initialize` needs `protocolVersion: 1` (else -32602); any other request before it gets
//! -32600. `session/new` needs an absolute `cwd` equal to the process's working directory that
//! is `/home/bridge` or lies under a `/.sandbox/` directory, and `mcpServers: []` (else
//! -32602). `session/set_mode` and `session/set_config_option` are refused (-32602).
//! `session/prompt` needs a known session (else -32002) and a text prompt containing the
//! `[Devin Summarizer Bridge]` and `[Execution Trace]` headers (else -32602 "missing bridge
//! framing"). Unknown requests get -32601, unknown notifications are ignored, lines that are
//! not JSON get -32700 with id null, lines over 64 MiB are discarded with -32700. On stdin EOF
//! the process exits 0 (except in the hanging scenarios).
//!
//! A normal turn sends an `available_commands_update`, a `_cognition.ai/turn_stats`
//! notification, the reply as at least two `agent_message_chunk` updates,
//! `_cognition.ai/agent_stopped`, then the result `{stopReason: "end_turn", usage}`.
//! `session/cancel` during a turn ends it with `{stopReason: "cancelled"}`.
//!
//! # Scenario markers
//! A marker in the last `[User]` section of the trace selects the behaviour (the first known
//! marker wins; unknown ones are ignored with a warning on stderr):
//!
//! | marker | behaviour |
//! |---|---|
//! | `[mock:text]` | final text `Mock answer: the bridge works.` |
//! | `[mock:tool]` | one envelope `<tool>{"name":"Bash","arguments":{"command":"echo mock","description":"Print a marker"}}</tool>` (without a Bash tool: the first declared tool with `{}`) |
//! | `[mock:narrate-then-tool]` | `I'll run the tests next to check the fix.`, then the envelope on the repair attempt |
//! | `[mock:narrate-always]` | the narration on both attempts |
//! | `[mock:malformed-then-tool]` | `<tool>{"name": "Bash", "arguments": {</tool>`, then the envelope on the repair attempt |
//! | `[mock:two-tools]` | two envelopes (on the repair attempt too) |
//! | `[mock:rpc-error]` | JSON-RPC error -32603 `Internal error`, data `{"cognition.ai/errorKind":"ServerError","retryable":true}` |
//! | `[mock:rpc-error=RateLimited]` | the same with errorKind `RateLimited` |
//! | `[mock:rpc-error=Unauthenticated]` | -32000 `Authentication required`, errorKind `Unauthenticated`, retryable false |
//! | `[mock:exit]` | one chunk, then exit status 3 before the result |
//! | `[mock:hang]` | sends nothing more, never answers, ignores stdin EOF and cancel |
//! | `[mock:tool-call]` | a `tool_call` update (`call_1`, `Run shell`, `execute`, `pending`), 30 s of "running it", then text |
//! | `[mock:tool-call-update]` | the same with `tool_call_update` |
//! | `[mock:legacy-update]` | the chunks through the legacy `$/update` method with flat params |
//! | `[mock:permission]` | `session/request_permission`, then text `permission outcome: <outcome>` (`error` if the client answered an error) |
//! | `[mock:agent-request]` | `fs/read_text_file` of `/etc/passwd`, then text `fs answer: <error code or result JSON>` |
//! | `[mock:malformed-frame]` | the stdout line `this is not json`, then a normal text answer |
//! | `[mock:huge]` | 4 MiB of text in 64 KiB chunks, then the result |
//! | `[mock:slow]` | 6 chunks, 500 ms apart (`MOCK_DEVIN_SLOW_MS`), then the result |
//! | `[mock:wrong-session]` | the chunks carry sessionId `someone-else` |
//! | `[mock:stray-response]` | the response `{"jsonrpc":"2.0","id":987654,"result":{}}`, then a normal text answer |
//! | `[mock:env]` | text listing the environment as sorted `NAME=VALUE` lines |
//! | `[mock:grandchild]` | spawns `sleep 300` in its process group, then hangs like `[mock:hang]` |
//! | `[mock:usage]` | a normal text answer (no-op marker) |
//!
//! Without a marker the default scripted session (see [`script`]) leads a client through
//! fixing `add()` in `math.js` with the client's Bash, Read and Edit tools.
//!
//! # Environment
//! - `MOCK_DEVIN_STARTUP_MS`: sleep this long before reading stdin (default 0).
//! - `MOCK_DEVIN_SLOW_MS`: the delay between `[mock:slow]` chunks (default 500).
//! - `MOCK_DEVIN_SCENARIO`: a marker name (`text` or `[mock:text]`) used when the prompt has
//!   no marker, instead of the default script (`script` names the script).
//! - `MOCK_DEVIN_LOG`: append one JSON line per action to this file
//!   (`{"at","event","scenario","pid",...}`; never prompt text or environment values).
//!
//! Invalid values are refused at start-up with exit status 64.

mod log;
mod probe;
mod rpc;
mod scenario;
mod script;
mod server;
mod trace;
mod turn;

use std::ffi::OsString;
use std::io::BufReader;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::scenario::Scenario;

pub const AGENT_NAME: &str = "mock-devin";
pub const AGENT_VERSION: &str = "3000.2.17";
const USAGE_EXIT: i32 = 64;

/// Settings read from the environment at start-up.
pub struct Config {
    pub startup: Duration,
    pub slow: Duration,
    pub scenario: Option<Scenario>,
    pub log: Option<PathBuf>,
}

/// What the reading loop and the turn thread share.
pub struct Shared {
    pub out: rpc::Output,
    pub log: log::Log,
    pub config: Config,
    /// Set when a hanging scenario starts: stdin EOF no longer ends the process.
    pub hanging: AtomicBool,
}

fn millis(name: &str, default: u64) -> Result<Duration, String> {
    match std::env::var_os(name) {
        None => Ok(Duration::from_millis(default)),
        Some(value) => value
            .to_str()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
            .ok_or_else(|| format!("{name} must be a whole number of milliseconds, not {value:?}")),
    }
}

impl Config {
    fn from_env() -> Result<Self, String> {
        let scenario = match std::env::var_os("MOCK_DEVIN_SCENARIO") {
            None => None,
            Some(value) if value.is_empty() => None,
            Some(value) => Some(value.to_str().and_then(Scenario::from_setting).ok_or_else(
                || {
                    format!(
                        "MOCK_DEVIN_SCENARIO {value:?} is not a scenario; use one of: script, {}",
                        scenario::MARKERS.join(", ")
                    )
                },
            )?),
        };
        Ok(Self {
            startup: millis("MOCK_DEVIN_STARTUP_MS", 0)?,
            slow: millis("MOCK_DEVIN_SLOW_MS", 500)?,
            scenario,
            log: std::env::var_os("MOCK_DEVIN_LOG")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        })
    }
}

/// `mock-devin --grandchild-sleep SECONDS`: what `[mock:grandchild]` leaves behind.
pub const GRANDCHILD_ARG: &str = "--grandchild-sleep";

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.len() == 1 && args[0] == "--version" {
        println!("{AGENT_NAME} {AGENT_VERSION} (offline)");
        return;
    }
    // The grandchild of `[mock:grandchild]`: this binary again, so that the scenario needs no
    // `sleep` program (the bridge image has none).
    if args.len() == 2 && args[0] == GRANDCHILD_ARG {
        let seconds = args[1].to_str().and_then(|s| s.parse().ok()).unwrap_or(300);
        std::thread::sleep(std::time::Duration::from_secs(seconds));
        return;
    }
    if args != ["acp", "--agent-type", "summarizer"] {
        eprintln!(
            "mock-devin: unsupported arguments {args:?}; the only supported invocations are \
             `mock-devin acp --agent-type summarizer` and `mock-devin --version`"
        );
        std::process::exit(USAGE_EXIT);
    }
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(message) => {
            eprintln!("mock-devin: {message}");
            std::process::exit(USAGE_EXIT);
        }
    };
    if !config.startup.is_zero() {
        std::thread::sleep(config.startup);
    }
    let shared = Arc::new(Shared {
        out: rpc::Output::stdout(),
        log: log::Log::new(config.log.clone()),
        config,
        hanging: AtomicBool::new(false),
    });
    shared.log.event(
        "start",
        shared.config.scenario.map(Scenario::name),
        json!({"version": AGENT_VERSION}),
    );

    let mut input = BufReader::with_capacity(64 * 1024, std::io::stdin());
    server::Server::new(Arc::clone(&shared)).serve(&mut input);

    if shared.hanging.load(Ordering::SeqCst) {
        shared.log.event("eof_ignored", None, json!({}));
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    shared.log.event("eof", None, json!({}));
    std::process::exit(0);
}
