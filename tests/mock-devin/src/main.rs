//! `mock-devin`: an offline stand-in for the Devin CLI: `devin acp --agent-type summarizer`
//! (summarizer mode), `devin acp` (the full agent that companion mode drives), `devin models
//! list` and `devin --version`.
//!
//! It speaks the Agent Client Protocol as the real CLI does (JSON-RPC 2.0, one message per
//! line on stdout, logs only on stderr) and can fail in every way the real one can. It is used
//! by the host's tests, the benchmark, the end-to-end test with the real Claude Code, and
//! `cargo xtask serve` when no `devin` CLI is installed.
//!
//! # Invocation
//! - `mock-devin acp --agent-type summarizer`: the summarizer agent (below).
//! - `mock-devin acp`: the full agent (see *The full agent*).
//! - `mock-devin acp` with `--cloud`, `--model ...`, `--refusal-fallback`, an `--agent-type`
//!   other than `summarizer`, or any other argument: a message on stderr and exit status 64
//!   (so a test proves the companion never passes them).
//! - `mock-devin --version`: prints `devin 3000.11.4 (mock-devin offline)`.
//! - `mock-devin models list [--format json]`: the model catalog (see [`full::catalog`]),
//!   exit 0 whether or not anyone is signed in.
//! - Any other argv: a message on stderr and exit status 64.
//!
//! # Protocol checks (summarizer)
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
//! # Scenario markers (summarizer)
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
//! | `[mock:two-tools]` | two envelopes, separated by a line break (on the repair attempt too) |
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
//! | `[mock:usage]` | a normal text answer; the result reports `usage {inputTokens: 4321, outputTokens: 42, totalTokens: 4363, cachedReadTokens: 4000, cachedWriteTokens: 300}` |
//! | `[mock:no-usage]` | a normal text answer; the result has no `usage` |
//! | `[mock:usage-update]` | a normal text answer with a `usage_update {used: 5555, size: 256000}` before the result, which has no `usage` |
//!
//! Without a marker the default scripted session (see [`script`]) leads a client through
//! fixing `add()` in `math.js` with the client's Bash, Read and Edit tools.
//! When the conversation holds a slash command of the Claude Code plugin (`plugins/devin`),
//! the scripted session instead plays that command's raw-argument transport handshake (see
//! [`plugin_script`]).
//!
//! # The full agent (`mock-devin acp`)
//! A scriptable stand-in for `devin acp`, run by companion mode with a private HOME and XDG_*
//! directories.
//!
//! | rule | behaviour |
//! |---|---|
//! | start-up | reads `$XDG_CONFIG_HOME/devin/config.json` (fallback `$HOME/.config/devin/config.json`); missing, over 1 MiB, not JSON, or bad `permissions`: a message on stderr and exit status 78 (the file is read again at every `session/new` and `session/load`, with the same rule) |
//! | `initialize` | needs `protocolVersion: 1` (else -32602); any other request before it gets -32600. Answers `loadSession: true`, no image/audio/embedded context, `agentInfo {name:"mock-devin", version:"3000.11.4"}` |
//! | `session/new {cwd, mcpServers}` | `cwd` an absolute path to an existing directory, `mcpServers` present and `[]` (else -32602). Signed out (no non-empty `WINDSURF_API_KEY` and no `$XDG_DATA_HOME/devin/credentials.toml`, a symlink counts, never read): -32000 `Authentication required`, errorKind `Unauthenticated`. Answers `{sessionId:"mock-<16 hex>", modes, configOptions}` |
//! | `modes` | `currentModeId` (`smart` at first), `availableModes` `accept-edits`, `smart`, `ask`, `plan`, `bypass` |
//! | `configOptions` | selects found by `category`: `mode` (the modes), `model` (ACP ids of every non-legacy catalog variant: `swe-2`, `swe-2-fast`, `kimi-k3`, `glm-5-2`, `muse-wonder`; `swe-2` at first), `thought_level` (`low`/`medium`/`high`, `medium` at first; absent while the model is `glm-5-2`), `speed` (`standard`/`fast`) |
//! | `session/set_mode {sessionId, modeId}` | known mode: `{}`; unknown mode -32602; unknown session -32002 |
//! | `session/set_config_option {sessionId, configId, value}` | `{configOptions}` (the whole updated list); unknown option or value (and `thought_level` under `glm-5-2`) -32602; unknown session -32002 |
//! | session database | every session is stored, after every change and turn, in `$XDG_DATA_HOME/devin/sessions/<id>.json` (fallback `$HOME/.local/share/devin/sessions/`), 0600 in 0700 directories: cwd, mode, model, thought level, speed and the transcript (prompts and replies) |
//! | `session/load {sessionId, cwd, mcpServers}` | the same checks as `session/new`; unknown session -32002 `Resource not found`; replays the transcript as `user_message_chunk` / `agent_message_chunk` updates, then answers `{modes, configOptions}` with the stored mode and model. If the stored first prompt holds `[mock:replay-after-answer]`, the last replay update comes after the answer |
//! | `session/prompt` | unknown session -32002, non-text blocks -32602, a second prompt while a turn runs -32600; otherwise a turn |
//! | `session/cancel` | ends the running turn of that session: `stopReason: "cancelled"`, agent_stopped cause `cancelled` |
//! | other requests | -32601 |
//! | stdin EOF | exit 0 at once (except `[mock:hang]`, and 60 s later after `[mock:late-close]`) |
//!
//! A turn sends an `available_commands_update`, `_cognition.ai/turn_stats {sessionId,
//! modelLabel}`, an `agent_thought_chunk`, the marker steps, the reply as at least two
//! `agent_message_chunk` updates, `_cognition.ai/agent_stopped {sessionId, cause, stats:
//! {inputTokens, outputTokens, modelLabel}}`, stores the turn, then answers `{stopReason,
//! usage: {inputTokens, outputTokens, totalTokens}}`. `modelLabel` is the selected variant's
//! catalog label (`SWE-2`). Token counts are `max(1, ceil(chars / 4))` of prompt and reply.
//!
//! ## Full-agent markers
//! Markers may appear anywhere in the prompt text and combine: steps run in prompt order
//! (at most 32), the first outcome marker decides the end, modifiers apply to the whole turn.
//! Unknown markers are ignored with a warning on stderr.
//!
//! | marker | kind | behaviour |
//! |---|---|---|
//! | (none) | outcome | reply `Devin mock: done. turns seen: N` (N = earlier prompts of the session, failed and cancelled ones included; a loaded session counts its stored ones), stopReason `end_turn`, cause `complete`; notes of the steps come first, one per line |
//! | `[mock:tool NAME KIND]` | step | `tool_call` (`_meta {"cognition.ai/toolName": NAME}`, `kind` KIND, a title, status `pending`), then `tool_call_update` `completed` |
//! | `[mock:tool-kind KIND]` | step | the same without `_meta` |
//! | `[mock:write PATH]` | step | `tool_call` `write` (kind `edit`, `rawInput.file_path` the absolute path; PATH is relative to the session's cwd or absolute, `..` resolved). Writes `mock write\n` only when the mode is `bypass` or `accept-edits`, a `Write(...)` allow rule covers the path and no `Write(...)`/`Edit(...)` deny rule matches it (checked on the path as given and with symlinks resolved); the reply gets a line `wrote: <path>` or `write denied: <path>` |
//! | `[mock:permission]` | step | `session/request_permission` (options `allow-once`, `reject-once`); outcome `cancelled`: the turn ends `cancelled` (agent_stopped cause `cancelled`); otherwise the reply gets `permission outcome: <outcome>` |
//! | `[mock:malformed]` | step | the stdout line `this is not json` mid-turn |
//! | `[mock:client-request METHOD]` | step | the request METHOD (`fs/read_text_file`, `fs/write_text_file` or `terminal/create`) to the client; the reply gets `client answered METHOD: error <code>` or `client answered METHOD: result <json>` |
//! | `[mock:extra-updates]` | step | `plan`, `usage_update`, `current_mode_update`, `config_option_update` and an unknown `mystery_update` session update |
//! | `[mock:fail auth]` | outcome | JSON-RPC -32000 `Authentication required`, errorKind `Unauthenticated` |
//! | `[mock:fail quota]` | outcome | -32603, errorKind `QuotaExceeded` |
//! | `[mock:fail rate_limited]` | outcome | -32603, errorKind `RateLimited` |
//! | `[mock:fail network]` | outcome | -32603, errorKind `NetworkError` |
//! | `[mock:fail server]` | outcome | -32603, errorKind `ServerError` |
//! | `[mock:fail error]` | outcome | a short reply, agent_stopped cause `error`, stopReason `end_turn` |
//! | `[mock:refusal]` | outcome | a short reply, stopReason `refusal` |
//! | `[mock:max-tokens]` | outcome | a partial reply, stopReason `max_tokens` |
//! | `[mock:exit]` | outcome | one chunk, then exit status 3 before the result |
//! | `[mock:hang]` | outcome | after turn_stats nothing more: never answers, ignores cancel and stdin EOF |
//! | `[mock:echo]` | outcome | the reply is the prompt text, verbatim (several text blocks joined by a blank line) |
//! | `[mock:env]` | outcome | the environment as sorted `NAME=VALUE` lines (`DEVIN_SANDBOX` like any other) |
//! | `[mock:review-json]` | outcome | prose, then the JSON object `{"verdict":"request_changes","summary":...,"findings":[{"severity":"high","file":"a.rs","line":3,"title":...,"body":...}]}` |
//! | `[mock:review-bad]` | outcome | prose, then `{"verdict":"maybe",...}` (not a valid review) |
//! | `[mock:review-none]` | outcome | prose only |
//! | `[mock:model LABEL]` | modifier | turn_stats and agent_stopped report `modelLabel` LABEL |
//! | `[mock:slow MS]` | modifier | waits MS ms (default 500, at most 600000) before the steps and reply, with a grandchild `mock-devin --grandchild-sleep S` in its process group (pid in the log as `grandchildPid`), killed when the wait ends; a cancel ends the wait |
//! | `[mock:cache-tokens]` | modifier | usage also carries `cachedReadTokens` |
//! | `[mock:late-close]` | modifier | a normal turn, but stdin EOF ends the process only 60 s later |
//! | `[mock:no-stopped]` | modifier | no `_cognition.ai/agent_stopped` |
//! | `[mock:replay-after-answer]` | modifier | none in the turn; see `session/load` |
//!
//! `mock-devin models list --format json` prints `{"families":[...]}` in the format of
//! `policies/models.json`: `swe-2` (variants `swe-2`, `swe-2-fast`), `kimi-k3` (alias
//! `kimi`), `glm-5.2` (variant `glm-5.2`, ACP id `glm-5-2`), `muse-wonder`, and `legacy-9`
//! (listed, but not offered in `session/new`).
//!
//! # Environment
//! - `MOCK_DEVIN_STARTUP_MS`: sleep this long before reading stdin (default 0).
//! - `MOCK_DEVIN_SLOW_MS`: the delay between `[mock:slow]` chunks (default 500).
//! - `MOCK_DEVIN_SCENARIO`: a marker name (`text` or `[mock:text]`) used when the prompt has
//!   no marker, instead of the default script (`script` names the script). For the full
//!   agent: marker text (`[mock:refusal]`) or a bare marker (`fail quota`) used when the
//!   prompt has no marker.
//! - `MOCK_DEVIN_IMAGES=1`: the summarizer agent advertises image prompts and accepts image
//!   blocks (the count and types are logged and reported by `[mock:images]`).
//! - `MOCK_DEVIN_REQUIRE_AUTH=1`: the summarizer agent needs `authenticate` (with the
//!   `windsurf-api-key` method and a non-empty `WINDSURF_API_KEY`) before `session/new`.
//! - `MOCK_DEVIN_LOG`: append one JSON line per action to this file
//!   (`{"at","event","scenario","pid",...}`; never prompt text or environment values). The
//!   full agent logs its argv flags and cwd, session ids and cwds, modes and config options
//!   set, steps, writes and replies (lengths, stop reasons, model labels); a refused argv is
//!   logged as `argv_refused` with the names of its flags.
//!
//! Invalid values are refused at start-up with exit status 64.

mod full;
mod log;
mod plugin_script;
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
pub const AGENT_VERSION: &str = "3000.11.4";
pub const USAGE_EXIT: i32 = 64;
/// Flags of the real `devin acp` that companion mode must never pass.
const FORBIDDEN_FLAGS: [&str; 3] = ["--cloud", "--model", "--refusal-fallback"];

/// Settings read from the environment at start-up.
pub struct Config {
    pub startup: Duration,
    pub slow: Duration,
    pub scenario: Option<Scenario>,
    pub log: Option<PathBuf>,
    /// `MOCK_DEVIN_IMAGES=1`: the summarizer agent advertises and accepts image prompts.
    pub images: bool,
    /// `MOCK_DEVIN_REQUIRE_AUTH=1`: the summarizer agent answers `session/new` with
    /// -32000 until `authenticate` succeeded.
    pub require_auth: bool,
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
        let images = match std::env::var("MOCK_DEVIN_IMAGES").as_deref() {
            Err(_) | Ok("") | Ok("0") => false,
            Ok("1") => true,
            Ok(other) => return Err(format!("MOCK_DEVIN_IMAGES must be 0 or 1, not {other:?}")),
        };
        let require_auth = match std::env::var("MOCK_DEVIN_REQUIRE_AUTH").as_deref() {
            Err(_) | Ok("") | Ok("0") => false,
            Ok("1") => true,
            Ok(other) => {
                return Err(format!(
                    "MOCK_DEVIN_REQUIRE_AUTH must be 0 or 1, not {other:?}"
                ))
            }
        };
        Ok(Self {
            images,
            require_auth,
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

/// What argv asks for.
#[derive(Debug, PartialEq, Eq)]
enum Invocation {
    Version,
    Grandchild(u64),
    Models {
        json: bool,
    },
    Summarizer,
    Full,
    /// Exit 64 with this message.
    Refused(String),
}

fn invocation(args: &[OsString]) -> Invocation {
    let Some(args) = args
        .iter()
        .map(|arg| arg.to_str())
        .collect::<Option<Vec<&str>>>()
    else {
        return Invocation::Refused("unsupported arguments: not UTF-8".to_owned());
    };
    match args.as_slice() {
        ["--version"] => Invocation::Version,
        // The grandchild of `[mock:grandchild]` and `[mock:slow]`: this binary again, so that
        // the scenario needs no `sleep` program (the bridge image has none).
        [GRANDCHILD_ARG, seconds] => Invocation::Grandchild(seconds.parse().unwrap_or(300)),
        ["models", "list"] => Invocation::Models { json: false },
        ["models", "list", "--format", "json"] | ["models", "list", "--format=json"] => {
            Invocation::Models { json: true }
        }
        ["acp"] => Invocation::Full,
        ["acp", "--agent-type", "summarizer"] => Invocation::Summarizer,
        ["acp", rest @ ..] => {
            let forbidden = rest.iter().find(|arg| {
                FORBIDDEN_FLAGS
                    .iter()
                    .any(|flag| *arg == flag || arg.starts_with(&format!("{flag}=")))
            });
            let agent_type = rest
                .iter()
                .position(|arg| *arg == "--agent-type")
                .map(|at| rest.get(at + 1).copied().unwrap_or("(missing)"));
            Invocation::Refused(match (forbidden, agent_type) {
                (Some(flag), _) => format!(
                    "unsupported arguments {args:?}: {flag} is refused (the full agent is run \
                     without --cloud, --model or --refusal-fallback)"
                ),
                (None, Some(kind)) => format!(
                    "unsupported arguments {args:?}: unknown --agent-type {kind:?} (only \
                     `summarizer`, or none for the full agent)"
                ),
                (None, None) => format!("unsupported arguments {args:?}"),
            })
        }
        _ => Invocation::Refused(format!(
            "unsupported arguments {args:?}; the supported invocations are `mock-devin acp`, \
             `mock-devin acp --agent-type summarizer`, `mock-devin models list [--format json]` \
             and `mock-devin --version`"
        )),
    }
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match invocation(&args) {
        Invocation::Version => {
            println!("devin {AGENT_VERSION} (mock-devin offline)");
            return;
        }
        Invocation::Grandchild(seconds) => {
            std::thread::sleep(Duration::from_secs(seconds));
            return;
        }
        Invocation::Models { json } => {
            if json {
                println!("{}", full::catalog::catalog_json());
            } else {
                print!("{}", full::catalog::catalog_text());
            }
            return;
        }
        Invocation::Refused(message) => {
            eprintln!("mock-devin: {message}");
            // The flags' names only (never their values), as evidence of what a caller passed.
            let flags: Vec<String> = args
                .iter()
                .filter_map(|arg| arg.to_str())
                .filter(|arg| arg.starts_with('-'))
                .map(|arg| arg.split('=').next().unwrap_or(arg).to_owned())
                .collect();
            log::Log::new(
                std::env::var_os("MOCK_DEVIN_LOG")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from),
            )
            .event(
                "argv_refused",
                None,
                json!({"flags": flags, "status": USAGE_EXIT}),
            );
            std::process::exit(USAGE_EXIT);
        }
        Invocation::Full => {
            let log = std::env::var_os("MOCK_DEVIN_LOG")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from);
            match millis("MOCK_DEVIN_STARTUP_MS", 0) {
                Ok(startup) => full::run(log, startup),
                Err(message) => {
                    eprintln!("mock-devin: {message}");
                    std::process::exit(USAGE_EXIT);
                }
            }
        }
        Invocation::Summarizer => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Invocation {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        invocation(&args)
    }

    #[test]
    fn argv_selects_the_agent_or_is_refused() {
        assert_eq!(parse(&["acp"]), Invocation::Full);
        assert_eq!(
            parse(&["acp", "--agent-type", "summarizer"]),
            Invocation::Summarizer
        );
        assert_eq!(parse(&["--version"]), Invocation::Version);
        assert_eq!(
            parse(&["models", "list", "--format", "json"]),
            Invocation::Models { json: true }
        );
        assert_eq!(
            parse(&["models", "list"]),
            Invocation::Models { json: false }
        );
        assert_eq!(parse(&[GRANDCHILD_ARG, "7"]), Invocation::Grandchild(7));
        for (args, says) in [
            (&["acp", "--cloud"][..], "--cloud is refused"),
            (&["acp", "--model", "swe-2"], "--model is refused"),
            (&["acp", "--model=swe-2"], "--model=swe-2 is refused"),
            (
                &["acp", "--refusal-fallback"],
                "--refusal-fallback is refused",
            ),
            (
                &["acp", "--agent-type", "default"],
                "unknown --agent-type \"default\"",
            ),
            (
                &["acp", "--agent-type"],
                "unknown --agent-type \"(missing)\"",
            ),
            (&["acp", "--verbose"], "unsupported arguments"),
            (
                &["models", "list", "--format", "yaml"],
                "unsupported arguments",
            ),
            (&[], "unsupported arguments"),
        ] {
            match parse(args) {
                Invocation::Refused(message) => {
                    assert!(message.contains(says), "{args:?}: {message}");
                    assert!(message.contains("unsupported arguments"), "{message}");
                }
                other => panic!("{args:?} gave {other:?}"),
            }
        }
    }
}
