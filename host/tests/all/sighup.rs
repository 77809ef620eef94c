//! SIGHUP against a running `devin-bridge serve`: changed limits and log filter take effect,
//! settings that need a restart are named and keep their old value, and an invalid policy
//! changes nothing.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

/// A `devin-bridge serve` child (killed if the test fails) and every stderr line it wrote.
struct Host {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Host {
    fn start(policy: &Path, dir: &Path) -> Host {
        let mut child = Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
            .args(["serve", "--policy"])
            .arg(policy)
            .env("XDG_CACHE_HOME", dir.join("cache"))
            // The policy's `[log] filter` decides, so that SIGHUP can change it.
            .env_remove("DEVIN_BRIDGE_LOG")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn devin-bridge");
        let stderr = child.stderr.take().expect("stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("host: {line}");
                sink.lock().expect("lines").push(line);
            }
        });
        Host { child, lines }
    }

    fn count(&self, needle: &str) -> usize {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|line| line.contains(needle))
            .count()
    }

    /// Waits until `needle` has appeared `times` times; returns the last such line.
    fn wait_for(&self, needle: &str, times: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(line) = self
                .lines
                .lock()
                .expect("lines")
                .iter()
                .filter(|line| line.contains(needle))
                .nth(times - 1)
            {
                return line.clone();
            }
            assert!(
                Instant::now() < deadline,
                "the host never logged {needle:?} ({times}x)"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn hangup(&self) {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGHUP).expect("SIGHUP");
    }
}

struct Setup {
    dir: tempfile::TempDir,
    policy: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        let policy = dir.path().join("policy.toml");
        // The control socket's directory must be private to the host.
        std::fs::create_dir(dir.path().join("run")).expect("run dir");
        std::fs::set_permissions(
            dir.path().join("run"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("chmod run dir");
        Setup { dir, policy }
    }

    /// Writes the policy: the built components, the offline agent, a private control socket.
    fn write(&self, listen: &str, limits: &str, log: &str) {
        let home = self.dir.path().join(".sandbox").join("home");
        let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/models.json");
        let text = common::policy_text(&format!(
            "[server]\nlisten = {listen:?}\nrequire_key = false\n\
             [agent]\ncommand = {:?}\nhome = {:?}\noffline = true\nprewarm = 0\n\
             [models]\ncatalog = {:?}\n\
             [control]\nsocket = {:?}\n\
             [limits]\n{limits}\n\
             [log]\n{log}\n",
            common::bridge::mock_devin().display().to_string(),
            home.display().to_string(),
            catalog.display().to_string(),
            self.dir
                .path()
                .join("run/control.sock")
                .display()
                .to_string(),
        ));
        // Written whole and renamed, so the host never reads half a file.
        let partial = self.dir.path().join("policy.toml.partial");
        std::fs::write(&partial, text).expect("write policy");
        std::fs::rename(&partial, &self.policy).expect("rename policy");
    }
}

fn health(addr: SocketAddr) -> Value {
    let response = common::bridge::request(addr, "GET", "/healthz", &[], "");
    assert_eq!(response.status, 200, "{response:?}");
    response.json()
}

fn limits(addr: SocketAddr) -> (u64, u64) {
    let body = health(addr);
    (
        body["limits"]["memory_mib"].as_u64().expect("memory_mib"),
        body["limits"]["call_timeout_ms"]
            .as_u64()
            .expect("call_timeout_ms"),
    )
}

#[test]
fn sighup_applies_live_settings_names_the_rest_and_refuses_bad_policies() {
    let setup = Setup::new();
    setup.write(
        "127.0.0.1:0",
        "memory_mib = 256\ncall_timeout_ms = 2000",
        "filter = \"info\"",
    );
    let host = Host::start(&setup.policy, setup.dir.path());
    let listening = host.wait_for("listening on http://", 1);
    let addr: SocketAddr = listening
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|addr| addr.parse().ok())
        .expect("listen address");
    assert_eq!(limits(addr), (256, 2000));

    // (a) New limits (and a debug filter): in force for what comes next, visible in /healthz.
    assert_eq!(host.count("SIGHUP: no component changed"), 0);
    setup.write(
        "127.0.0.1:0",
        "memory_mib = 128\ncall_timeout_ms = 3000",
        "filter = \"devin_bridge=debug,info\"",
    );
    host.hangup();
    host.wait_for("SIGHUP: reload complete", 1);
    assert_eq!(limits(addr), (128, 3000));
    // A debug line, logged only because the new filter is in force.
    assert_eq!(host.count("SIGHUP: no component changed"), 1);
    assert_eq!(
        host.count("restart to apply"),
        0,
        "nothing here needs a restart"
    );

    // (b) A new listen address and prewarm count need a restart: named, and not applied.
    setup.write(
        "127.0.0.1:1",
        "memory_mib = 128\ncall_timeout_ms = 3000",
        "filter = \"devin_bridge=debug,info\"",
    );
    // Prewarm lives in [agent], written by `write`; change it by replacing the line.
    let text = std::fs::read_to_string(&setup.policy).expect("policy");
    std::fs::write(&setup.policy, text.replace("prewarm = 0", "prewarm = 2")).expect("policy");
    host.hangup();
    host.wait_for("SIGHUP: reload complete", 2);
    host.wait_for("SIGHUP: server.listen changed; restart to apply", 1);
    host.wait_for("SIGHUP: agent.prewarm changed; restart to apply", 1);
    assert_eq!(
        health(addr)["status"],
        "ok",
        "the old address keeps serving"
    );
    assert_eq!(health(addr)["prewarm"]["target"], 0, "{}", health(addr));

    // (c) Invalid policies change nothing: one that does not parse...
    std::fs::write(
        &setup.policy,
        "mode = \"summarizer\"\n[limits]\nmemory = 3\n",
    )
    .expect("policy");
    host.hangup();
    host.wait_for("SIGHUP: the new policy is invalid; nothing changed", 1);
    // ...one that parses, but whose memory cap is too small for the serving components to
    // pass their self-test under it...
    setup.write(
        "127.0.0.1:0",
        "memory_mib = 1\ncall_timeout_ms = 3000",
        "filter = \"info\"",
    );
    host.hangup();
    host.wait_for(
        "SIGHUP: a component of the new policy was refused; nothing changed",
        1,
    );
    // ...and one with new limits that names a component that is not there.
    setup.write(
        "127.0.0.1:0",
        "memory_mib = 64\ncall_timeout_ms = 500",
        "filter = \"info\"",
    );
    let text = std::fs::read_to_string(&setup.policy).expect("policy");
    let envelope = format!(
        "[components.envelope]\npath = {:?}\n",
        common::component("envelope").display().to_string()
    );
    assert!(text.contains(&envelope), "{text}");
    let text = text.replacen(
        &envelope,
        "[components.envelope]\npath = \"missing-envelope.wasm\"\n",
        1,
    );
    std::fs::write(&setup.policy, text).expect("policy");
    host.hangup();
    host.wait_for(
        "SIGHUP: a component of the new policy was refused; nothing changed",
        2,
    );
    assert_eq!(
        limits(addr),
        (128, 3000),
        "a refused policy changed the limits"
    );
    assert_eq!(host.count("SIGHUP: reload complete"), 2);
    // The debug filter is still in force.
    let before = host.count("SIGHUP: no component changed");
    setup.write(
        "127.0.0.1:0",
        "memory_mib = 128\ncall_timeout_ms = 3000",
        "filter = \"devin_bridge=debug,info\"",
    );
    host.hangup();
    host.wait_for("SIGHUP: reload complete", 3);
    assert_eq!(host.count("SIGHUP: no component changed"), before + 1);

    kill(Pid::from_raw(host.child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
}
