//! Hot swap under load: every transform is swapped back and forth between the real component
//! and its contract-compatible, byte-different twin while 64 clients send requests to a
//! running bridge. No request may fail, and every response must be one version's whole
//! rendering of each call (never a half-swapped one) with the same content.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::bridge::{HttpResponse, TestBridge};
use devin_bridge_engine::{TransformKind, Transforms};
use serde_json::{json, Value};

const CLIENTS: usize = 64;
/// Requests each client sends at least; it goes on (up to `MAX_REQUESTS_PER_CLIENT`) until
/// `MIN_OVERLAPPING_SWAPS` swaps happened while requests ran, however fast they are served.
const REQUESTS_PER_CLIENT: usize = 10;
const MAX_REQUESTS_PER_CLIENT: usize = 200;
const MIN_OVERLAPPING_SWAPS: usize = 4;
const SWAPS: usize = 20;

/// The four kinds of request, each exercising a different set of transforms.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// model-alias, serializer, agent, envelope (text), sse stream.
    StreamText,
    /// model-alias, serializer, agent, envelope (tool call), sse JSON body.
    JsonTool,
    /// serializer only.
    CountTokens,
    /// model-alias list.
    Models,
}

const KINDS: [Kind; 4] = [
    Kind::StreamText,
    Kind::JsonTool,
    Kind::CountTokens,
    Kind::Models,
];

fn tools() -> Value {
    let schema = |required: &[&str]| {
        let properties: serde_json::Map<String, Value> = required
            .iter()
            .map(|name| (name.to_string(), json!({"type": "string"})))
            .collect();
        json!({"type": "object", "properties": properties, "required": required})
    };
    json!([
        {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}}, "required": ["command"]}},
        {"name": "Read", "input_schema": schema(&["file_path"])},
        {"name": "Edit", "input_schema": schema(&["file_path", "old_string", "new_string"])},
    ])
}

fn send(addr: std::net::SocketAddr, kind: Kind) -> HttpResponse {
    let (method, path, body) = match kind {
        Kind::StreamText => (
            "POST",
            "/v1/messages",
            json!({"model": "devin-cli-agentic/swe-1-7", "max_tokens": 64, "stream": true,
                   "messages": [{"role": "user", "content": "Say hello. [mock:text]"}]}),
        ),
        Kind::JsonTool => (
            "POST",
            "/v1/messages",
            json!({"model": "devin-cli-agentic/swe-1-7", "max_tokens": 64, "tools": tools(),
                   "messages": [{"role": "user", "content": "Fix the failing test."}]}),
        ),
        Kind::CountTokens => (
            "POST",
            "/v1/messages/count_tokens",
            json!({"model": "devin-cli-agentic/swe-1-7", "tools": tools(),
                   "messages": [{"role": "user", "content": "Fix the failing test."}]}),
        ),
        Kind::Models => ("GET", "/v1/models", Value::Null),
    };
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    common::bridge::request(addr, method, path, &[], &body)
}

/// The `msg_...` id of a response body, if it has one.
fn message_id(body: &str) -> Option<String> {
    let start = body.find("\"msg_")? + 1;
    let id: String = body[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    Some(id)
}

/// A body split into SSE event blocks (each with its terminating blank line).
fn blocks(body: &str) -> Vec<&str> {
    body.split_inclusive("\n\n").collect()
}

/// One version's reference answer to one kind of request.
struct Reference {
    body: String,
}

impl Reference {
    /// The reference body with its message id replaced by `id`.
    fn with_id(&self, id: Option<&str>) -> String {
        match (message_id(&self.body), id) {
            (Some(own), Some(id)) => self.body.replace(&own, id),
            _ => self.body.clone(),
        }
    }
}

/// What a response must be: each call's output from one of the two versions.
fn check(
    kind: Kind,
    response: &HttpResponse,
    real: &Reference,
    twin: &Reference,
) -> Result<&'static str, String> {
    if response.status != 200 {
        return Err(format!("status {}: {}", response.status, response.body));
    }
    let id = message_id(&response.body);
    let (real, twin) = (real.with_id(id.as_deref()), twin.with_id(id.as_deref()));
    match kind {
        Kind::StreamText => {
            let (got, real, twin) = (blocks(&response.body), blocks(&real), blocks(&twin));
            let is_ping = |block: &str| block.starts_with("event: ping\n");
            let start = got.first().ok_or("empty stream")?;
            let start_version = if *start == real[0] {
                "real"
            } else if *start == twin[0] {
                "twin"
            } else {
                return Err(format!("message_start from neither version: {start:?}"));
            };
            let rest: Vec<&str> = got[1..].iter().copied().filter(|b| !is_ping(b)).collect();
            for ping in got[1..].iter().filter(|b| is_ping(b)) {
                if serde_json::from_str::<Value>(
                    ping.trim_end()
                        .trim_start_matches("event: ping\ndata:")
                        .trim(),
                )
                .map(|v| v != json!({"type": "ping"}))
                .unwrap_or(true)
                {
                    return Err(format!("bad ping {ping:?}"));
                }
            }
            let tail = |blocks: &[&str]| -> String {
                blocks[1..]
                    .iter()
                    .filter(|b| !is_ping(b))
                    .copied()
                    .collect()
            };
            let rest: String = rest.concat();
            if rest != tail(&real) && rest != tail(&twin) {
                return Err(format!("stream tail from neither version: {rest:?}"));
            }
            Ok(start_version)
        }
        Kind::JsonTool | Kind::Models | Kind::CountTokens => {
            if response.body == real {
                Ok("real")
            } else if response.body == twin {
                Ok("twin")
            } else {
                Err(format!("body from neither version: {}", response.body))
            }
        }
    }
}

fn swap_all(transforms: &Transforms, bytes: &dyn Fn(TransformKind) -> Arc<Vec<u8>>) {
    for kind in TransformKind::ALL {
        transforms
            .swap(kind, &bytes(kind), format!("{kind} reference"))
            .unwrap_or_else(|error| panic!("{kind}: {error}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn swapping_every_transform_under_64_clients_fails_no_request_and_mixes_no_call() {
    let bridge = TestBridge::start("max_concurrent_turns = 8\nqueue_timeout_ms = 120000", "").await;
    let transforms = bridge.bridge.transforms().clone();
    let addr = bridge.addr;
    let twin = Arc::new(devin_bridge_test_artifacts::TWIN.bytes());
    let real: Vec<Arc<Vec<u8>>> = TransformKind::ALL
        .iter()
        .map(|kind| Arc::new(std::fs::read(common::component(kind.name())).expect("component")))
        .collect();
    let real_of = {
        let real = real.clone();
        move |kind: TransformKind| {
            real[TransformKind::ALL
                .iter()
                .position(|k| *k == kind)
                .unwrap_or(0)]
            .clone()
        }
    };
    // A transform the twin has no version of (a new one) keeps its real component.
    let twinned = TransformKind::ALL
        .map(|kind| devin_bridge_test_artifacts::TWIN.exports_transform(kind.name()));
    let twin_of = {
        let twin = twin.clone();
        let real_of = real_of.clone();
        move |kind: TransformKind| {
            if twinned[kind.index()] {
                twin.clone()
            } else {
                real_of(kind)
            }
        }
    };

    // Reference answers of each version, served by that version alone.
    let references = tokio::task::spawn_blocking({
        let transforms = transforms.clone();
        let (real_of, twin_of) = (real_of.clone(), twin_of.clone());
        move || {
            let mut out = Vec::new();
            for version in [&real_of as &dyn Fn(TransformKind) -> Arc<Vec<u8>>, &twin_of] {
                swap_all(&transforms, version);
                out.push(
                    KINDS
                        .iter()
                        .map(|kind| {
                            let response = send(addr, *kind);
                            assert_eq!(
                                response.status, 200,
                                "{kind:?} reference: {}",
                                response.body
                            );
                            Reference {
                                body: response.body,
                            }
                        })
                        .collect::<Vec<_>>(),
                );
            }
            swap_all(&transforms, &real_of);
            out
        }
    })
    .await
    .expect("references");
    let (real_refs, twin_refs) = (&references[0], &references[1]);
    for (index, kind) in KINDS.iter().enumerate() {
        if matches!(kind, Kind::CountTokens) {
            assert_eq!(
                real_refs[index].body, twin_refs[index].body,
                "count_tokens is rendered by the host"
            );
        } else {
            assert_ne!(
                real_refs[index].body, twin_refs[index].body,
                "{kind:?}: the twin must differ in bytes"
            );
        }
    }
    let references = Arc::new(references);

    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let overlapping = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let swapper = std::thread::spawn({
        let (transforms, done, stop) = (transforms.clone(), done.clone(), stop.clone());
        let overlapping = overlapping.clone();
        let (real_of, twin_of) = (real_of.clone(), twin_of.clone());
        move || {
            let mut during_load = 0;
            for round in 0..SWAPS {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let kind = TransformKind::ALL[round % 4];
                let bytes = if (round / 4) % 2 == 0 {
                    twin_of(kind)
                } else {
                    real_of(kind)
                };
                transforms
                    .swap(kind, &bytes, format!("round {round}"))
                    .unwrap_or_else(|error| panic!("swap {round} ({kind}): {error}"));
                // Requests have been served and the clients have not all stopped.
                if done.load(Ordering::Relaxed) > 0 && !stop.load(Ordering::Relaxed) {
                    during_load += 1;
                    overlapping.store(during_load, Ordering::Relaxed);
                }
                // Paced so that the swaps spread over the requests rather than finishing first.
                std::thread::sleep(Duration::from_millis(40));
            }
            during_load
        }
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (references, done) = (references.clone(), done.clone());
            let overlapping = overlapping.clone();
            std::thread::spawn(move || {
                let mut versions = Vec::new();
                for request in 0..MAX_REQUESTS_PER_CLIENT {
                    if request >= REQUESTS_PER_CLIENT
                        && overlapping.load(Ordering::Relaxed) >= MIN_OVERLAPPING_SWAPS
                    {
                        break;
                    }
                    let index = (client + request) % KINDS.len();
                    let kind = KINDS[index];
                    let response = send(addr, kind);
                    let version = check(
                        kind,
                        &response,
                        &references[0][index],
                        &references[1][index],
                    )
                    .unwrap_or_else(|error| {
                        panic!("client {client} request {request} ({kind:?}): {error}")
                    });
                    versions.push(version);
                    done.fetch_add(1, Ordering::Relaxed);
                }
                versions
            })
        })
        .collect();
    let mut seen = std::collections::BTreeMap::new();
    let mut sent = 0;
    for client in clients {
        for version in client.join().expect("a request failed or was inconsistent") {
            *seen.entry(version).or_insert(0usize) += 1;
            sent += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps_during_load = swapper.join().expect("a swap failed");
    let elapsed = started.elapsed();
    eprintln!(
        "{sent} requests from {CLIENTS} clients in {:.1} s; {swaps_during_load} swaps during the load; versions seen {seen:?}",
        elapsed.as_secs_f64()
    );
    assert_eq!(done.load(Ordering::Relaxed), sent);
    assert!(sent >= CLIENTS * REQUESTS_PER_CLIENT, "{sent} requests");
    assert!(
        swaps_during_load >= MIN_OVERLAPPING_SWAPS,
        "only {swaps_during_load} swaps overlapped the requests"
    );
    assert_eq!(
        seen.len(),
        2,
        "responses of both versions must have been served: {seen:?}"
    );
    assert!(
        elapsed < Duration::from_secs(300),
        "the run took {elapsed:?}"
    );
    bridge.stop().await;
}
