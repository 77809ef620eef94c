//! Streaming benchmark: `cargo xtask bench stream`
//! (or `cargo bench -p devin-bridge --bench stream`).
//!
//! How soon a client sees the first text of a long answer. The offline agent's
//! `[mock:slow-long]` writes 4000 bytes in 40 chunks, 100 ms apart (3.9 s), logging each chunk
//! with its send time (`atMicros`) just before it sends it. An in-process bridge serves it on
//! the per-turn transport, with `[server] stream_text = true` and `false` side by side in one
//! run; a client sends a streamed request and notes the wall-clock time of the read that
//! brought its first `text_delta`. The row is that time minus the agent's first chunk's
//! (both clocks are this machine's), per turn, p50 and max; and, to show where the buffered
//! text waits, its arrival relative to the agent's last chunk (negative: before it).
//!
//! Goal (reported, never asserted; the bench exits 0 on MISS): with streaming on, the first
//! text byte reaches the client within 50 ms of the agent's first chunk. With streaming off it
//! arrives after the last chunk (about 3.9 s); the ratio says how much sooner streaming is.
//!
//! Environment: `STREAM_BENCH_TURNS` (turns per mode, default 5), `DEVIN_BRIDGE_MOCK_DEVIN`
//! (the offline agent; `cargo xtask bench stream` passes an optimised one),
//! `DEVIN_BRIDGE_COMPONENTS` (default `target/components`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure aborts the run

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use devin_bridge_test_support::bench::{env_usize, ms, percentile, verdict};
use devin_bridge_test_support::bridge::{pass_env_line, TestBridge, AGENT_LOG};
use serde_json::{json, Value};

const MODEL: &str = "devin-cli-agentic/swe-1-7";
/// The chunks of `[mock:slow-long]`.
const CHUNKS: u64 = 40;
const GOAL: Duration = Duration::from_millis(50);

fn now_micros() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    u64::try_from(since.as_micros()).expect("micros fit u64")
}

/// Sends one streamed `[mock:slow-long]` request in conversation `session`; returns the
/// wall-clock time (microseconds since the epoch) of the read that brought the first
/// `text_delta`, and the whole text the deltas carried.
fn first_text_delta(addr: SocketAddr, session: &str) -> (u64, String) {
    let body = json!({
        "model": MODEL,
        "max_tokens": 4096,
        "stream": true,
        "messages": [{"role": "user", "content": "Tell me a long story. [mock:slow-long]"}]
    })
    .to_string();
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nx-claude-code-session-id: {session}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut raw = String::new();
    let mut buffer = [0u8; 8192];
    let mut first = None;
    let mut text = String::new();
    loop {
        let read = stream.read(&mut buffer).expect("read");
        if read == 0 {
            break;
        }
        let at = now_micros();
        raw.push_str(std::str::from_utf8(&buffer[..read]).expect("UTF-8"));
        // Whole events only (chunk-size lines of the transfer encoding are skipped).
        while let Some(end) = raw.find("\n\n") {
            let block: String = raw.drain(..end + 2).collect();
            let data: String = block
                .lines()
                .filter_map(|line| line.strip_prefix("data: "))
                .collect();
            let Ok(data) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            if data["delta"]["type"] == "text_delta" {
                first.get_or_insert(at);
                text.push_str(data["delta"]["text"].as_str().unwrap_or_default());
            }
        }
    }
    (first.expect("a text_delta"), text)
}

/// The `atMicros` of the agent's `chunk` lines with this `index`, in log order.
fn chunk_times(bridge: &TestBridge, index: u64) -> Vec<u64> {
    bridge
        .agent_events("chunk")
        .iter()
        .filter(|chunk| chunk["index"] == index)
        .map(|chunk| chunk["atMicros"].as_u64().expect("atMicros"))
        .collect()
}

/// Per turn, sorted: the first text_delta's arrival after the agent's first chunk, and its
/// arrival relative to the agent's last chunk in ms (negative: before it was sent).
struct Turns {
    after_first_chunk: Vec<Duration>,
    from_last_chunk_ms: Vec<f64>,
}

fn run_mode(runtime: &tokio::runtime::Runtime, stream_text: bool, turns: usize) -> Turns {
    runtime.block_on(async {
        let bridge = TestBridge::start(
            &format!("stream_text = {stream_text}"),
            &format!("prewarm = 0\n{}", pass_env_line(&["MOCK_DEVIN_LOG"])),
        )
        .await;
        let mut arrivals = Vec::new();
        for turn in 0..turns {
            let addr = bridge.addr;
            let session = format!("stream-bench-{stream_text}-{turn}");
            let (at, text) = tokio::task::spawn_blocking(move || first_text_delta(addr, &session))
                .await
                .expect("client");
            assert!(
                text.starts_with("Sentence 01 of 40:") && text.contains("Sentence 40 of 40:"),
                "the whole answer: {text:?}"
            );
            arrivals.push(at);
        }
        let (firsts, lasts) = (chunk_times(&bridge, 1), chunk_times(&bridge, CHUNKS));
        assert_eq!(firsts.len(), turns, "one first chunk per turn");
        assert_eq!(lasts.len(), turns, "one last chunk per turn");
        bridge.stop().await;
        let mut after_first_chunk: Vec<Duration> = arrivals
            .iter()
            .zip(&firsts)
            .map(|(at, chunk)| Duration::from_micros(at.saturating_sub(*chunk)))
            .collect();
        after_first_chunk.sort();
        let mut from_last_chunk_ms: Vec<f64> = arrivals
            .iter()
            .zip(&lasts)
            .map(|(at, chunk)| (*at as f64 - *chunk as f64) / 1e3)
            .collect();
        from_last_chunk_ms.sort_by(f64::total_cmp);
        Turns {
            after_first_chunk,
            from_last_chunk_ms,
        }
    })
}

fn main() {
    // The agent logs to `mock.jsonl` in its working directory, the bridge's sandbox home.
    std::env::set_var("MOCK_DEVIN_LOG", AGENT_LOG);
    let turns = env_usize("STREAM_BENCH_TURNS", 5);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let on = run_mode(&runtime, true, turns);
    let off = run_mode(&runtime, false, turns);

    println!(
        "first text byte after the agent's first chunk (4000 bytes in {CHUNKS} chunks over 3.9 s, \
         {turns} turns per mode, per-turn transport)"
    );
    println!(
        "{:<16} {:>12} {:>12} {:>26}  goal",
        "mode", "p50 ms", "max ms", "vs the last chunk, p50 ms"
    );
    let row = |name: &str, turns: &Turns| {
        let p50 = percentile(&turns.after_first_chunk, 50.0);
        let max = turns.after_first_chunk.last().copied().unwrap_or_default();
        println!(
            "{name:<16} {:>12.1} {:>12.1} {:>+26.1}  {}",
            ms(p50),
            ms(max),
            turns.from_last_chunk_ms[turns.from_last_chunk_ms.len() / 2],
            if name == "streaming on" {
                format!("< {} ms: {}", GOAL.as_millis(), verdict(max < GOAL))
            } else {
                "(buffered: after the last chunk)".to_owned()
            }
        );
        p50
    };
    let on_p50 = row("streaming on", &on);
    let off_p50 = row("streaming off", &off);
    println!(
        "ratio off/on (p50): {:.0}x sooner with streaming",
        ms(off_p50) / ms(on_p50).max(0.001)
    );
}
