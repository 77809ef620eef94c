//! What the benchmarks measure with and report: counts from the environment, percentiles,
//! `/proc` readings, the verdict of a goal, and the tools a Claude Code request declares.

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

/// The `p`th percentile (0-100) of sorted samples, by nearest rank: the smallest sample with
/// at least `p`% of the samples at or below it.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// PASS or MISS: the benchmarks report their goals, they never assert them.
pub fn verdict(pass: bool) -> &'static str {
    if pass {
        "PASS"
    } else {
        "MISS"
    }
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`), of this process when `pid` is
/// `None`; 0 when unreadable.
pub fn status_kib(pid: Option<u32>, field: &str) -> u64 {
    let file = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_owned(),
    };
    std::fs::read_to_string(file)
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix(field)
                    .and_then(|rest| rest.split_whitespace().next())
                    .and_then(|kib| kib.parse().ok())
            })
        })
        .unwrap_or(0)
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
