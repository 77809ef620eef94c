//! A bridge served in this process on 127.0.0.1:0 ([`InProcess`], which the benchmarks use
//! with their own policies), the tests' one with the offline agent ([`TestBridge`]), and a tiny
//! HTTP/1.1 client (raw sockets, so tests can also hang up mid-request).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use devin_bridge_agent::identity::AgentIdentity;
use devin_bridge_engine::Transforms;
use devin_bridge_policy::ModePolicy as _;
use devin_bridge_summarizer::policy::SummarizerPolicy;
use devin_bridge_summarizer::{self, Bridge};
use serde_json::Value;

pub use crate::artifacts::mock_devin;

/// The offline agent's log, relative to its working directory.
pub const AGENT_LOG: &str = "mock.jsonl";

/// A policy's `pass_env = [...]` line naming `names`.
pub fn pass_env_line(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("{name:?}")).collect();
    format!("pass_env = [{}]", quoted.join(", "))
}

/// Sets, once per test binary, what a logged-out offline agent needs: its log, the switch that
/// makes its home logged out (sessions are refused until it authenticates), and an API key.
/// Each bridge's `pass_env` decides which of them reach its agent.
pub fn signed_out_agent_environment() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        std::env::set_var("MOCK_DEVIN_LOG", AGENT_LOG);
        std::env::set_var("MOCK_DEVIN_LOGGED_OUT", "1");
        std::env::set_var("WINDSURF_API_KEY", "offline-test-key");
    });
}

/// `policies/models.json` with one more family, `ghost` (variant `ghost-1`), that the offline
/// agent's sessions do not offer, written into `dir`.
pub fn catalog_with_a_model_the_agent_lacks(dir: &Path) -> PathBuf {
    let catalog = crate::policies::catalog();
    let mut families: Value =
        serde_json::from_str(&std::fs::read_to_string(catalog).expect("catalog")).expect("json");
    if let Some(list) = families["families"].as_array_mut() {
        list.push(serde_json::json!({"family_label": "Ghost", "family_uid": "ghost", "slug": "ghost",
            "variants": [{"model_uid": "ghost-1", "label": "Ghost 1", "max_context_tokens": 100000}]}));
    }
    let file = dir.join("models.json");
    std::fs::write(&file, families.to_string()).expect("write the catalog");
    file
}

/// A summarizer bridge serving on 127.0.0.1:0 in this process, with the tasks a served bridge
/// runs beside the server: the prewarm pool's refill and, on the resident transport, the
/// reaper of idle sessions.
pub struct InProcess {
    pub addr: SocketAddr,
    pub bridge: Arc<Bridge>,
    pub refill: tokio::task::JoinHandle<()>,
    pub reaper: Option<tokio::task::JoinHandle<()>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl InProcess {
    /// Builds the bridge of `policy` on `transforms` and serves it, with the policy's
    /// connection limit and shutdown grace.
    pub async fn start(policy: &SummarizerPolicy, transforms: Arc<Transforms>) -> InProcess {
        let bridge = Bridge::from_policy(policy, transforms, &AgentIdentity::shared_with_host())
            .await
            .expect("bridge");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let refill = tokio::spawn(bridge.pool().clone().run_refill());
        let reaper = bridge
            .resident()
            .cloned()
            .map(|resident| tokio::spawn(resident.run_reaper()));
        let server = tokio::spawn(devin_bridge_summarizer::serve(
            bridge.clone(),
            listener,
            policy.server.max_connections,
            Duration::from_millis(policy.server.shutdown_grace_ms),
            async move {
                let _ = stopped.await;
            },
        ));
        InProcess {
            addr,
            bridge,
            refill,
            reaper,
            stop: Some(stop),
            server: Some(server),
        }
    }

    /// Stops the server (graceful) and waits up to 30 s for it.
    pub async fn stop_serving(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(30), server).await;
        }
    }
}

/// An [`InProcess`] bridge whose agent is the offline one, in a temporary sandbox home.
pub struct TestBridge {
    pub addr: SocketAddr,
    pub home: PathBuf,
    pub bridge: Arc<Bridge>,
    served: InProcess,
    _dir: tempfile::TempDir,
}

impl TestBridge {
    /// `server` and `agent` are extra TOML lines for those tables.
    pub async fn start(server: &str, agent: &str) -> TestBridge {
        Self::start_with_models(server, agent, "").await
    }

    /// [`TestBridge::start`] with extra `[models]` lines too.
    pub async fn start_with_models(server: &str, agent: &str, models: &str) -> TestBridge {
        Self::start_with_catalog(server, agent, models, &crate::policies::catalog()).await
    }

    /// [`TestBridge::start_with_models`] with the catalog file `catalog`.
    pub async fn start_with_catalog(
        server: &str,
        agent: &str,
        models: &str,
        catalog: &Path,
    ) -> TestBridge {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join(".sandbox").join("home");
        let text = crate::policies::policy_text(&format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nrequire_key = false\n{server}\n\
             [agent]\ncommand = {:?}\nhome = {:?}\noffline = true\n{agent}\n\
             [models]\ncatalog = {:?}\n{models}\n",
            mock_devin().display().to_string(),
            home.display().to_string(),
            catalog.display().to_string(),
        ));
        let policy =
            SummarizerPolicy::parse(&text, Path::new("test.toml"), dir.path()).expect("policy");
        let transforms = tokio::task::spawn_blocking(move || {
            Transforms::load_with(
                crate::engine::test_runtime(),
                crate::engine::test_cache(),
                &crate::policies::policy("").engine_config(),
            )
            .expect("components")
        })
        .await
        .expect("load");
        let served = InProcess::start(&policy, Arc::new(transforms)).await;
        TestBridge {
            addr: served.addr,
            home,
            bridge: served.bridge.clone(),
            served,
            _dir: dir,
        }
    }

    /// Stops the server (graceful) and waits for it.
    pub async fn stop(mut self) {
        self.served.stop_serving().await;
    }

    /// The offline agent's `event` log lines, when its `MOCK_DEVIN_LOG` is the relative
    /// [`AGENT_LOG`] (each agent writes it in its working directory: this bridge's home).
    pub fn agent_events(&self, event: &str) -> Vec<Value> {
        std::fs::read_to_string(self.home.join(AGENT_LOG))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|logged| logged["event"] == event)
            .collect()
    }

    /// Agent processes still running in this bridge's sandbox home.
    pub fn agents(&self) -> usize {
        processes_in(&self.home)
    }

    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> HttpResponse {
        let (addr, method, path, body) = (
            self.addr,
            method.to_owned(),
            path.to_owned(),
            body.to_owned(),
        );
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        tokio::task::spawn_blocking(move || request(addr, &method, &path, &headers, &body))
            .await
            .expect("client")
    }

    /// Sends a `/v1/messages` request on its own thread, for requests that must still be
    /// running while the test does something else.
    pub fn messages_in_background(&self, body: &Value) -> tokio::task::JoinHandle<HttpResponse> {
        let (addr, body) = (self.addr, body.to_string());
        tokio::task::spawn_blocking(move || request(addr, "POST", "/v1/messages", &[], &body))
    }

    /// A `/v1/messages` request in the conversation `session` (Claude Code's session header).
    pub async fn conversation_turn(&self, session: &str, body: &Value) -> HttpResponse {
        self.request(
            "POST",
            "/v1/messages?beta=true",
            &[("x-claude-code-session-id", session)],
            &body.to_string(),
        )
        .await
    }

    /// The cards of `GET /v1/models` (asserting that it answers 200).
    pub async fn model_cards(&self) -> Vec<Value> {
        let models = self.request("GET", "/v1/models", &[], "").await;
        assert_eq!(models.status, 200, "{}", models.body);
        models.json()["data"]
            .as_array()
            .expect("the model list's data")
            .clone()
    }

    pub async fn messages(&self, body: &Value) -> HttpResponse {
        self.request("POST", "/v1/messages?beta=true", &[], &body.to_string())
            .await
    }
}

pub use devin_bridge_agent::process::live_processes_in as processes_in;

/// Waits up to `limit` until at most `expected` agent processes run in `dir`; returns how
/// many remain.
pub async fn settle(dir: &Path, expected: usize, limit: Duration) -> usize {
    let started = Instant::now();
    loop {
        let count = processes_in(dir);
        if count <= expected || started.elapsed() >= limit {
            return count;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits up to `limit` for no agent process to remain in `dir`; returns how long it took.
pub async fn wait_no_agents(dir: &Path, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    (settle(dir, 0, limit).await == 0).then(|| started.elapsed())
}

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// SSE events as (event name, data JSON).
    pub fn events(&self) -> Vec<(String, Value)> {
        self.body
            .split("\n\n")
            .filter(|block| !block.trim().is_empty())
            .map(|block| {
                let mut name = String::new();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(rest) = line.strip_prefix("event: ") {
                        name = rest.to_owned();
                    } else if let Some(rest) = line.strip_prefix("data: ") {
                        data.push_str(rest);
                    }
                }
                let value: Value = serde_json::from_str(&data)
                    .unwrap_or_else(|e| panic!("bad SSE data ({e}): {block}"));
                (name, value)
            })
            .collect()
    }
}

/// One request with `Connection: close`, read to the end (chunked bodies decoded).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &str,
) -> HttpResponse {
    request_bytes(addr, method, path, headers, body.as_bytes())
}

/// [`request`] with a body that need not be text.
pub fn request_bytes(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write head");
    stream.write_all(body).expect("write body");
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> HttpResponse {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {text:?}"));
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        })
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    HttpResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            return out;
        }
        out.push_str(&after[..size]);
        rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
    }
}
