//! Agent turns for a task with independent reads: the offline agent's default script (pwd,
//! read `math.js` and `math.test.js`, edit, `npm test`, answer) driven through the bridge by a
//! client that answers every tool call the way Claude Code would, once with
//! `tool_choice.disable_parallel_tool_use` (one call per reply: how the bridge worked before it
//! took several calls in one reply) and once without. The client counts the agent turns until
//! the final answer. The counts are exact (not timings), so one run of each suffices.

use std::net::SocketAddr;

use bytes::Bytes;
use serde_json::{json, Value};

/// Most turns one conversation may take before it counts as stuck.
const MAX_TURNS: usize = 20;

/// What the client's tool produces for one call (the project is imaginary; the answers are
/// what the real tools would print for the end-to-end test's project).
fn run_tool(name: &str, input: &Value) -> String {
    let path = input["file_path"].as_str().unwrap_or_default();
    match name {
        "Bash" if input["command"] == "pwd" => "/bench/project".into(),
        "Bash" => "> node math.test.js\nall tests passed".into(),
        "Read" if path.ends_with("math.test.js") => {
            "     1\tconst assert = require('assert');\n     2\tassert.strictEqual(add(2, 3), 5);"
                .into()
        }
        "Read" => "     1\tfunction add(a, b) {\n     2\t  return a - b;\n     3\t}".into(),
        "Edit" => format!("The file {path} has been updated."),
        _ => "unknown tool".into(),
    }
}

/// The agent turns the scripted task takes; `parallel` false asks for one call per reply.
pub(crate) async fn scripted_task(addr: SocketAddr, parallel: bool) -> Result<usize, String> {
    let mut sender = super::connect(addr).await?;
    let mut messages =
        vec![json!({"role": "user", "content": "The test for add() fails. Fix it."})];
    for turn in 1..=MAX_TURNS {
        let mut body = json!({
            "model": "devin-cli-agentic/swe-1-7",
            "max_tokens": 1024,
            "tools": devin_bridge_test_support::bench::claude_code_tools(),
            "messages": messages,
        });
        if !parallel {
            body["tool_choice"] = json!({"type": "auto", "disable_parallel_tool_use": true});
        }
        let answer = super::exchange_json(&mut sender, &Bytes::from(body.to_string())).await?;
        let content = answer["content"].clone();
        if answer["stop_reason"] != "tool_use" {
            return if answer["stop_reason"] == "end_turn" {
                Ok(turn)
            } else {
                Err(format!("unexpected answer: {answer}"))
            };
        }
        let results: Vec<Value> = content
            .as_array()
            .into_iter()
            .flatten()
            .filter(|block| block["type"] == "tool_use")
            .map(|call| {
                json!({"type": "tool_result", "tool_use_id": call["id"],
                       "content": run_tool(call["name"].as_str().unwrap_or_default(), &call["input"])})
            })
            .collect();
        messages.push(json!({"role": "assistant", "content": content}));
        messages.push(json!({"role": "user", "content": results}));
    }
    Err(format!("no final answer after {MAX_TURNS} turns"))
}
