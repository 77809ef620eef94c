//! Logs on stderr, with a filter that can change while the host serves.
//!
//! The filter is `DEVIN_BRIDGE_LOG` (else `RUST_LOG`) when set; otherwise the policy's
//! `[log] filter` (default `info`), which SIGHUP can change. `DEVIN_BRIDGE_LOG_FORMAT=json`
//! switches to one JSON object per line.

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

/// The handle of the installed filter; unset if another subscriber was installed first.
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Why the log filter could not change.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("invalid log filter {filter:?}: {message}")]
    Invalid { filter: String, message: String },
    #[error("the log filter cannot change: {0}")]
    Reload(String),
}

/// The filter the environment sets, if any.
pub fn env_filter() -> Option<String> {
    std::env::var("DEVIN_BRIDGE_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
}

/// Installs the stderr subscriber: the environment's filter, else `info` until a policy says
/// otherwise.
pub fn init() {
    init_with_default("info");
}

/// [`init`] with another filter than `info` when the environment sets none: a one-shot
/// command that prints its own report keeps routine lines out of it (`error`), unless asked
/// for more (`-v`).
pub fn init_with_default(default: &str) {
    let text = env_filter().unwrap_or_else(|| default.to_owned());
    let filter = EnvFilter::try_new(&text).unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    // Colours only for a person at a terminal; files and pipes get plain text.
    let plain = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let json = std::env::var("DEVIN_BRIDGE_LOG_FORMAT").is_ok_and(|format| format == "json");
    let installed = if json {
        tracing_subscriber::registry()
            .with(filter)
            .with(plain.json())
            .try_init()
    } else {
        tracing_subscriber::registry()
            .with(filter)
            .with(plain)
            .try_init()
    };
    if installed.is_ok() {
        let _ = FILTER.set(handle);
    }
}

/// Puts a policy's filter in force, unless the environment sets the filter. Returns whether
/// it was applied.
pub fn apply_policy_filter(filter: &str) -> Result<bool, LogError> {
    if env_filter().is_some() {
        return Ok(false);
    }
    let parsed = EnvFilter::try_new(filter).map_err(|error| LogError::Invalid {
        filter: filter.to_owned(),
        message: error.to_string(),
    })?;
    match FILTER.get() {
        Some(handle) => handle
            .reload(parsed)
            .map(|()| true)
            .map_err(|error| LogError::Reload(error.to_string())),
        None => Ok(false),
    }
}
