//! Helpers shared by the benchmarks that run the host as processes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

/// A positive count from the environment, else `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v| *v > 0)
        .unwrap_or(default)
}

/// A release binary of this workspace: `$variable` if set, else `target/release/<name>`.
pub fn target_binary(variable: &str, name: &str) -> PathBuf {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/release")
                .join(name)
        })
}

/// The `p`th percentile (0-100) of sorted samples, nearest rank.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Claude Code's Bash, Read and Edit tools, as a request declares them (shortened
/// descriptions, the real schemas' shape).
pub fn claude_code_tools() -> Value {
    let tool = |name: &str, description: &str, properties: Value, required: &[&str]| {
        json!({
            "name": name,
            "description": description,
            "input_schema": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false
            }
        })
    };
    json!([
        tool(
            "Bash",
            "Executes a given bash command in a persistent shell session with optional timeout.",
            json!({
                "command": {"type": "string", "description": "The command to execute"},
                "timeout": {"type": "number", "maximum": 600000},
                "description": {"type": "string", "description": "What the command does, in 5-10 words"}
            }),
            &["command"],
        ),
        tool(
            "Read",
            "Reads a file from the local filesystem. The file_path must be an absolute path.",
            json!({
                "file_path": {"type": "string", "description": "The absolute path to the file to read"},
                "offset": {"type": "number"},
                "limit": {"type": "number"}
            }),
            &["file_path"],
        ),
        tool(
            "Edit",
            "Performs exact string replacements in files.",
            json!({
                "file_path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean", "default": false}
            }),
            &["file_path", "old_string", "new_string"],
        ),
    ])
}
