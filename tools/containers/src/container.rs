//! `cargo xtask test-container`: brings up the offline profile of docker/compose.yml and proves
//! the isolation in the running containers by trying, one `PASS|FAIL` line per check, then
//! `N passed, M failed`. Every wait is bounded; all traffic stays on this machine.

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::compose::{
    demo_fixed, http, http_with, internal_address, processes, wait_healthy, write_demo_project,
    Compose, SandboxDirs, BRIDGE_PORT, CLAUDE_PRINT_FLAGS, DEMO_PROMPT,
};
use crate::gate::{
    agent_private_args, bridge_route_args, check_identities, claude_audit_has_no_allow,
    discover_models, exec_verify, final_result, start_bridge,
};
use crate::image::{self, AGENT_UID, HOST_UID};
use crate::workspace::workspace_root;

/// Counts results and prints one line per check.
#[derive(Default)]
struct Report {
    passed: usize,
    failed: Vec<String>,
}

impl Report {
    fn check(&mut self, name: &str, outcome: Result<String>) {
        match outcome {
            Ok(detail) => {
                self.passed += 1;
                println!("PASS {name}: {detail}");
            }
            Err(error) => {
                println!("FAIL {name}: {error:#}");
                self.failed.push(name.to_owned());
            }
        }
    }
}

/// `cargo xtask test-container`.
pub(crate) fn test_container(components: &Path) -> Result<()> {
    let started = Instant::now();
    image::require_docker()?;
    let built = image::build_images(components)?;
    let (dirs, key) = SandboxDirs::prepare()?;
    let compose = Compose::test(key.clone())?;
    // A project left by an interrupted run goes first.
    let _ = compose.down();
    let mut report = Report::default();
    report.check(
        "bridge_image_is_reproducible",
        image::rebuild_bridge_image(components).and_then(|again| {
            let first = &built[0];
            if again.id == first.id {
                Ok(format!("built twice from the same inputs: {}", again.id))
            } else {
                bail!(
                    "built twice from the same inputs: {} then {}",
                    first.id,
                    again.id
                )
            }
        }),
    );
    let outcome = run_checks(&compose, &dirs, &key, &mut report);
    if let Err(error) = &outcome {
        report.check("setup", Err(anyhow::anyhow!("{error:#}")));
        let logs = compose
            .command()
            .args(["logs", "--no-color", "--tail", "60"])
            .output();
        if let Ok(logs) = logs {
            eprintln!("{}", String::from_utf8_lossy(&logs.stdout));
        }
    }
    report.check("evidence_exported", export_evidence(&dirs, &key));
    report.check(
        "live_image_refuses_unpinned_cli",
        live_image_refuses_unpinned_cli(),
    );
    report.check(
        "launch_requires_a_devin_login",
        launch_requires_a_devin_login(&compose),
    );
    report.check(
        "clean_keeps_the_login_volume",
        clean_keeps_the_login(&compose),
    );
    report.check(
        "clean_all_removes_the_login_volume",
        clean_all_removes_the_login(&compose),
    );
    let down = compose.down();
    report.check(
        "down_leaves_nothing",
        down.and_then(|()| {
            let left = compose.leftovers()?;
            if left.is_empty() {
                Ok("no container of the project remains".into())
            } else {
                bail!("containers left: {left:?}")
            }
        }),
    );
    println!(
        "test-container took {:.0} s (images included)",
        started.elapsed().as_secs_f64()
    );
    println!(
        "test-container: {} passed, {} failed",
        report.passed,
        report.failed.len()
    );
    if !report.failed.is_empty() {
        bail!("container checks failed: {}", report.failed.join(", "));
    }
    Ok(())
}

/// The guards' audits of the proof, copied to `.sandbox/evidence/` (the Claude Code stream was
/// written there when it ran).
fn export_evidence(dirs: &SandboxDirs, key: &str) -> Result<String> {
    let evidence = crate::evidence::Evidence::open()?;
    // The guards run as uid 10001 (docker/compose.yml).
    evidence.copy(&dirs.devin_audit(), "egress.jsonl", &[10001], &[key])?;
    evidence.copy(
        &dirs.claude_audit(),
        "claude-egress.jsonl",
        &[10001],
        &[key],
    )?;
    Ok("egress.jsonl, claude-egress.jsonl and claude-stream.jsonl in .sandbox/evidence".into())
}

/// The login check `launch` and `test-live` run first: an empty `devin-auth` volume is refused,
/// one holding a credentials file passes (here on the test project's volume).
fn launch_requires_a_devin_login(compose: &Compose) -> Result<String> {
    let volume = compose.auth_volume();
    let _ = Command::new("docker")
        .args(["volume", "rm", "-f"])
        .arg(&volume)
        .output();
    create_auth_volume(compose)?;
    if crate::gate::require_devin_login(&volume).is_ok() {
        bail!("an empty {volume} passed the login check");
    }
    crate::workspace::run(
        Command::new("docker")
            .args(["run", "--rm", "--pull=never", "--network", "none", "-u", "0:0", "-v"])
            .arg(format!("{volume}:/home/bridge"))
            .args(["--entrypoint", "/bin/sh"])
            .arg(crate::image::claude_tag())
            .args([
                "-c",
                "mkdir -p /home/bridge/.local/share/devin && echo 'token = \"offline\"' > /home/bridge/.local/share/devin/credentials.toml && chown -R 10002:10002 /home/bridge && chmod 600 /home/bridge/.local/share/devin/credentials.toml",
            ])
            .stdout(std::process::Stdio::null()),
    )?;
    crate::gate::require_devin_login(&volume)
        .map(|()| format!("an empty {volume} refused, one with a credentials file accepted"))
}

/// docker/Dockerfile.live refuses to build without a pinned Devin CLI version and both
/// architectures' digests (its placeholder defaults), before it fetches anything.
fn live_image_refuses_unpinned_cli() -> Result<String> {
    const DIGEST_REFUSAL: &str =
        "a DEVIN_CLI_SHA256_* value is a placeholder, not a sha256: pin both architectures' digests";
    let dockerfile = crate::workspace::workspace_root().join("docker/Dockerfile.live");
    let context = std::env::temp_dir().join(format!("devin-bridge-live-{}", std::process::id()));
    std::fs::create_dir_all(&context)?;
    let build = |args: &[&str]| -> Result<std::process::Output> {
        let output = Command::new("docker")
            // `--force-rm`: the refused step's container is removed too (the classic
            // builder keeps a failed step's container otherwise, one per run and case).
            .args([
                "build",
                "--pull=false",
                "--force-rm",
                "--target",
                "fetch",
                "-f",
            ])
            .arg(&dockerfile)
            .args(args)
            .arg(&context)
            .env("DOCKER_BUILDKIT", "0")
            .output()?;
        Ok(output)
    };
    let cases: [(&[&str], &str); 3] = [
        (
            &[],
            "DEVIN_CLI_VERSION=UNPINNED is not a version: pin the Devin CLI version",
        ),
        (&["--build-arg", "DEVIN_CLI_VERSION=1.2.3"], DIGEST_REFUSAL),
        (
            &[
                "--build-arg",
                "DEVIN_CLI_VERSION=1.2.3",
                "--build-arg",
                "DEVIN_CLI_SHA256_AMD64=0000000000000000000000000000000000000000000000000000000000000000",
                "--build-arg",
                "DEVIN_CLI_SHA256_ARM64=1111111111111111111111111111111111111111111111111111111111111111",
            ],
            DIGEST_REFUSAL,
        ),
    ];
    let result = cases.iter().try_for_each(|(args, needle)| {
        let output = build(args)?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        // A whole line: the echoed RUN command contains the message text too.
        if output.status.success() || !text.lines().any(|line| line.trim() == *needle) {
            bail!("build with {args:?} did not refuse with {needle:?}:\n{text}");
        }
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&context);
    result.map(|()| "refused: no version, no digests, an all-zero digest".to_owned())
}

/// Creates the project's login volume as compose would (the offline profile never mounts it),
/// with compose's labels, so `down -v` and the listings treat it as the project's.
fn create_auth_volume(compose: &Compose) -> Result<()> {
    Ok(crate::workspace::run(
        Command::new("docker")
            .args(["volume", "create", "--label"])
            .arg(format!("com.docker.compose.project={}", compose.project()))
            .args(["--label", "com.docker.compose.volume=devin-auth"])
            .arg(compose.auth_volume())
            .stdout(std::process::Stdio::null()),
    )?)
}

/// `cargo xtask clean` (what it runs on the operator's project, here on the test project):
/// no container or network is left, and the login volume stays.
fn clean_keeps_the_login(compose: &Compose) -> Result<String> {
    let volume = compose.auth_volume();
    create_auth_volume(compose)?;
    compose.clean(false)?;
    let (containers, networks, volumes) = (
        compose.leftovers()?,
        compose.networks()?,
        compose.volumes()?,
    );
    if !containers.is_empty() || !networks.is_empty() {
        bail!("clean left containers {containers:?} and networks {networks:?}");
    }
    if !volumes.contains(&volume) {
        bail!("clean removed the login volume {volume} (volumes now: {volumes:?})");
    }
    Ok(format!("no container or network left; {volume} kept"))
}

/// `cargo xtask clean --all`: the login volume goes too.
fn clean_all_removes_the_login(compose: &Compose) -> Result<String> {
    compose.clean(true)?;
    let volumes = compose.volumes()?;
    if volumes.is_empty() {
        Ok(format!("{} removed", compose.auth_volume()))
    } else {
        bail!("clean --all left volumes {volumes:?}")
    }
}

fn run_checks(compose: &Compose, dirs: &SandboxDirs, key: &str, report: &mut Report) -> Result<()> {
    let started = start_bridge(compose, true)?;
    let bridge = started.container.clone();
    let address = started.address.clone();
    let health = started.health.clone();

    report.check("identities_differ", check_identities(&bridge, &health));
    report.check("hostile_turn_denied", hostile_turn(&address, key));
    report.check(
        "agent_uid_cannot_use_host_files",
        exec_verify(
            &bridge,
            &format!("{AGENT_UID}:{AGENT_UID}"),
            &agent_private_args(),
        ),
    );
    report.check(
        "bridge_reaches_only_the_devin_guard",
        exec_verify(
            &bridge,
            &format!("{HOST_UID}:{HOST_UID}"),
            &bridge_route_args(),
        ),
    );
    report.check(
        "model_discovery",
        discover_models(&started).map(|ids| ids.join(", ")),
    );
    report.check(
        "devin_guard_refuses_anthropic",
        exec_verify(
            &bridge,
            &format!("{HOST_UID}:{HOST_UID}"),
            &["--proxy", "http://network-guard:8080"],
        ),
    );
    report.check(
        "host_claude_code_completes_the_task",
        host_claude_code(&address, key),
    );
    report.check(
        "claude_container_completes_the_task",
        claude_container(compose, dirs),
    );
    report.check(
        "claude_guard_allowed_nothing",
        claude_audit_has_no_allow(&dirs.claude_audit(), true),
    );
    report.check(
        "client_hangup_kills_the_agent_group",
        hangup_kills_agent_group(&address, key, &bridge),
    );
    report.check("no_agent_outlives_its_turn", agents_settled(&bridge));
    report.check(
        "replicas_keep_a_conversation_on_one_replica",
        replicas_affinity(compose.key()),
    );
    report.check(
        "outpost_worker_in_image",
        tempdir("outpost").and_then(|dir| crate::outpost_image::outpost_worker_in_image(&dir)),
    );
    Ok(())
}

/// The `replicas` profile: two bridges on the resident transport behind HAProxy. Three turns of
/// one conversation (one `X-Claude-Code-Session-Id`) through the balancer all land on one
/// replica, which starts the session once and continues it twice; the other sees nothing.
fn replicas_affinity(key: &str) -> Result<String> {
    let replicas = Compose::test_profile("replicas", key.to_owned())?;
    let services = ["bridge-replica-a", "bridge-replica-b", "bridge-proxy"];
    let outcome = (|| {
        replicas.run(&[&["up", "-d"][..], &services[..]].concat())?;
        let address = |service: &str| internal_address(&replicas, &replicas.container(service)?);
        let backends = [address("bridge-replica-a")?, address("bridge-replica-b")?];
        for backend in &backends {
            wait_healthy(backend, key)?;
        }
        let proxy = address("bridge-proxy")?;
        wait_healthy(&proxy, key)?;
        let mut messages =
            vec![serde_json::json!({"role": "user", "content": "Hello. [mock:text]"})];
        for turn in 1..=3 {
            let body = serde_json::json!({
                "model": "devin-cli-agentic/swe-1-7", "max_tokens": 64,
                "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
                "messages": messages,
            });
            let (status, answer) = http_with(
                &proxy,
                "POST",
                "/v1/messages",
                key,
                &[("X-Claude-Code-Session-Id", "container-affinity")],
                &body.to_string(),
            )?;
            if status != 200 {
                bail!("turn {turn} through the balancer: {status} {answer}");
            }
            messages.push(serde_json::json!({"role": "assistant", "content": "Mock answer: the bridge works."}));
            messages.push(
                serde_json::json!({"role": "user", "content": format!("Turn {turn}. [mock:text]")}),
            );
        }
        let mut counts = Vec::new();
        for backend in &backends {
            let health = wait_healthy(backend, key)?;
            let stats = &health["resident"];
            let number = |name: &str| stats[name].as_u64().unwrap_or(0);
            counts.push((number("misses"), number("hits"), number("prompts")));
        }
        match counts.as_slice() {
            [(1, 2, 3), (0, 0, 0)] | [(0, 0, 0), (1, 2, 3)] => Ok(format!(
                "3 turns on one replica (1 new session, 2 continuations); replicas (misses, hits, prompts): {counts:?}"
            )),
            _ => bail!("the conversation did not stay on one replica: (misses, hits, prompts) {counts:?}"),
        }
    })();
    let removed = replicas.run(&[&["rm", "-fsv"][..], &services[..]].concat());
    let result = outcome?;
    removed?;
    Ok(result)
}

/// A turn whose agent tries to reach the host's files; every probe must be denied.
fn hostile_turn(address: &str, key: &str) -> Result<String> {
    let private = [
        "probe-read /run/devin-bridge-secrets/bridge_api_key",
        "probe-write /run/devin-bridge/cache",
        "probe-write /run/devin-bridge",
        "probe-connect /run/devin-bridge/control.sock",
    ];
    let prompt = format!(
        "[mock:probe]\n{}\nprobe-write /home/bridge/tmp\n",
        private.join("\n")
    );
    let body = serde_json::json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": prompt}],
    })
    .to_string();
    let (status, body) = http(address, "POST", "/v1/messages", key, &body)?;
    if status != 200 {
        bail!("status {status}: {body}");
    }
    let reply: serde_json::Value = serde_json::from_str(&body)?;
    let text = reply["content"][0]["text"].as_str().unwrap_or_default();
    for probe in private {
        let denied = text
            .lines()
            .any(|line| line.starts_with(probe) && line.contains(": denied"));
        if !denied {
            bail!("{probe} was not denied:\n{text}");
        }
    }
    if !text.contains("probe-write /home/bridge/tmp: allowed") {
        bail!("the probe could not even use its own TMPDIR:\n{text}");
    }
    if !text
        .lines()
        .any(|line| line == format!("Uid: {AGENT_UID} {AGENT_UID} {AGENT_UID} {AGENT_UID}"))
    {
        bail!("the agent did not run as {AGENT_UID}:\n{text}");
    }
    Ok("key file, compile cache, host directory and control socket all denied".into())
}

/// The pinned Claude Code on this machine, against the containerised bridge.
fn host_claude_code(address: &str, key: &str) -> Result<String> {
    let claude = crate::workspace::claude_code()?;
    let work = tempdir("host-claude")?;
    let project = work.join("project");
    write_demo_project(&project, None)?;
    let home = work.join("home");
    std::fs::create_dir_all(&home)?;
    let output = Command::new(claude)
        .args(["-p", DEMO_PROMPT])
        .args(CLAUDE_PRINT_FLAGS)
        .current_dir(&project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://{address}:{BRIDGE_PORT}"),
        )
        .env("ANTHROPIC_API_KEY", key)
        .env("ANTHROPIC_MODEL", "devin-cli-agentic/swe-1-7")
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", "devin-cli-agentic/swe-1-7")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .output()?;
    let result = final_result(&output)?;
    demo_fixed(&project).with_context(|| {
        format!(
            "Claude Code finished with {result:?}; its stream:\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    })?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(format!("math.js fixed, npm test passes; result: {result}"))
}

/// The offline twin of `launch`: Claude Code in its own container, proxy = deny-all guard.
fn claude_container(compose: &Compose, dirs: &SandboxDirs) -> Result<String> {
    let output = compose.run_claude_print(DEMO_PROMPT)?;
    crate::evidence::Evidence::open()?.write(
        "claude-stream.jsonl",
        &output.stdout,
        &[compose.key()],
    )?;
    let result = final_result(&output)?;
    demo_fixed(&dirs.workspace())?;
    Ok(format!(
        "math.js fixed inside the Claude container; result: {result}"
    ))
}

/// A turn whose agent starts a grandchild (`mock-devin --grandchild-sleep 300`) and hangs; the client hangs up, and
/// the host (uid 10001) must kill the agent's whole process group (uid 10002): CAP_KILL at work.
fn hangup_kills_agent_group(address: &str, key: &str, bridge: &str) -> Result<String> {
    let body = serde_json::json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "[mock:grandchild]"}],
    })
    .to_string();
    let mut stream = TcpStream::connect_timeout(
        &format!("{address}:{BRIDGE_PORT}").parse()?,
        Duration::from_secs(5),
    )?;
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nHost: bridge\r\nx-api-key: {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let grandchild = |list: &[(u32, u32, String)]| {
        list.iter()
            .any(|(uid, _, args)| *uid == AGENT_UID && args.contains("--grandchild-sleep"))
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while !grandchild(&processes(bridge)?) {
        if Instant::now() > deadline {
            bail!("the agent's grandchild never started");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(stream);
    let hung_up = Instant::now();
    while grandchild(&processes(bridge)?) {
        if hung_up.elapsed() > Duration::from_secs(15) {
            bail!("the agent's grandchild outlived the client's hang-up by 15 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(format!(
        "agent and grandchild (uid {AGENT_UID}) gone {} ms after the hang-up",
        hung_up.elapsed().as_millis()
    ))
}

/// After the turns: at most the prewarmed agent is alive, and nothing else of the agent's uid.
fn agents_settled(bridge: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let agents: Vec<_> = processes(bridge)?
            .into_iter()
            .filter(|(uid, _, _)| *uid == AGENT_UID)
            .collect();
        let stray = agents
            .iter()
            .any(|(_, _, args)| !crate::gate::is_agent_argv(args));
        if agents.len() <= 1 && !stray {
            return Ok(format!(
                "{} agent process(es) of uid {AGENT_UID}: the prewarmed one",
                agents.len()
            ));
        }
        if Instant::now() > deadline {
            bail!("agent processes still alive: {agents:?}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn tempdir(name: &str) -> Result<PathBuf> {
    let dir = workspace_root()
        .join("target")
        .join("container-tests")
        .join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
