//! `devin-bridge companion`: delegate tasks and reviews to Devin's CLI, with job records and
//! typed failures.

pub mod commands;
pub mod failure;
pub mod jobs;
pub mod render;
pub mod settings;

pub use failure::CompanionError;

/// What a companion command prints: `json` with `--json`, else `text`; both to stdout.
#[derive(Debug, Clone)]
pub struct Output {
    pub text: String,
    pub json: serde_json::Value,
    pub exit: std::process::ExitCode,
}
