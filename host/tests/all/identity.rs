//! The agent never shares the host's identity: `devin-bridge serve` started as root switches
//! itself to `[server] user` keeping only CAP_SETUID, CAP_SETGID and CAP_KILL, and runs every
//! agent under `[agent] user`. A hostile turn (`[mock:probe]`) then tries to read the key file,
//! write the compile cache and connect to the control socket, and must be denied each time.
//!
//! These tests need root (CI and `cargo xtask test` run as root): they start processes under
//! other uids. Run as another user, they fail and say so.
//!
//! What the host and the agent run and read once they have their own uids is staged into the
//! test's directory, as a deployment installs it where those uids can read it (the container
//! image under `/opt/devin-bridge`): the binary, the offline agent and the model catalog. The
//! checkout itself may sit under a private directory (mode 0700, as `/root` is) that no other
//! uid can enter. The policies name no component files: the host runs the components built
//! into its binary, as the container's policies have it.

use crate::common;

use std::os::unix::fs::{chown, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::bridge::{mock_devin, request};
use common::policies::catalog;
use serde_json::{json, Value};

const HOST_UID: u32 = 10001;
const AGENT_UID: u32 = 10002;
const START_TIMEOUT: Duration = Duration::from_secs(120);

fn require_root() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the identity tests start processes under other uids and need root (run `cargo xtask test` as root)"
    );
}

/// The directory layout of a separated deployment, under a fresh temporary directory.
struct Layout {
    root: tempfile::TempDir,
}

impl Layout {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod root");
        let layout = Self { root };
        // What every uid of the test runs or reads, where every uid can.
        let staged = layout.path().join("staged");
        std::fs::create_dir(&staged).expect("staged");
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755))
            .expect("chmod staged");
        stage(
            Path::new(env!("CARGO_BIN_EXE_devin-bridge")),
            &layout.bridge(),
            0o755,
        );
        stage(&mock_devin(), &layout.mock_devin(), 0o755);
        stage(&catalog(), &layout.catalog(), 0o644);
        // The host's private directory: cache, control socket, key file.
        layout.private_dir(&layout.host_dir(), HOST_UID);
        layout.private_dir(&layout.host_dir().join("run"), HOST_UID);
        std::fs::write(layout.key_file(), "identity-test-key\n").expect("key");
        std::fs::set_permissions(layout.key_file(), std::fs::Permissions::from_mode(0o600))
            .expect("chmod key");
        chown(layout.key_file(), Some(HOST_UID), Some(HOST_UID)).expect("chown key");
        // The agent's home and TMPDIR belong to the agent.
        let sandbox = layout.path().join(".sandbox");
        std::fs::create_dir(&sandbox).expect("sandbox");
        std::fs::set_permissions(&sandbox, std::fs::Permissions::from_mode(0o755))
            .expect("chmod sandbox");
        layout.private_dir(&layout.agent_home(), AGENT_UID);
        layout.private_dir(&layout.agent_home().join("tmp"), AGENT_UID);
        layout
    }

    fn private_dir(&self, dir: &Path, uid: u32) {
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        chown(dir, Some(uid), Some(uid)).expect("chown");
    }

    fn path(&self) -> &Path {
        self.root.path()
    }
    fn bridge(&self) -> PathBuf {
        self.path().join("staged/devin-bridge")
    }
    fn mock_devin(&self) -> PathBuf {
        self.path().join("staged/mock-devin")
    }
    fn catalog(&self) -> PathBuf {
        self.path().join("staged/models.json")
    }
    fn host_dir(&self) -> PathBuf {
        self.path().join("host")
    }
    fn key_file(&self) -> PathBuf {
        self.host_dir().join("key")
    }
    fn cache_dir(&self) -> PathBuf {
        self.host_dir().join("cache")
    }
    fn control_socket(&self) -> PathBuf {
        self.host_dir().join("run/control.sock")
    }
    fn agent_home(&self) -> PathBuf {
        self.path().join(".sandbox/home")
    }

    /// Writes a policy readable by the host user; `offline` and the two users vary per test.
    fn policy(
        &self,
        server_user: Option<&str>,
        agent_user: Option<&str>,
        offline: bool,
    ) -> PathBuf {
        let mut server = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nrequire_key = true\napi_key_file = {:?}\n",
            self.key_file().display().to_string()
        );
        if let Some(user) = server_user {
            server.push_str(&format!("user = {user:?}\n"));
        }
        let mut agent = format!(
            "[agent]\ncommand = {:?}\nhome = {:?}\noffline = {offline}\nprewarm = 0\nturn_timeout_ms = 3000\nkill_grace_ms = 500\n",
            self.mock_devin().display().to_string(),
            self.agent_home().display().to_string(),
        );
        if let Some(user) = agent_user {
            agent.push_str(&format!("user = {user:?}\n"));
        }
        let text = format!(
            "mode = \"summarizer\"\n{server}{agent}[models]\ncatalog = {:?}\n[engine]\ncache_dir = {:?}\n[control]\nsocket = {:?}\n",
            self.catalog().display().to_string(),
            self.cache_dir().display().to_string(),
            self.control_socket().display().to_string(),
        );
        let file = self.path().join("policy.toml");
        std::fs::write(&file, text).expect("policy");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        file
    }
}

/// Puts `source` at `target` with `mode`: a hard link when the source's own mode already lets
/// every uid do what `mode` allows (the binary is large), else a copy given `mode`.
fn stage(source: &Path, target: &Path, mode: u32) {
    let source_mode = std::fs::metadata(source)
        .unwrap_or_else(|error| panic!("{}: {error}", source.display()))
        .permissions()
        .mode();
    let others = mode & 0o007;
    if source_mode & others == others && std::fs::hard_link(source, target).is_ok() {
        return;
    }
    std::fs::copy(source, target)
        .unwrap_or_else(|error| panic!("copying {}: {error}", source.display()));
    std::fs::set_permissions(target, std::fs::Permissions::from_mode(mode)).expect("chmod staged");
}

/// A spawned `devin-bridge serve`; killed on drop.
struct Served {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    addr: Option<std::net::SocketAddr>,
}

impl Served {
    /// Starts the layout's serve with `policy` (as root, or as `run_as` without capabilities)
    /// and waits until it listens or exits.
    fn start(layout: &Layout, policy: &Path, run_as: Option<u32>) -> Served {
        let mut command = Command::new(layout.bridge());
        command
            .args(["serve", "--policy"])
            .arg(policy)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("DEVIN_BRIDGE_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(uid) = run_as {
            command.uid(uid).gid(uid);
        }
        let mut child = command.spawn().expect("spawn devin-bridge");
        let (lines, addr_rx) = common::follow_bridge_stderr(child.stderr.take().expect("stderr"));
        let addr = addr_rx
            .recv_timeout(START_TIMEOUT)
            .ok()
            .flatten()
            .and_then(|addr| addr.parse().ok());
        Served { child, lines, addr }
    }

    fn addr(&self) -> std::net::SocketAddr {
        self.addr
            .unwrap_or_else(|| panic!("the bridge did not start:\n{}", self.stderr()))
    }

    fn stderr(&self) -> String {
        self.lines.lock().expect("lines").join("\n")
    }

    /// Waits for the process to exit by itself (a refusal) and returns its status code.
    fn exit_code(&mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Let the reader thread collect the last lines.
                std::thread::sleep(Duration::from_millis(100));
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn auth() -> Vec<(String, String)> {
    vec![("x-api-key".into(), "identity-test-key".into())]
}

fn message(text: &str) -> String {
    json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": text}],
    })
    .to_string()
}

fn reply_text(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("JSON: {body}"));
    value["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {body}"))
        .to_owned()
}

/// `Uid:`/`Gid:` real ids and `CapEff:` of a process, from `/proc`.
fn proc_status(pid: u32) -> (String, String, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|rest| rest.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    (field("Uid:"), field("Gid:"), field("CapEff:"))
}

#[test]
fn a_hostile_agent_under_its_own_uid_cannot_reach_the_key_cache_or_control_socket() {
    require_root();
    let layout = Layout::new();
    let policy = layout.policy(
        Some(&format!("{HOST_UID}:{HOST_UID}")),
        Some(&format!("{AGENT_UID}:{AGENT_UID}")),
        true,
    );
    let served = Served::start(&layout, &policy, None);
    let addr = served.addr();

    // The host switched to its own uid and kept exactly SETUID, SETGID and KILL (bits 7, 6, 5).
    let (uid, gid, cap_eff) = proc_status(served.child.id());
    assert_eq!(uid, format!("{HOST_UID} {HOST_UID} {HOST_UID} {HOST_UID}"));
    assert_eq!(gid, format!("{HOST_UID} {HOST_UID} {HOST_UID} {HOST_UID}"));
    assert_eq!(cap_eff, "00000000000000e0", "host effective capabilities");
    assert!(layout.control_socket().exists(), "control socket");
    assert!(
        std::fs::read_dir(layout.cache_dir())
            .expect("cache dir")
            .count()
            > 0,
        "the host compiled its components into the cache"
    );

    let prompt = format!(
        "[mock:probe]\nprobe-read {}\nprobe-write {}\nprobe-write {}\nprobe-connect {}\nprobe-write {}\n",
        layout.key_file().display(),
        layout.cache_dir().display(),
        layout.host_dir().display(),
        layout.control_socket().display(),
        layout.agent_home().join("tmp").display(),
    );
    let response = request(addr, "POST", "/v1/messages", &auth(), &message(&prompt));
    assert_eq!(response.status, 200, "{}", response.body);
    let report = reply_text(&response.body);
    eprintln!("agent report:\n{report}");
    let line = |prefix: &str| {
        report
            .lines()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in {report}"))
            .to_owned()
    };
    assert_eq!(
        line("Uid:"),
        format!("Uid: {AGENT_UID} {AGENT_UID} {AGENT_UID} {AGENT_UID}")
    );
    assert_eq!(
        line("Gid:"),
        format!("Gid: {AGENT_UID} {AGENT_UID} {AGENT_UID} {AGENT_UID}")
    );
    assert_eq!(line("Groups:"), "Groups:", "no supplementary groups");
    assert_eq!(line("CapEff:"), "CapEff: 0000000000000000");
    assert_eq!(line("CapPrm:"), "CapPrm: 0000000000000000");
    assert_eq!(line("NoNewPrivs:"), "NoNewPrivs: 1");
    assert_eq!(
        line("TMPDIR:"),
        format!("TMPDIR: {}", layout.agent_home().join("tmp").display())
    );
    for private in [
        format!("probe-read {}: denied", layout.key_file().display()),
        format!("probe-write {}: denied", layout.cache_dir().display()),
        format!("probe-write {}: denied", layout.host_dir().display()),
        format!(
            "probe-connect {}: denied",
            layout.control_socket().display()
        ),
    ] {
        assert!(
            report.lines().any(|line| line.starts_with(&private)),
            "expected {private:?} in\n{report}"
        );
    }
    // The probe itself works: the agent's own TMPDIR is writable.
    assert!(
        report.contains(&format!(
            "probe-write {}: allowed",
            layout.agent_home().join("tmp").display()
        )),
        "{report}"
    );

    // /healthz says so, and counts agents by uid.
    let health = request(addr, "GET", "/healthz", &auth(), "");
    let health: Value = serde_json::from_str(&health.body).expect("healthz JSON");
    assert_eq!(
        health["agent"]["identity"],
        format!("separate uid {AGENT_UID} gid {AGENT_UID}")
    );

    // Signals cross the uid boundary: a hanging agent is killed at the turn timeout, and no
    // process of the agent's uid survives.
    let started = Instant::now();
    let response = request(
        addr,
        "POST",
        "/v1/messages",
        &auth(),
        &message("[mock:grandchild]"),
    );
    assert_eq!(response.status, 504, "{}", response.body);
    let deadline = Instant::now() + Duration::from_secs(10);
    while devin_bridge_agent::process::live_processes_of_uid(AGENT_UID) > 0
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        devin_bridge_agent::process::live_processes_of_uid(AGENT_UID),
        0,
        "an agent process outlived its turn ({:?} after the request)",
        started.elapsed()
    );
}

#[test]
fn a_live_policy_that_cannot_switch_uid_refuses_to_start() {
    require_root();
    let layout = Layout::new();
    let policy = layout.policy(None, Some(&format!("{AGENT_UID}:{AGENT_UID}")), false);
    // Started directly as the host user: no capabilities at all.
    let mut served = Served::start(&layout, &policy, Some(HOST_UID));
    assert!(
        served.addr.is_none(),
        "a live policy started without the switch capabilities"
    );
    assert_eq!(served.exit_code(), Some(1));
    let stderr = served.stderr();
    assert!(
        stderr.contains("refusing to start (fail closed)"),
        "{stderr}"
    );
    assert!(stderr.contains("CAP_SETUID"), "{stderr}");
}

#[test]
fn an_offline_policy_without_the_rights_shares_the_identity_and_says_so_once() {
    require_root();
    let layout = Layout::new();
    // Without the rights the agent runs as the host: its home must be the host's.
    chown(layout.agent_home(), Some(HOST_UID), Some(HOST_UID)).expect("chown home");
    chown(
        layout.agent_home().join("tmp"),
        Some(HOST_UID),
        Some(HOST_UID),
    )
    .expect("chown tmp");
    let policy = layout.policy(None, Some(&format!("{AGENT_UID}:{AGENT_UID}")), true);
    let served = Served::start(&layout, &policy, Some(HOST_UID));
    let addr = served.addr();
    let response = request(
        addr,
        "POST",
        "/v1/messages",
        &auth(),
        &message("[mock:probe]"),
    );
    assert_eq!(response.status, 200, "{}", response.body);
    assert!(reply_text(&response.body).contains(&format!("Uid: {HOST_UID} ")));
    let stderr = served.stderr();
    assert_eq!(
        stderr
            .matches("the agent shares the host's identity")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn an_agent_user_equal_to_the_host_user_is_refused() {
    require_root();
    let layout = Layout::new();
    let same = format!("{HOST_UID}:{HOST_UID}");
    let policy = layout.policy(Some(&same), Some(&same), true);
    let mut served = Served::start(&layout, &policy, None);
    assert!(served.addr.is_none());
    assert_eq!(served.exit_code(), Some(1));
    assert!(
        served.stderr().contains("would share the host's identity"),
        "{}",
        served.stderr()
    );
}

#[test]
fn a_separate_agent_home_owned_by_the_host_is_refused() {
    require_root();
    let layout = Layout::new();
    chown(layout.agent_home(), Some(HOST_UID), Some(HOST_UID)).expect("chown home");
    let policy = layout.policy(
        Some(&format!("{HOST_UID}:{HOST_UID}")),
        Some(&format!("{AGENT_UID}:{AGENT_UID}")),
        false,
    );
    let mut served = Served::start(&layout, &policy, None);
    assert!(served.addr.is_none());
    assert_eq!(served.exit_code(), Some(1));
    let stderr = served.stderr();
    assert!(
        stderr.contains(&format!(
            "belongs to uid {HOST_UID}, not to the agent's uid {AGENT_UID}"
        )),
        "{stderr}"
    );
}
