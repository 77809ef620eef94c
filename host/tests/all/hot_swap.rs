//! Hot swap against a running host: the control socket (CLI and library client) and SIGHUP.

use crate::common;
use devin_bridge_policy::ModePolicy as _;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use devin_bridge_engine::sha256_hex;
use devin_bridge_summarizer::control;

/// A `devin-bridge serve` child that is killed if the test fails.
struct Host {
    child: std::process::Child,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_host(policy: &std::path::Path, home: &std::path::Path) -> Host {
    let mut command = Command::new(env!("CARGO_BIN_EXE_devin-bridge"));
    command
        .args(["serve", "--policy"])
        .arg(policy)
        .env("XDG_CACHE_HOME", home.join("cache"));
    spawn_until_control_socket(&mut command, "host")
}

/// Spawns `command` (a `devin-bridge serve`), echoes its log as `name`, and waits until it
/// has bound its control socket (the line `serve` prints once it listens).
fn spawn_until_control_socket(command: &mut Command, name: &'static str) -> Host {
    let mut child = command
        .env("DEVIN_BRIDGE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn devin-bridge");
    let stderr = child.stderr.take().expect("stderr");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{name}: {line}");
            if line.starts_with("control socket ") {
                let _ = ready_tx.send(());
            }
        }
    });
    let host = Host { child };
    ready_rx
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("{name}: the bridge did not come up"));
    host
}

fn list(socket: &std::path::Path) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .args(["components", "list", "--socket"])
        .arg(socket)
        .output()
        .expect("run list");
    assert!(
        output.status.success(),
        "list failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("list prints JSON")
}

fn sha_of(list: &serde_json::Value, name: &str) -> String {
    list.as_array()
        .and_then(|items| items.iter().find(|item| item["name"] == name))
        .and_then(|item| item["sha256"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("{name} missing from {list}"))
}

#[test]
fn swap_over_the_control_socket_and_reload_on_sighup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("run").join("control.sock");
    let policy_path = dir.path().join("policy.toml");
    let write_policy = |serializer: &std::path::Path| {
        let home = dir.path().join(".sandbox").join("home");
        let extra = format!(
            "[control]\nsocket = {:?}\n[server]\nlisten = \"127.0.0.1:0\"\nrequire_key = false\n\
             [agent]\ncommand = {:?}\nhome = {:?}\nprewarm = 0\noffline = true\n[models]\ncatalog = {:?}\n",
            socket.display().to_string(),
            common::bridge::mock_devin().display().to_string(),
            home.display().to_string(),
            concat!(env!("CARGO_MANIFEST_DIR"), "/../policies/models.json"),
        );
        let text = common::policy_text(&extra).replacen(
            &format!(
                "path = {:?}",
                common::component("serializer").display().to_string()
            ),
            &format!("path = {:?}", serializer.display().to_string()),
            1,
        );
        std::fs::write(&policy_path, text).expect("write policy");
    };
    write_policy(&common::component("serializer"));
    let mut host = start_host(&policy_path, dir.path());

    // The socket is private.
    assert_eq!(
        std::fs::metadata(&socket)
            .expect("socket")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(socket.parent().expect("dir"))
            .expect("dir")
            .permissions()
            .mode()
            & 0o777,
        0o700
    );

    let original = sha256_hex(&std::fs::read(common::component("serializer")).expect("serializer"));
    assert_eq!(sha_of(&list(&socket), "serializer"), original);

    // CLI swap to a different (valid) version.
    let alternate_path = devin_bridge_test_artifacts::MISBEHAVING_SERIALIZER
        .path()
        .to_path_buf();
    let alternate = sha256_hex(&std::fs::read(&alternate_path).expect("alternate"));
    let output = Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .args(["components", "swap", "serializer"])
        .arg(&alternate_path)
        .arg("--socket")
        .arg(&socket)
        .output()
        .expect("run swap");
    assert!(
        output.status.success(),
        "swap failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("report");
    assert_eq!(report["old_sha256"], original.as_str());
    assert_eq!(report["new_sha256"], alternate.as_str());
    assert!(
        report["corpus"]
            .as_str()
            .is_some_and(|corpus| corpus.ends_with("manifest.json")),
        "the set's shipped corpus was not used: {report}"
    );
    assert_eq!(sha_of(&list(&socket), "serializer"), alternate);

    // A bad candidate is refused with a clear error and a failing exit status.
    let output = Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .args(["components", "swap", "serializer"])
        .arg(common::component("sse"))
        .arg("--socket")
        .arg(&socket)
        .output()
        .expect("run swap");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("does not export the serializer interface"));
    assert_eq!(sha_of(&list(&socket), "serializer"), alternate);

    // SIGHUP: the policy now names the original file again.
    write_policy(&common::component("serializer"));
    let pid = nix::unistd::Pid::from_raw(host.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    let deadline = Instant::now() + Duration::from_secs(60);
    while sha_of(&list(&socket), "serializer") != original {
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not reload the serializer"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // SIGTERM: a clean exit that removes the socket.
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let status = host.child.wait().expect("wait");
    assert!(status.success(), "exit status {status}");
    assert!(!socket.exists(), "the socket was left behind");
}

#[tokio::test]
async fn the_control_socket_refuses_oversized_and_malformed_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("ctl").join("control.sock");
    let listener = control::bind(&socket).expect("bind");
    let transforms = Arc::new(
        tokio::task::spawn_blocking(common::transforms)
            .await
            .expect("load"),
    );
    let server = tokio::spawn(control::serve(listener, transforms));

    let too_big = control::Request::Swap {
        transform: "sse".into(),
        size: control::MAX_COMPONENT_BYTES + 1,
        source: "x".into(),
    };
    let error = control::request(&socket, &too_big, &[])
        .await
        .expect_err("oversized");
    assert!(error.to_string().contains("exceeds"), "{error}");

    let unknown = control::Request::Swap {
        transform: "tokenizer".into(),
        size: 0,
        source: "x".into(),
    };
    let error = control::request(&socket, &unknown, &[])
        .await
        .expect_err("unknown transform");
    assert!(error.to_string().contains("unknown transform"), "{error}");

    // A second host cannot take over a live socket.
    let error = control::bind(&socket).expect_err("socket in use");
    assert!(error.to_string().contains("already listening"), "{error}");
    server.abort();
}

#[test]
fn components_check_reports_digest_and_corpus_and_refuses_a_wrong_component() {
    let good = common::component("envelope");
    let output = Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .args(["components", "check"])
        .arg(&good)
        .args(["--as", "envelope"])
        .env(
            "XDG_CACHE_HOME",
            std::env::temp_dir().join("devin-bridge-check-cache"),
        )
        .output()
        .expect("run check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "check failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let digest = sha256_hex(&std::fs::read(&good).expect("envelope"));
    assert!(stdout.contains(&digest), "{stdout}");
    assert!(stdout.contains("golden cases passed"), "{stdout}");
    assert!(stdout.contains("imports   none"), "{stdout}");

    for (file, transform, expected) in [
        (
            common::component("sse"),
            "serializer",
            "does not export the serializer interface",
        ),
        (
            devin_bridge_test_artifacts::WRONG_ANSWERS
                .path()
                .to_path_buf(),
            "serializer",
            "failed its self-test",
        ),
        (
            devin_bridge_test_artifacts::WASI_PROBE_SERIALIZER
                .path()
                .to_path_buf(),
            "serializer",
            "imports something the host does not provide: wasi:cli/environment@0.2.0",
        ),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
            .args(["components", "check"])
            .arg(&file)
            .args(["--as", transform])
            .output()
            .expect("run check");
        assert!(
            !output.status.success(),
            "{} accepted as {transform}",
            file.display()
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{stderr}");
    }
}

#[tokio::test]
async fn a_swap_over_the_control_socket_honours_the_policys_pin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("ctl").join("control.sock");
    let listener = control::bind(&socket).expect("bind");
    let real = std::fs::read(common::component("sse")).expect("sse");
    let twin = devin_bridge_test_artifacts::TWIN.bytes();
    let (real_sha, twin_sha) = (sha256_hex(&real), sha256_hex(&twin));
    let text = common::policy_text("").replacen(
        "[components.sse]\n",
        &format!("[components.sse]\nsha256 = \"{real_sha}\"\n"),
        1,
    );
    let policy = devin_bridge_summarizer::policy::SummarizerPolicy::parse(
        &text,
        std::path::Path::new("p.toml"),
        std::path::Path::new("/"),
    )
    .expect("policy");
    let transforms = Arc::new(
        tokio::task::spawn_blocking(move || {
            devin_bridge_engine::Transforms::load_with(
                common::test_runtime(),
                common::test_cache(),
                &policy.engine_config(),
            )
            .expect("load")
        })
        .await
        .expect("load"),
    );
    let server = tokio::spawn(control::serve(listener, transforms.clone()));
    let swap = |transform: &str, bytes: &[u8]| control::Request::Swap {
        transform: transform.into(),
        size: bytes.len() as u64,
        source: "twin.wasm".into(),
    };
    let error = control::request(&socket, &swap("sse", &twin), &twin)
        .await
        .expect_err("a pinned transform must refuse another digest");
    let message = error.to_string();
    for needle in [
        real_sha.as_str(),
        twin_sha.as_str(),
        "[components.sse] sha256",
        "SIGHUP",
    ] {
        assert!(message.contains(needle), "{needle} missing from: {message}");
    }
    assert_eq!(
        transforms
            .current(devin_bridge_engine::TransformKind::Sse)
            .sha256,
        real_sha
    );
    // An unpinned transform still swaps, after its self-test.
    let report = control::request(&socket, &swap("envelope", &twin), &twin)
        .await
        .expect("unpinned swap");
    assert_eq!(report["new_sha256"], twin_sha.as_str());
    assert!(report["self_test_cases"].as_u64().is_some_and(|n| n > 0));
    server.abort();
}

/// A policy for a side-by-side bridge: listening on `addr`, naming no control socket, its
/// agent the offline one with a home of its own (`name`).
fn side_by_side_policy(
    dir: &std::path::Path,
    name: &str,
    addr: std::net::SocketAddr,
) -> std::path::PathBuf {
    let policy_path = dir.join(format!("{name}.toml"));
    let extra = format!(
        "[server]\nlisten = \"{addr}\"\nrequire_key = false\n\
         [agent]\ncommand = {:?}\nhome = {:?}\nprewarm = 0\noffline = true\n[models]\ncatalog = {:?}\n",
        common::bridge::mock_devin().display().to_string(),
        dir.join(".sandbox").join(name).display().to_string(),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../policies/models.json"),
    );
    std::fs::write(&policy_path, common::policy_text(&extra)).expect("write policy");
    policy_path
}

/// Starts `serve --policy policy [--listen listen]` under `runtime` as `XDG_RUNTIME_DIR` and
/// waits for its control socket; asserts it sits at the default name for `addr` (the address
/// the bridge really listens on).
fn start_side_by_side(
    dir: &std::path::Path,
    runtime: &std::path::Path,
    name: &'static str,
    policy: &std::path::Path,
    listen: Option<std::net::SocketAddr>,
    addr: std::net::SocketAddr,
) -> Host {
    let mut command = Command::new(env!("CARGO_BIN_EXE_devin-bridge"));
    command.args(["serve", "--policy"]).arg(policy);
    if let Some(listen) = listen {
        command.arg("--listen").arg(listen.to_string());
    }
    command
        .env("XDG_RUNTIME_DIR", runtime)
        .env("XDG_CACHE_HOME", dir.join("cache"));
    let mut host = spawn_until_control_socket(&mut command, name);
    assert!(
        host.child.try_wait().expect("wait").is_none(),
        "the {name} host exited"
    );
    let expected =
        runtime
            .join("devin-bridge")
            .join(format!("control-{}-{}.sock", addr.ip(), addr.port()));
    assert!(expected.exists(), "no socket at {}", expected.display());
    host
}

/// A private `XDG_RUNTIME_DIR` for the side-by-side tests.
fn private_runtime(dir: &std::path::Path) -> std::path::PathBuf {
    let runtime = dir.join("xdg-runtime");
    std::fs::create_dir_all(&runtime).expect("runtime dir");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    runtime
}

/// `components list` with `args`, under `runtime`: the listed serializer has a sha256.
fn list_components_through(runtime: &std::path::Path, args: &[std::ffi::OsString]) {
    let output = Command::new(env!("CARGO_BIN_EXE_devin-bridge"))
        .args(["components", "list"])
        .args(args)
        .env("XDG_RUNTIME_DIR", runtime)
        .output()
        .expect("run list");
    assert!(
        output.status.success(),
        "list through {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert!(sha_of(&listed, "serializer").len() == 64);
}

/// Two bridges on one machine, neither naming a control socket: each gets its own default
/// socket (named after its listen address, under this test's own `XDG_RUNTIME_DIR`), both come
/// up, and `components list --policy` reaches each through the address in its policy.
#[test]
fn two_bridges_with_default_control_sockets_start_side_by_side() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = private_runtime(dir.path());
    let mut hosts = Vec::new();
    let mut policies = Vec::new();
    for name in ["first", "second"] {
        let addr = common::free_port();
        let policy = side_by_side_policy(dir.path(), name, addr);
        hosts.push(start_side_by_side(
            dir.path(),
            &runtime,
            name,
            &policy,
            None,
            addr,
        ));
        policies.push(policy);
    }
    for policy in &policies {
        list_components_through(&runtime, &["--policy".into(), policy.clone().into()]);
    }
    drop(hosts);
}

/// Two bridges from ONE policy, started with different `--listen`: each control socket is named
/// after the address its bridge really listens on (not the policy's `listen`), so both start,
/// and `components list --policy P --listen A` reaches each one.
#[test]
fn two_bridges_from_one_policy_with_different_listen_start_side_by_side() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = private_runtime(dir.path());
    let policy_listen = common::free_port();
    let policy = side_by_side_policy(dir.path(), "shared", policy_listen);
    let mut hosts = Vec::new();
    let mut addresses = Vec::new();
    for name in ["first", "second"] {
        let addr = common::free_port();
        hosts.push(start_side_by_side(
            dir.path(),
            &runtime,
            name,
            &policy,
            Some(addr),
            addr,
        ));
        addresses.push(addr);
    }
    let policy_default = runtime.join("devin-bridge").join(format!(
        "control-{}-{}.sock",
        policy_listen.ip(),
        policy_listen.port()
    ));
    assert!(
        !policy_default.exists(),
        "a bridge took the socket named after the policy's listen, {}",
        policy_default.display()
    );
    for addr in addresses {
        list_components_through(
            &runtime,
            &[
                "--policy".into(),
                policy.clone().into(),
                "--listen".into(),
                addr.to_string().into(),
            ],
        );
    }
    drop(hosts);
}
