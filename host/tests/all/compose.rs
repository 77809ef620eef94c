//! What docker/compose.yml and the container policies declare, checked by parsing the files
//! (`cargo xtask test-container` proves the running containers): every service read-only, all
//! capabilities dropped, no-new-privileges, init, images never pulled; the bridge starts as
//! root with exactly SETUID, SETGID and KILL (the host then switches to its own user), every
//! other service runs as 10001 with none; no Docker socket or absolute host path mounted; only
//! the Devin-side guard has a route out; Claude Code's proxy is the deny-all guard and the bridge
//! is reached directly.

use std::path::Path;

use devin_bridge_policy::ModePolicy as _;
use devin_bridge_summarizer::policy::SummarizerPolicy;
use devin_bridge_summarizer::sandbox::TRUSTED_PROXY;
use yaml_rust2::{Yaml, YamlLoader};

use crate::common::yaml;
use yaml::strings;

fn docker_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../docker"))
}

fn compose() -> Yaml {
    let text =
        std::fs::read_to_string(docker_dir().join("compose.yml")).expect("docker/compose.yml");
    YamlLoader::load_from_str(&text)
        .expect("valid YAML")
        .into_iter()
        .next()
        .expect("one document")
}

fn networks_of(service: &Yaml) -> Vec<String> {
    match &service["networks"] {
        Yaml::Array(_) => strings(&service["networks"]),
        Yaml::Hash(map) => map
            .keys()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// The services that run the bridge host: started as root with exactly the capabilities to run
/// agents under their own uid (the host switches to `[server] user` itself).
const BRIDGE_SERVICES: [&str; 4] = [
    "bridge-offline",
    "bridge-live",
    "bridge-replica-a",
    "bridge-replica-b",
];

#[test]
fn compose_file_declares_every_service_hardened() {
    let compose = compose();
    let services = compose["services"].as_hash().expect("services");
    assert!(services.len() >= 6);
    for (name, service) in services {
        let name = name.as_str().expect("service name");
        if BRIDGE_SERVICES.contains(&name) {
            assert_eq!(service["user"].as_str(), Some("0:0"), "{name}: user");
            let mut added = strings(&service["cap_add"]);
            added.sort();
            assert_eq!(added, ["KILL", "SETGID", "SETUID"], "{name}: cap_add");
        } else {
            assert_eq!(
                service["user"].as_str(),
                Some("10001:10001"),
                "{name}: user"
            );
            assert!(service["cap_add"].is_badvalue(), "{name}: cap_add");
        }
        assert_eq!(
            service["read_only"].as_bool(),
            Some(true),
            "{name}: read_only"
        );
        assert_eq!(strings(&service["cap_drop"]), ["ALL"], "{name}: cap_drop");
        assert!(
            strings(&service["security_opt"]).contains(&"no-new-privileges:true".to_owned()),
            "{name}: no-new-privileges"
        );
        assert_eq!(service["init"].as_bool(), Some(true), "{name}: init");
        assert_eq!(
            service["pull_policy"].as_str(),
            Some("never"),
            "{name}: images come from `cargo xtask image`, never a registry"
        );
        assert!(
            service["privileged"].is_badvalue(),
            "{name}: privileged must not be set"
        );
        assert!(
            service["network_mode"].is_badvalue(),
            "{name}: no host networking"
        );
        for tmpfs in strings(&service["tmpfs"]) {
            assert!(
                tmpfs.contains("nosuid") && tmpfs.contains("size="),
                "{name}: tmpfs {tmpfs}"
            );
        }
        for volume in strings(&service["volumes"]) {
            let source = volume.split(':').next().unwrap_or_default();
            assert!(
                !volume.contains("docker.sock"),
                "{name}: Docker socket mounted"
            );
            assert!(
                !source.starts_with('/') && !source.starts_with('~') && !source.contains("$HOME"),
                "{name}: host path {source} mounted"
            );
            assert!(
                !source.contains(".ssh") && !source.contains(".aws") && !source.contains(".claude"),
                "{name}: credentials mounted"
            );
        }
        let networks = networks_of(service);
        assert!(!networks.is_empty(), "{name}: no network");
        if name != "network-guard" {
            assert_eq!(
                networks,
                ["internal"],
                "{name}: only the Devin-side guard may reach the outside"
            );
            assert_eq!(
                strings(&service["dns"]),
                ["127.0.0.1"],
                "{name}: outside names must not resolve on the internal network"
            );
        }
    }
}

#[test]
fn compose_file_gives_the_host_and_the_agent_private_directories_of_their_own_uids() {
    let compose = compose();
    let offline = strings(&compose["services"]["bridge-offline"]["tmpfs"]);
    let mount = |path: &str| {
        offline
            .iter()
            .find(|entry| entry.split(':').next() == Some(path))
            .unwrap_or_else(|| panic!("no tmpfs at {path}: {offline:?}"))
            .clone()
    };
    for (path, uid) in [
        ("/run/devin-bridge", "10001"),
        ("/home/bridge", "10002"),
        ("/home/bridge/tmp", "10002"),
    ] {
        let entry = mount(path);
        assert!(
            entry.contains(&format!("uid={uid}")) && entry.contains("mode=0700"),
            "{path}: {entry}"
        );
    }
    assert!(mount("/run/devin-bridge").contains("noexec"));
}

#[test]
fn compose_file_gives_egress_only_to_the_devin_guard() {
    let compose = compose();
    assert_eq!(
        compose["networks"]["internal"]["internal"].as_bool(),
        Some(true)
    );
    let egress_users: Vec<String> = compose["services"]
        .as_hash()
        .expect("services")
        .iter()
        .filter(|(_, service)| networks_of(service).contains(&"egress".to_owned()))
        .filter_map(|(name, _)| name.as_str().map(str::to_owned))
        .collect();
    assert_eq!(egress_users, ["network-guard"]);
}

#[test]
fn compose_file_points_claude_code_at_the_bridge_and_the_deny_all_guard() {
    let compose = compose();
    let claude = &compose["services"]["claude"];
    let env = &claude["environment"];
    assert_eq!(
        env["ANTHROPIC_BASE_URL"].as_str(),
        Some("http://bridge:20128")
    );
    assert_eq!(
        env["HTTPS_PROXY"].as_str(),
        Some("http://claude-guard:8080")
    );
    assert_eq!(env["HTTP_PROXY"].as_str(), Some("http://claude-guard:8080"));
    assert_eq!(env["NO_PROXY"].as_str(), Some("bridge"));
    // The only key Claude Code gets is the bridge's local key, interpolated at run time.
    assert!(
        env["ANTHROPIC_API_KEY"]
            .as_str()
            .is_some_and(|value| value.starts_with("${BRIDGE_API_KEY:?")),
        "claude: ANTHROPIC_API_KEY must be the bridge's local key from the environment"
    );
    for secret in ["CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"] {
        assert!(
            env[secret].is_badvalue(),
            "claude: {secret} must not be baked into the compose file"
        );
    }
    let guard = &compose["services"]["claude-guard"]["command"];
    assert!(strings(guard)
        .iter()
        .any(|arg| arg.ends_with("guard-deny-all.toml")));
    let devin_guard = &compose["services"]["network-guard"]["command"];
    assert!(strings(devin_guard)
        .iter()
        .any(|arg| arg.ends_with("guard-devin.toml")));
}

#[test]
fn container_policy_files_load_with_separate_identities_and_the_live_one_names_only_the_trusted_proxy(
) {
    let policies = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../policies"));
    for file in [
        "container-offline.toml",
        "container-live.toml",
        "container-replica.toml",
    ] {
        let policy =
            SummarizerPolicy::load(&policies.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(policy.server.user.as_deref(), Some("bridge"), "{file}");
        assert_eq!(policy.agent.user.as_deref(), Some("bridge-agent"), "{file}");
        assert!(policy.server.require_key, "{file}");
        let key = policy.server.api_key_file.clone().expect("key file");
        assert!(
            key.starts_with("/run/devin-bridge-secrets"),
            "{file}: {key:?}"
        );
        let cache = policy.engine.cache_dir.clone().expect("cache dir");
        assert!(cache.starts_with("/run/devin-bridge"), "{file}: {cache:?}");
        let socket = policy.control.socket.clone().expect("control socket");
        assert!(
            socket.starts_with("/run/devin-bridge"),
            "{file}: {socket:?}"
        );
        assert_eq!(policy.agent.home, Path::new("/home/bridge"), "{file}");
    }
    let live = SummarizerPolicy::load(&policies.join("container-live.toml")).expect("live");
    assert_eq!(live.agent.proxy.as_deref(), Some(TRUSTED_PROXY));
    assert!(!live.agent.offline);
}

#[test]
fn the_replicas_run_the_resident_transport_behind_a_proxy_that_hashes_on_the_conversation() {
    let compose = compose();
    let proxy = &compose["services"]["bridge-proxy"];
    assert_eq!(strings(&proxy["profiles"]), ["replicas"]);
    assert_eq!(proxy["image"].as_str(), Some("devin-bridge-proxy:haproxy"));
    for name in ["bridge-replica-a", "bridge-replica-b"] {
        let replica = &compose["services"][name];
        assert_eq!(strings(&replica["profiles"]), ["replicas"], "{name}");
        assert!(
            strings(&replica["command"])
                .iter()
                .any(|arg| arg.ends_with("container-replica.toml")),
            "{name}"
        );
    }
    let policies = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../policies"));
    let replica =
        SummarizerPolicy::load(&policies.join("container-replica.toml")).expect("replica policy");
    assert_eq!(
        replica.agent.transport,
        devin_bridge_summarizer::policy::Transport::Resident
    );
    let config =
        std::fs::read_to_string(docker_dir().join("haproxy.cfg")).expect("docker/haproxy.cfg");
    let directives: Vec<&str> = config
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .collect();
    assert!(directives.contains(&"balance hdr(X-Claude-Code-Session-Id)"));
    assert!(directives.contains(&"hash-type consistent"));
    for server in ["bridge-replica-a:20128", "bridge-replica-b:20128"] {
        assert!(
            directives
                .iter()
                .any(|line| line.starts_with("server ") && line.contains(server)),
            "{server}"
        );
    }
}
