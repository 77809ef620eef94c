//! An offline double of the Devin Outposts fleet API, for testing the outpost worker over real
//! loopback HTTP.
//!
//! One server (bound to `127.0.0.1`) answers four groups of paths:
//! - `/opbeta/outposts/...`: the fleet API (queue entries, claims, list-then-watch, outposts),
//!   with Bearer auth (a machine token and an orchestrator token).
//! - `/static/devin-rs/remote/...`: the static `devin-remote` download server.
//! - `/gateway/...`: a plain HTTP long-poll stand-in for the outpost gateway, spoken by the
//!   `fake-devin-remote` binary of this crate.
//! - `/_control/...`: the test control API over HTTP (no auth), used by the standalone
//!   `fake-fleet` binary's clients. In-process tests use the methods of [`FakeFleet`] instead.
//!
//! Every state change of a queue entry bumps one global resource version and appends an event
//! to a retained log; lists and watches read that log, so a list's final cursor followed by a
//! watch never misses a change. Faults ([`Faults`]) make the server fail the way the real one
//! can: error bursts, a revoked token, duplicated or cut-off streams, a stream that stalls in
//! the middle of an event, a claim lost to another worker.

mod body;
mod control;
mod cursor;
mod faults;
mod gateway;
mod http;
mod queue;
mod server;
mod shared;
mod state;
mod static_files;
mod types;
mod watch;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use faults::Faults;
use shared::Shared;
pub use types::{
    ClaimEvent, ClaimEventKind, FleetConfig, Kind, RemoteBehaviour, RequestLog, SessionSpec,
    SessionStatus, Sha256File,
};

/// Stops the fleet when the last [`FakeFleet`] handle goes away (the tasks hold only
/// [`Shared`]).
struct StopOnDrop(Arc<Shared>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.shutdown.send_replace(true);
    }
}

/// A running fake fleet. Cloning gives another handle to the same fleet; the server stops
/// when the last handle is dropped or at [`FakeFleet::shutdown`].
#[derive(Clone)]
pub struct FakeFleet {
    shared: Arc<Shared>,
    _stop: Arc<StopOnDrop>,
}

impl FakeFleet {
    /// Starts a fleet on `127.0.0.1`, on a port the system picks.
    pub async fn start(config: FleetConfig) -> std::io::Result<FakeFleet> {
        FakeFleet::start_on(config, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts a fleet on `listen` (the standalone binary's `--listen`).
    pub async fn start_on(config: FleetConfig, listen: SocketAddr) -> std::io::Result<FakeFleet> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(state::State::default()),
            faults: Faults::default(),
            changes: tokio::sync::watch::Sender::new(0),
            shutdown: tokio::sync::watch::Sender::new(false),
            addr,
            started: Instant::now(),
        });
        tokio::spawn(server::serve(shared.clone(), listener));
        tokio::spawn(server::tick_loop(shared.clone()));
        Ok(FakeFleet {
            _stop: Arc::new(StopOnDrop(shared.clone())),
            shared,
        })
    }

    /// `http://127.0.0.1:PORT`: the base of `/opbeta/outposts/...`.
    pub fn api_url(&self) -> String {
        self.shared.api_url()
    }

    /// `http://127.0.0.1:PORT/static/devin-rs/remote`.
    pub fn static_base_url(&self) -> String {
        self.shared.static_base_url()
    }

    /// `http://127.0.0.1:PORT/gateway`: what claims hand out as `status.gateway_url`.
    pub fn gateway_url(&self) -> String {
        self.shared.gateway_url()
    }

    /// Creates an outpost (as the orchestrator would) and returns its id.
    pub fn create_outpost(&self, name: &str, platform: Option<&str>) -> String {
        self.shared
            .with_state(|state| state.create_outpost(name, platform, ""))
            .unwrap_or_else(|_| panic!("an outpost named {name:?} already exists"))["metadata"]
            ["outpost_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Queues a session on the outpost (a MODIFIED event) and returns its id.
    pub fn enqueue(&self, outpost_id: &str, spec: SessionSpec) -> String {
        self.shared
            .with_state(|state| state.enqueue(outpost_id, spec))
    }

    /// Tells the connected remote (or the next one to connect) to exit; the entry's
    /// `session_status` becomes `status` after the configured lag.
    pub fn end_session(&self, session_id: &str, status: SessionStatus) {
        let config = self.shared.config.clone();
        self.shared
            .with_state(|state| state.end_session(&config, session_id, status));
    }

    /// `session_status` becomes `terminated` now, but the remote is not told.
    pub fn terminate_silently(&self, session_id: &str) {
        self.shared
            .with_state(|state| state.set_session_status(session_id, SessionStatus::Terminated));
    }

    /// The entry disappears (a DELETED event); the remote is not told.
    pub fn delete_entry(&self, session_id: &str) {
        self.shared
            .with_state(|state| state.delete_entry(session_id));
    }

    /// The entry as the API shows it, or `None` once deleted.
    pub fn entry(&self, session_id: &str) -> Option<Value> {
        self.shared.with_state(|state| state.entry_json(session_id))
    }

    /// Claims, renewals, releases, expiries and conflicts of the session, oldest first.
    pub fn history(&self, session_id: &str) -> Vec<ClaimEvent> {
        self.shared.lock().history(session_id)
    }

    /// How many of the session's claim events are of `kind`.
    pub fn count_events(&self, session_id: &str, kind: ClaimEventKind) -> usize {
        self.history(session_id)
            .iter()
            .filter(|event| event.kind == kind)
            .count()
    }

    /// The JSON reports the session's fake remote posted to the gateway, oldest first.
    pub fn reports(&self, session_id: &str) -> Vec<Value> {
        self.shared.lock().reports(session_id)
    }

    /// When the session's remote first connected to the gateway.
    pub fn connected_at(&self, session_id: &str) -> Option<Instant> {
        self.shared.lock().record(session_id)?.connected_at
    }

    /// When the session's remote last dropped its gateway connection without being told to.
    pub fn disconnected_at(&self, session_id: &str) -> Option<Instant> {
        self.shared.lock().record(session_id)?.disconnected_at
    }

    /// When the session was enqueued.
    pub fn enqueued_at(&self, session_id: &str) -> Option<Instant> {
        self.shared
            .lock()
            .record(session_id)
            .map(|record| record.enqueued_at)
    }

    /// Every request answered so far (except the control API), oldest first.
    pub fn requests(&self) -> Vec<RequestLog> {
        self.shared.lock().requests.clone()
    }

    /// The faults to inject; settable at any time.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Publishes `devin-remote_<sha>_<suffix>` (and its `.sha256` file as chosen).
    pub fn publish_binary(
        &self,
        sha: &str,
        platform_suffix: &str,
        bytes: Vec<u8>,
        sha256_file: Sha256File,
    ) {
        self.shared
            .lock()
            .files
            .publish(sha, platform_suffix, bytes, sha256_file);
    }

    /// Makes `latest_<suffix>` answer `sha`.
    pub fn set_latest(&self, platform_suffix: &str, sha: &str) {
        self.shared.lock().files.set_latest(platform_suffix, sha);
    }

    /// How many GETs a static path got: the full path (`/static/devin-rs/remote/latest_linux_x64`)
    /// or just the file name (`latest_linux_x64`).
    pub fn downloads(&self, path: &str) -> usize {
        self.shared.lock().files.downloads(path)
    }

    /// Publishes the `fake-devin-remote` executable at `path` (see [`fake_remote_path`]) as
    /// `devin-remote_<sha>_<suffix>` with a correct `.sha256`, and makes it the latest.
    pub fn publish_fake_remote(
        &self,
        path: &std::path::Path,
        sha: &str,
        platform_suffix: &str,
    ) -> std::io::Result<()> {
        let bytes = std::fs::read(path)?;
        self.publish_binary(sha, platform_suffix, bytes, Sha256File::Correct);
        self.set_latest(platform_suffix, sha);
        Ok(())
    }

    /// Every cursor issued so far becomes expired (lists and watches answer 410 for it).
    pub fn expire_cursors_before_now(&self) {
        self.shared.with_state(|state| state.expire_cursors());
    }

    /// Polls `predicate` every 10 ms until it holds (true) or `timeout` passes (false).
    pub async fn wait_until(
        &self,
        timeout: Duration,
        predicate: impl Fn(&FakeFleet) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if predicate(self) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The statistics the control API's `stats` answers (requests, claims, connect latencies).
    pub fn stats(&self) -> Value {
        control::stats(&self.shared)
    }

    /// Stops the server: open streams and long-polls are cut.
    pub async fn shutdown(self) {
        self.shared.shutdown.send_replace(true);
        tokio::task::yield_now().await;
    }
}

/// Where the `fake-devin-remote` executable is: `$FAKE_DEVIN_REMOTE` if set, else next to the
/// running test binary's target directory (`target/<profile>/fake-devin-remote`, there once
/// `cargo build -p devin-bridge-fake-fleet --bins` has run). `None` if it is not there.
pub fn fake_remote_path() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("FAKE_DEVIN_REMOTE") {
        return Some(path.into());
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("fake-devin-remote"))
        .find(|candidate| candidate.is_file())
}
