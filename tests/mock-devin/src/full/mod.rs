//! The full agent: `mock-devin acp` without `--agent-type`, the stand-in for `devin acp` that
//! companion mode drives. The rules and markers are documented in the crate's README; this
//! module holds the start-up checks and the reading loop's end.

pub mod catalog;
pub mod markers;
pub mod permissions;
pub mod server;
pub mod store;
pub mod turn;

use std::io::BufReader;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::{log, rpc, AGENT_VERSION};
use markers::Plan;

/// Exit status when `config.json` is missing or malformed (EX_CONFIG).
pub const CONFIG_EXIT: i32 = 78;
/// How long `[mock:late-close]` keeps the process alive after stdin ends.
pub const LATE_CLOSE: Duration = Duration::from_secs(60);

/// What the reading loop and the turn thread share.
pub struct Agent {
    pub out: rpc::Output,
    pub log: log::Log,
    /// Marker text used for prompts without markers (`MOCK_DEVIN_SCENARIO`).
    pub default_markers: Option<String>,
    /// Set when a hanging turn starts: stdin EOF no longer ends the process.
    pub hanging: AtomicBool,
    /// Set by `[mock:late-close]`: stdin EOF ends the process only after [`LATE_CLOSE`].
    pub late_close: AtomicBool,
    /// The ACP id of the model new sessions start with (a global `--model`, else the default).
    pub start_model: String,
    /// Which config options sessions offer besides the mode.
    pub features: server::Features,
}

/// `MOCK_DEVIN_SCENARIO` for the full agent: marker text (`[mock:refusal]`) or a bare marker
/// body (`refusal`, `fail quota`); it must name only known markers.
fn default_markers() -> Result<Option<String>, String> {
    let Some(value) = std::env::var_os("MOCK_DEVIN_SCENARIO").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .ok_or("MOCK_DEVIN_SCENARIO is not UTF-8")?
        .trim()
        .to_owned();
    let text = if value.contains("[mock:") {
        value
    } else {
        format!("[mock:{value}]")
    };
    let plan = Plan::parse(&text);
    if !plan.unknown.is_empty() || markers::marker_bodies(&text).is_empty() {
        return Err(format!(
            "MOCK_DEVIN_SCENARIO {text:?} names no known full-agent marker"
        ));
    }
    Ok(Some(text))
}

/// Serves the full agent on stdin/stdout; never returns.
pub fn run(log_path: Option<std::path::PathBuf>, startup: Duration, model: Option<String>) -> ! {
    let settings = default_markers().and_then(|markers| {
        Ok((
            markers,
            server::Features {
                model: !crate::switch("MOCK_DEVIN_NO_MODEL_OPTION")?,
                thought_level: crate::switch("MOCK_DEVIN_THOUGHT_LEVEL")?,
            },
        ))
    });
    let (default_markers, features) = match settings {
        Ok(settings) => settings,
        Err(message) => {
            eprintln!("mock-devin: {message}");
            std::process::exit(crate::USAGE_EXIT);
        }
    };
    let start_model = model.unwrap_or_else(|| catalog::DEFAULT_MODEL.to_owned());
    let log = log::Log::new(log_path);
    let here = std::env::current_dir()
        .map(|dir| dir.display().to_string())
        .unwrap_or_default();
    log.event(
        "start",
        None,
        json!({"version": AGENT_VERSION, "agent": "full", "args": ["acp"], "cwd": here,
               "model": start_model, "modelOption": features.model,
               "thoughtLevel": features.thought_level}),
    );
    // The real CLI refuses to start without its configuration.
    if let Err(err) = permissions::Permissions::load() {
        eprintln!("mock-devin: devin config: {err}");
        log.event("config_error", None, json!({}));
        std::process::exit(CONFIG_EXIT);
    }
    if !startup.is_zero() {
        std::thread::sleep(startup);
    }
    let agent = Arc::new(Agent {
        out: rpc::Output::stdout(),
        log,
        default_markers,
        hanging: AtomicBool::new(false),
        late_close: AtomicBool::new(false),
        start_model,
        features,
    });
    let mut input = BufReader::with_capacity(64 * 1024, std::io::stdin());
    server::Server::new(Arc::clone(&agent)).serve(&mut input);

    if agent.hanging.load(Ordering::SeqCst) {
        agent.log.event("eof_ignored", None, json!({}));
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    if agent.late_close.load(Ordering::SeqCst) {
        agent.log.event(
            "eof_late_close",
            None,
            json!({"seconds": LATE_CLOSE.as_secs()}),
        );
        std::thread::sleep(LATE_CLOSE);
    }
    agent.log.event("eof", None, json!({}));
    std::process::exit(0);
}
