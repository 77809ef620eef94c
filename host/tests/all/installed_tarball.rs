//! The tarball `cargo xtask dist` writes, extracted into an empty directory and run with the
//! checkout hidden: the binary serves a summarizer policy written from scratch, runs a
//! companion job that resolves a model (the model-alias component) and an outpost worker
//! (the sse component), all on the components and catalog it carries.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::bridge::{mock_devin, request};
use common::installed::{hidden_command, Installed};
use common::outpost::Rig;
use devin_bridge_fake_fleet::FleetConfig;

#[test]
fn the_tarball_holds_the_binary_policies_plugin_marketplace_docs_and_license() {
    let installed = Installed::extract();
    for path in [
        "bin/devin-bridge",
        "policies/summarizer.toml",
        "policies/companion.toml",
        "policies/outpost.toml",
        "policies/models.json",
        "plugins/devin/.claude-plugin/plugin.json",
        ".claude-plugin/marketplace.json",
        "docs/companion.md",
        "README.md",
        "LICENSE",
    ] {
        assert!(installed.top.join(path).exists(), "{path} missing");
    }
    let output = hidden_command(&installed.bin())
        .arg("--version")
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(text.matches("sha256:").count(), 6, "{text}");
    assert!(!text.contains("not built in"), "{text}");
}

#[test]
fn the_installed_binary_serves_a_policy_written_elsewhere_with_the_checkout_hidden() {
    let installed = Installed::extract();
    let agent = installed.copy_out(&mock_devin());
    let etc = installed.dir.path().join("etc");
    std::fs::create_dir_all(etc.join(".sandbox/home")).expect("mkdir");
    let addr = common::free_port();
    // Relative paths (the agent's home) resolve against the policy's directory.
    std::fs::write(
        etc.join("bridge.toml"),
        format!(
            "mode = \"summarizer\"\n[server]\nlisten = \"{addr}\"\nrequire_key = false\n\
             [agent]\ncommand = {:?}\nargs = [\"acp\", \"--agent-type\", \"summarizer\"]\n\
             home = \".sandbox/home\"\noffline = true\n",
            agent.display().to_string()
        ),
    )
    .expect("policy");
    let log = installed.dir.path().join("serve.log");
    let mut child = hidden_command(&installed.bin())
        .args(["serve", "--policy"])
        .arg(etc.join("bridge.toml"))
        .current_dir(installed.dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", installed.dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("serve");
    let deadline = Instant::now() + Duration::from_secs(60);
    let healthy = loop {
        if std::net::TcpStream::connect(addr).is_ok()
            && request(addr, "GET", "/healthz", &[], "").status == 200
        {
            break true;
        }
        if Instant::now() > deadline || child.try_wait().expect("wait").is_some() {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(healthy, "serve did not become healthy:\n{text}");
    let body = serde_json::json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hello from elsewhere"}],
    });
    let response = request(addr, "POST", "/v1/messages", &[], &body.to_string());
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(response.status, 200, "{}\n{text}", response.body);
    assert!(
        response.json()["content"][0]["text"].is_string(),
        "{}",
        response.body
    );
    assert_eq!(text.matches("source=built-in").count(), 5, "{text}");
}

#[test]
fn the_installed_binary_runs_a_companion_job_with_a_model_with_the_checkout_hidden() {
    let installed = Installed::extract();
    let devin = installed.copy_out(&mock_devin());
    let root = installed.dir.path();
    let home = root.join("home");
    std::fs::create_dir_all(home.join(".local/share/devin")).expect("home");
    std::fs::write(
        home.join(".local/share/devin/credentials.toml"),
        "token = \"x\"\n",
    )
    .expect("credentials");
    let workspace = root.join("repo");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(&workspace)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .stdout(Stdio::null())
            .status()
            .expect("git");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(workspace.join("a.txt"), "a\n").expect("write");
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "one"]);
    let output = hidden_command(&installed.bin())
        .args(["companion", "task", "--model", "swe-2", "explain", "this"])
        .current_dir(&workspace)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("DEVIN_BIN", &devin)
        .env("DEVIN_COMPANION_DATA", root.join("data"))
        .stdin(Stdio::null())
        .output()
        .expect("companion");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("cannot read component"), "{stderr}");
    assert!(!String::from_utf8_lossy(&output.stdout).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installed_binary_runs_an_outpost_worker_with_the_checkout_hidden() {
    let installed = Installed::extract();
    let rig = Rig::start(FleetConfig::default()).await;
    let worker = rig.worker("w").installed(installed.bin()).spawn();
    worker
        .wait_log("queue listed", Duration::from_secs(30))
        .await;
    let session = rig.enqueue_normal();
    rig.wait_connected(&session).await;
    rig.finish(&session).await;
    assert!(
        !worker.log().contains("cannot read component"),
        "{}",
        worker.log()
    );
}
