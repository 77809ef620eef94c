//! `cargo xtask compat`: one Claude Code release (the executable `DEVIN_BRIDGE_CLAUDE_CODE`
//! names) against a `devin-bridge serve` with the offline agent, through the tasks of the turns
//! benchmark (`claude_tasks`), each with a recording proxy between Claude Code and the bridge:
//! - `demo -p`: the README demo (fix `math.js`) in print mode;
//! - `demo tui auto`: the same task typed into the interactive Claude Code in auto mode: done
//!   with no permission prompt and no notice that the gateway cannot check actions, every call
//!   judged by the bridge and none flagged;
//! - `subagent -p`: a task the agent delegates with Claude Code's `Agent` tool;
//! - `title tui`: the interactive demo with all of Claude Code's traffic, then a second
//!   message: the conversation sends session-title requests, each answered without an agent.
//!
//! `-- --out DIR` writes there `report.json` (each check: whether it passed, the requests by
//! kind, the agent turns, the side requests answered locally; the request fields the release
//! sent that the bridge does not read), the captured requests of each task (`*.jsonl`, for a
//! person to read: they hold the task's paths) and `fixture.json`: the release's requests
//! without anything secret or machine-specific, the form kept in
//! `tests/fixtures/claude-code/releases/`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure aborts the run

mod claude_tasks;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use claude_tasks::{claude_version, run, Bridge, Client, Counts, Task};
use claude_tasks::{DEMO_PRINT, SUBAGENT_PRINT};
use devin_bridge_test_support::claude::claude_code;
use devin_bridge_test_support::terminal::tmux;
use serde_json::{json, Map, Value};

/// The top-level request fields the bridge reads (the serializer component and the host); a
/// release's other fields are accepted and ignored.
const READ_FIELDS: [&str; 9] = [
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "stream",
    "output_config",
    "thinking",
    "safeguards",
];
/// Of `output_config`, the members the bridge reads.
const READ_OUTPUT_CONFIG: [&str; 2] = ["effort", "format"];

/// Header values kept in a fixture; every other header is kept by name only.
const KEPT_HEADER_VALUES: [&str; 5] = [
    "anthropic-beta",
    "anthropic-version",
    "content-type",
    "user-agent",
    "x-app",
];

/// Side requests of one purpose kept in a fixture, at most.
const SIDE_REQUESTS_KEPT: usize = 2;
/// A side request larger than this is kept by its shape only, as main requests are (a
/// classifier request carries the whole transcript: a fixture stays small).
const WHOLE_SIDE_REQUEST_BYTES: usize = 32 << 10;

/// The checks, in the matrix's order.
const CHECKS: [(&str, Task); 4] = [
    ("demo -p", DEMO_PRINT),
    (
        "demo tui auto",
        Task {
            name: "demo tui auto",
            client: Client::Terminal,
            auto_mode: true,
            ..DEMO_PRINT
        },
    ),
    ("subagent -p", SUBAGENT_PRINT),
    (
        "title tui",
        Task {
            name: "title tui",
            client: Client::Terminal,
            essential_only: false,
            follow_up: Some(("Say hello. [mock:text]", "Mock answer: the bridge works.")),
            ..DEMO_PRINT
        },
    ),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out = args
        .iter()
        .position(|arg| arg == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("claude-compat"));
    std::fs::create_dir_all(&out).expect("the output directory");
    let claude = claude_code();
    let tmux = tmux();
    let version = claude_version(&claude)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    println!("Claude Code {version} ({})", claude.display());
    let started = Instant::now();
    let mut checks = Map::new();
    let mut captured: Vec<(&str, Vec<Value>)> = Vec::new();
    for (name, task) in &CHECKS {
        let file = out.join(format!("{}.jsonl", name.replace(' ', "-")));
        let check_started = Instant::now();
        let counts = run(&claude, &tmux, task, Bridge::After, Some(&file));
        let requests = read_requests(&file);
        let cell = cell(
            name,
            &counts,
            &requests,
            check_started.elapsed().as_secs_f64(),
        );
        println!("{name}: {cell}");
        checks.insert((*name).to_owned(), cell);
        captured.push((name, requests));
    }
    let all: Vec<&Value> = captured.iter().flat_map(|(_, r)| r.iter()).collect();
    let report = json!({
        "release": version,
        "seconds": started.elapsed().as_secs_f64(),
        "checks": checks,
        "ignored_fields": ignored_fields(&all),
    });
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&report).expect("JSON"),
    )
    .expect("report.json");
    let fixture = fixture(&version, &captured);
    std::fs::write(
        out.join("fixture.json"),
        serde_json::to_string_pretty(&fixture).expect("JSON") + "\n",
    )
    .expect("fixture.json");
    println!(
        "{} in {:.0} s; report in {}",
        version,
        started.elapsed().as_secs_f64(),
        out.display()
    );
}

fn read_requests(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|request: &Value| {
            request["method"] == "POST"
                && request["path"]
                    .as_str()
                    .is_some_and(|path| path.starts_with("/v1/messages"))
                && !request["path"]
                    .as_str()
                    .is_some_and(|path| path.contains("count_tokens"))
        })
        .collect()
}

/// A request without tools (or with an empty list): a side request.
fn is_side_request(body: &Value) -> bool {
    body["tools"].as_array().is_none_or(Vec::is_empty)
}

/// A request that asks for a JSON object with a `title` (how this run labels a captured
/// session-title request, independently of how the bridge recognizes one).
fn asks_for_a_title(body: &Value) -> bool {
    is_side_request(body)
        && body["output_config"]["format"]["schema"]["properties"]["title"].is_object()
}

/// One cell of the matrix: whether the check passed, and what it cost.
fn cell(name: &str, counts: &Counts, requests: &[Value], seconds: f64) -> Value {
    let titles_sent = requests
        .iter()
        .filter(|request| asks_for_a_title(&request["body"]))
        .count() as u64;
    let needed =
        counts.main_turns + counts.subagent_turns + counts.side_requests - counts.side_local;
    let mut problems = Vec::new();
    if !counts.done {
        problems.push("not done".to_owned());
    }
    match name {
        "demo tui auto" => {
            if counts.prompted {
                problems.push("a permission prompt or a safeguard notice".to_owned());
            }
            if counts.verdicts_passed == 0 {
                problems.push("no call judged by the bridge".to_owned());
            }
            if counts.verdicts_flagged > 0 {
                problems.push(format!("{} calls flagged", counts.verdicts_flagged));
            }
        }
        "subagent -p" if counts.subagent_turns == 0 => {
            problems.push("no subagent turn".to_owned());
        }
        "title tui" => {
            if titles_sent == 0 {
                problems.push("no session-title request sent".to_owned());
            } else if counts.titles_local < titles_sent {
                problems.push(format!(
                    "{} of {titles_sent} title requests answered locally",
                    counts.titles_local
                ));
            }
        }
        _ => {}
    }
    json!({
        "pass": problems.is_empty(),
        "problems": problems,
        "agent_turns": counts.agent_turns,
        "needed_turns": needed,
        "main": counts.main_turns,
        "subagent": counts.subagent_turns,
        "side": counts.side_requests,
        "side_local": counts.side_local,
        "titles_sent": titles_sent,
        "titles_local": counts.titles_local,
        "resends": counts.resends,
        "verdicts_passed": counts.verdicts_passed,
        "verdicts_flagged": counts.verdicts_flagged,
        "seconds": seconds,
    })
}

/// The fields the requests sent that the bridge does not read: top-level ones by name, and
/// `output_config.NAME` for members of `output_config`.
fn ignored_fields(requests: &[&Value]) -> Vec<String> {
    let mut ignored = BTreeSet::new();
    for request in requests {
        let Some(body) = request["body"].as_object() else {
            continue;
        };
        for (name, value) in body {
            if !READ_FIELDS.contains(&name.as_str()) {
                ignored.insert(name.clone());
            }
            if name == "output_config" {
                for member in value.as_object().into_iter().flat_map(|o| o.keys()) {
                    if !READ_OUTPUT_CONFIG.contains(&member.as_str()) {
                        ignored.insert(format!("output_config.{member}"));
                    }
                }
            }
        }
    }
    ignored.into_iter().collect()
}

/// The release's fixture: the shape of every distinct main and subagent request (its header
/// names, fields and counts, not its content), and the side requests whole (at most
/// [`SIDE_REQUESTS_KEPT`] of each purpose, each with what the bridge should make of it; one
/// larger than [`WHOLE_SIDE_REQUEST_BYTES`] by its shape).
fn fixture(version: &str, captured: &[(&str, Vec<Value>)]) -> Value {
    let mut shapes = Vec::new();
    let mut seen_shapes = BTreeSet::new();
    let mut side = Vec::new();
    let mut side_kept: BTreeMap<String, usize> = BTreeMap::new();
    for (task, requests) in captured {
        for request in requests {
            let body = &request["body"];
            let headers = headers(&request["headers"]);
            let bytes = body.to_string().len();
            if is_side_request(body) && bytes <= WHOLE_SIDE_REQUEST_BYTES {
                let purpose = if asks_for_a_title(body) {
                    json!("session_title")
                } else {
                    Value::Null
                };
                let kept = side_kept.entry(purpose.to_string()).or_default();
                if *kept >= SIDE_REQUESTS_KEPT {
                    continue;
                }
                *kept += 1;
                side.push(json!({
                    "task": task,
                    "headers": headers,
                    "expect": {"purpose": purpose},
                    "body": sanitized(body.clone()),
                }));
                continue;
            }
            let kind = if is_side_request(body) {
                "side_request"
            } else if request["headers"]["x-claude-code-agent-id"].is_string() {
                "subagent_turn"
            } else {
                "main_turn"
            };
            let shape = json!({
                "kind": kind,
                "headers": headers,
                "fields": body.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
                "output_config": body["output_config"]
                    .as_object()
                    .map(|o| o.keys().cloned().collect::<Vec<_>>()),
                "system_blocks": body["system"].as_array().map(Vec::len),
                "tools": body["tools"].as_array().map(|tools| {
                    tools.iter().map(|t| t["name"].clone()).collect::<Vec<_>>()
                }),
            });
            if seen_shapes.insert(shape.to_string()) {
                let mut shape = shape;
                shape["task"] = json!(task);
                if kind == "side_request" {
                    // What it is, by the start of its last system block (Claude Code's own
                    // words), and its size.
                    let last = body["system"].as_array().and_then(|blocks| blocks.last());
                    let start: String = last
                        .and_then(|block| block["text"].as_str())
                        .unwrap_or_default()
                        .chars()
                        .take(80)
                        .collect();
                    shape["system_starts"] = json!(start);
                    shape["bytes"] = json!(bytes);
                }
                shapes.push(shape);
            }
        }
    }
    json!({
        "release": version,
        "recorded_by": "cargo xtask compat",
        "requests": shapes,
        "side_requests": side,
    })
}

/// A request's headers as a fixture keeps them: the values of [`KEPT_HEADER_VALUES`], every
/// other header by name only.
fn headers(headers: &Value) -> Value {
    let mut kept = Map::new();
    for (name, value) in headers.as_object().into_iter().flatten() {
        let value = if KEPT_HEADER_VALUES.contains(&name.as_str()) {
            value.clone()
        } else {
            json!("<value>")
        };
        kept.insert(name.clone(), value);
    }
    Value::Object(kept)
}

/// A side request without what is private or of this machine: `metadata.user_id` (a device
/// id, an account and a session id) with every letter and digit zeroed, and temporary paths.
fn sanitized(mut body: Value) -> Value {
    let zero = |text: &str| -> String {
        text.chars()
            .map(|c| if c.is_ascii_alphanumeric() { '0' } else { c })
            .collect()
    };
    if let Some(user_id) = body["metadata"]["user_id"].as_str() {
        // A JSON object in a string: its values zeroed, its keys kept.
        let zeroed = match serde_json::from_str::<Value>(user_id) {
            Ok(Value::Object(mut inner)) => {
                for value in inner.values_mut() {
                    if let Some(text) = value.as_str() {
                        *value = json!(zero(text));
                    }
                }
                Value::Object(inner).to_string()
            }
            _ => zero(user_id),
        };
        body["metadata"]["user_id"] = json!(zeroed);
    }
    let temp = std::env::temp_dir().display().to_string();
    let text = body.to_string();
    let text = scrub_temp_dirs(&text, &temp);
    serde_json::from_str(&text).expect("still JSON")
}

/// Every `TEMP/.tmpXXXXXX` (a `tempfile` directory) in `text` as `/tmp/project-root`.
fn scrub_temp_dirs(text: &str, temp: &str) -> String {
    let prefix = format!("{}/.tmp", temp.trim_end_matches('/'));
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&prefix) {
        out.push_str(&rest[..at]);
        let after = &rest[at + prefix.len()..];
        let name_len = after
            .char_indices()
            .find(|(_, c)| !c.is_ascii_alphanumeric())
            .map_or(after.len(), |(i, _)| i);
        out.push_str("/tmp/project-root");
        rest = &after[name_len..];
    }
    out.push_str(rest);
    out
}
