//! `cargo xtask bench turns`: what Claude Code costs a Devin account. The pinned Claude Code
//! runs tasks against a `devin-bridge serve` with the offline agent, and the table counts the
//! requests it sent by kind (main turns, subagent turns, tool-less side requests, resends:
//! the bridge's `/metrics`) and the agent turns they cost (the offline agent's log: every
//! prompt it got is one Devin turn a real account would pay for).
//!
//! Each task runs twice: `before`, with the bridge's savings off (`[server]
//! local_side_requests = false`, `resend_grace_ms = 0`, `resend_window_ms = 0`: every request
//! is an agent turn, as it was), and `after`, with the defaults. The tasks:
//! - `demo -p`: the end-to-end demo (fix `math.js`) with `claude -p`, with
//!   `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` as `client-env` sets it;
//! - `demo tui`: the same task typed into the interactive Claude Code (in tmux), once with that
//!   variable and once without it (then Claude Code also asks for a session title);
//! - `subagent -p`: a task the agent delegates with Claude Code's `Agent` tool;
//! - `demo -p, slow agent`: every agent takes 4 s to start, longer than Claude Code's request
//!   timeout (`API_TIMEOUT_MS=2500`), so Claude Code gives up on each request and sends it
//!   again.
//!
//! The goal: no agent turn for a request that needs no model, and no turn run twice. Counts
//! are exact, not timings, so one run of each suffices.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure aborts the run

mod claude_tasks;

use claude_tasks::{claude_version, run, Bridge, Client, Task, DEMO_PRINT, SUBAGENT_PRINT};
use devin_bridge_test_support::claude::claude_code;
use devin_bridge_test_support::terminal::tmux;

const TASKS: [Task; 5] = [
    DEMO_PRINT,
    Task {
        name: "demo tui, essential only",
        client: Client::Terminal,
        ..DEMO_PRINT
    },
    Task {
        name: "demo tui, all traffic",
        client: Client::Terminal,
        essential_only: false,
        ..DEMO_PRINT
    },
    SUBAGENT_PRINT,
    Task {
        name: "demo -p, slow agent",
        slow_agent: true,
        ..DEMO_PRINT
    },
];

fn main() {
    let claude = claude_code();
    let tmux = tmux();
    println!("Claude Code {}", claude_version(&claude));
    println!(
        "{:<26} {:<7} {:>5} {:>9} {:>5} {:>6} {:>8} {:>12} {:>5} {:>6}",
        "task",
        "bridge",
        "main",
        "subagent",
        "side",
        "local",
        "resends",
        "agent turns",
        "done",
        "secs"
    );
    let mut results = Vec::new();
    for task in &TASKS {
        for bridge in [Bridge::Before, Bridge::After] {
            let counts = run(&claude, &tmux, task, bridge, None);
            println!(
                "{:<26} {:<7} {:>5} {:>9} {:>5} {:>6} {:>8} {:>12} {:>5} {:>6.1}",
                task.name,
                bridge.name(),
                counts.main_turns,
                counts.subagent_turns,
                counts.side_requests,
                counts.side_local,
                counts.resends,
                counts.agent_turns,
                if counts.done { "yes" } else { "NO" },
                counts.seconds
            );
            results.push((task, bridge, counts));
        }
    }
    println!();
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    for (task, bridge, counts) in &results {
        if *bridge != Bridge::After {
            continue;
        }
        // Every request that needs the model is one agent turn; a side request answered
        // locally and a resend cost none.
        let needed =
            counts.main_turns + counts.subagent_turns + counts.side_requests - counts.side_local;
        let ok = counts.done && counts.agent_turns == needed;
        println!(
            "goal: {}: every agent turn answers a request that needs the model, none twice: {} agent turns for {} such requests ({} side requests answered locally, {} resends joined)  {}",
            task.name,
            counts.agent_turns,
            needed,
            counts.side_local,
            counts.resends,
            verdict(ok)
        );
    }
}
