//! What deploy/kubernetes declares for the outpost workers, checked by parsing the manifests:
//! a StatefulSet whose pod name is the worker's acceptor id, the token only through a
//! secretKeyRef, a per-worker volume holding the cache, data and work dirs, CPU and memory
//! requests and limits, a grace period longer than the worker's shutdown, hardened pods, no
//! image pulls by `Always`, and a kustomization that applies every manifest but the example
//! Secret.
//!
//! Each invariant is a check over the files' text. The real files must pass every check, and
//! `every_check_refuses_a_copy_that_breaks_it` edits a copy of the files in each way a check
//! is meant to catch and requires that check to fail, so no check can silently stop checking.

use devin_bridge_policy::ModePolicy as _;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use crate::common::yaml;
use yaml::strings;

/// How long the worker takes at most to stop claiming, end its remotes and release its claims
/// after SIGTERM; the pod's grace period must leave margin beyond it.
const WORKER_SHUTDOWN_BUDGET_SECS: i64 = 60;
/// The smallest grace period we accept, margin included.
const MIN_GRACE_SECS: i64 = 90;
// Raising the worker's budget must raise the minimum grace with it.
const _: () = assert!(MIN_GRACE_SECS > WORKER_SHUTDOWN_BUDGET_SECS);
const NAMESPACE: &str = "devin-outpost";
const EXAMPLE_SECRET: &str = "secret.example.yaml";
const KUSTOMIZATION: &str = "kustomization.yaml";
const TOKEN_ENV: &str = "DEVIN_OUTPOSTS_TOKEN";
const ACCEPTOR_ENV: &str = "DEVIN_WORKER_ACCEPTOR_ID";
const CACHE_ENV: &str = "DEVIN_WORKER_CACHE_DIR";
const WORKER_COMMAND: [&str; 5] = [
    "devin-bridge",
    "outpost",
    "start",
    "--policy",
    "/etc/devin-bridge/outpost.toml",
];

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

/// The YAML files of deploy/kubernetes, by file name, as text.
#[derive(Clone)]
struct Deploy {
    files: BTreeMap<String, String>,
}

impl Deploy {
    fn real() -> Self {
        let mut files = BTreeMap::new();
        for entry in std::fs::read_dir(deploy_dir()).expect("deploy/kubernetes exists") {
            let path = entry.expect("directory entry").path();
            if path
                .extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
            {
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .expect("UTF-8 file name")
                    .to_owned();
                let text = std::fs::read_to_string(&path).expect("readable manifest");
                files.insert(name, text);
            }
        }
        Self { files }
    }

    /// A copy with `from` replaced by `to` in `file` (which must contain `from`).
    fn edited(&self, file: &str, from: &str, to: &str) -> Self {
        let mut copy = self.clone();
        let text = copy
            .files
            .get_mut(file)
            .unwrap_or_else(|| panic!("no {file}"));
        assert!(text.contains(from), "{file} does not contain {from:?}");
        *text = text.replacen(from, to, 1);
        copy
    }

    fn documents(&self, file: &str) -> Result<Vec<Yaml>, String> {
        let text = self.files.get(file).ok_or(format!("no {file}"))?;
        YamlLoader::load_from_str(text).map_err(|error| format!("{file}: {error}"))
    }

    /// The manifests other than the kustomization, with their documents.
    fn manifests(&self) -> Result<Vec<(String, Yaml)>, String> {
        let mut all = Vec::new();
        for file in self.files.keys().filter(|f| *f != KUSTOMIZATION) {
            for doc in self.documents(file)? {
                all.push((file.clone(), doc));
            }
        }
        Ok(all)
    }

    /// The manifests `kubectl apply -k` applies.
    fn applied(&self) -> Result<Vec<(String, Yaml)>, String> {
        let listed = kustomization_resources(self)?;
        Ok(self
            .manifests()?
            .into_iter()
            .filter(|(file, _)| listed.contains(file))
            .collect())
    }

    fn of_kind(&self, kind: &str) -> Result<Vec<Yaml>, String> {
        Ok(self
            .manifests()?
            .into_iter()
            .filter(|(_, doc)| doc["kind"].as_str() == Some(kind))
            .map(|(_, doc)| doc)
            .collect())
    }

    fn statefulset(&self) -> Result<Yaml, String> {
        let mut found = self.of_kind("StatefulSet")?;
        ensure(found.len() == 1, "exactly one StatefulSet")?;
        found.pop().ok_or("no StatefulSet".into())
    }
}

/// `Ok` when `condition` holds; else the promise `what` states, as broken.
fn ensure(condition: bool, what: &str) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(format!("not kept: {what}"))
    }
}

fn items(value: &Yaml) -> Vec<Yaml> {
    value.as_vec().cloned().unwrap_or_default()
}

fn pod_spec(statefulset: &Yaml) -> Yaml {
    statefulset["spec"]["template"]["spec"].clone()
}

/// Every container of the pod, init containers included.
fn containers(pod: &Yaml) -> Vec<Yaml> {
    let mut all = items(&pod["containers"]);
    all.extend(items(&pod["initContainers"]));
    all
}

/// The container that runs the worker.
fn worker(pod: &Yaml) -> Result<Yaml, String> {
    let mut found: Vec<Yaml> = items(&pod["containers"])
        .into_iter()
        .filter(|c| strings(&c["command"]).first().map(String::as_str) == Some("devin-bridge"))
        .collect();
    ensure(found.len() == 1, "exactly one container runs devin-bridge")?;
    found.pop().ok_or("no worker container".into())
}

fn env_var(container: &Yaml, name: &str) -> Result<Yaml, String> {
    items(&container["env"])
        .into_iter()
        .find(|e| e["name"].as_str() == Some(name))
        .ok_or(format!("the worker has no {name}"))
}

fn kustomization_resources(deploy: &Deploy) -> Result<BTreeSet<String>, String> {
    let docs = deploy.documents(KUSTOMIZATION)?;
    let doc = docs.first().ok_or("empty kustomization")?;
    Ok(strings(&doc["resources"]).into_iter().collect())
}

/// Is `path` inside (or equal to) `dir`, component-wise?
fn under(path: &str, dir: &str) -> bool {
    Path::new(path).is_absolute() && Path::new(path).starts_with(dir)
}

fn workers_are_a_parallel_statefulset(deploy: &Deploy) -> Result<(), String> {
    for kind in ["Deployment", "DaemonSet", "ReplicaSet", "Pod", "Job"] {
        ensure(
            deploy.of_kind(kind)?.is_empty(),
            &format!("the workers run as a StatefulSet, not a {kind}"),
        )?;
    }
    let set = deploy.statefulset()?;
    ensure(
        set["spec"]["podManagementPolicy"].as_str() == Some("Parallel"),
        "podManagementPolicy is Parallel",
    )?;
    ensure(
        set["spec"]["replicas"].as_i64().is_some_and(|n| n >= 1),
        "replicas is an integer >= 1",
    )?;
    let worker = worker(&pod_spec(&set))?;
    ensure(
        strings(&worker["command"]) == WORKER_COMMAND,
        "the worker's command is `devin-bridge outpost start --policy /etc/devin-bridge/outpost.toml`",
    )?;
    ensure(
        worker["image"].as_str() == Some("devin-bridge:outpost"),
        "the image is devin-bridge:outpost",
    )?;
    let selector = &set["spec"]["selector"]["matchLabels"];
    let labels = &set["spec"]["template"]["metadata"]["labels"];
    let selected = selector.as_hash().is_some_and(|wanted| {
        !wanted.is_empty()
            && wanted
                .iter()
                .all(|(key, value)| &labels[key.as_str().unwrap_or("")] == value)
    });
    ensure(selected, "the selector matches the pod template's labels")
}

fn the_acceptor_id_is_the_pod_name(deploy: &Deploy) -> Result<(), String> {
    let worker = worker(&pod_spec(&deploy.statefulset()?))?;
    let acceptor = env_var(&worker, ACCEPTOR_ENV)?;
    ensure(
        acceptor["value"].is_badvalue(),
        "the acceptor id is not a literal (every pod would share it)",
    )?;
    ensure(
        acceptor["valueFrom"]["fieldRef"]["fieldPath"].as_str() == Some("metadata.name"),
        "the acceptor id comes from metadata.name through a fieldRef",
    )
}

fn the_token_comes_only_from_the_secret(deploy: &Deploy) -> Result<(), String> {
    let pod = pod_spec(&deploy.statefulset()?);
    let worker = worker(&pod)?;
    let token = env_var(&worker, TOKEN_ENV)?;
    ensure(token["value"].is_badvalue(), "the token is not a literal")?;
    let reference = &token["valueFrom"]["secretKeyRef"];
    let examples = deploy.documents(EXAMPLE_SECRET)?;
    let example = examples.first().ok_or("empty example Secret")?;
    ensure(
        reference["name"].as_str().is_some()
            && reference["name"] == example["metadata"]["name"]
            && reference["key"].as_str() == Some("token"),
        "the token comes from the example Secret's name, key `token`, through a secretKeyRef",
    )?;
    let placeholder = example["stringData"]["token"].as_str().unwrap_or("");
    ensure(
        placeholder.starts_with("REPLACE_")
            && placeholder
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_'),
        "the example Secret holds a REPLACE_... placeholder, not a token",
    )?;
    ensure(
        example["data"].is_badvalue(),
        "the example Secret has no base64 `data`",
    )?;
    for container in containers(&pod) {
        let words = [strings(&container["command"]), strings(&container["args"])].concat();
        ensure(
            !words
                .iter()
                .any(|w| w.to_ascii_lowercase().contains("token") || w.contains("$(")),
            "no command line mentions the token or expands a variable into it",
        )?;
        for var in items(&container["env"]) {
            let name = var["name"].as_str().unwrap_or("").to_ascii_uppercase();
            let secret_like = ["TOKEN", "SECRET", "PASSWORD", "KEY"]
                .iter()
                .any(|word| name.contains(word));
            ensure(
                !secret_like || var["value"].is_badvalue(),
                &format!("{name} is not given as a literal"),
            )?;
        }
        for source in items(&container["envFrom"]) {
            ensure(
                source["secretRef"].is_badvalue(),
                "no envFrom of a whole Secret (only the token key, by secretKeyRef)",
            )?;
        }
    }
    for (file, doc) in deploy.applied()? {
        ensure(
            doc["kind"].as_str() != Some("Secret"),
            &format!("{file}: no Secret is applied from the repository"),
        )?;
        let text = deploy.files.get(&file).map(String::as_str).unwrap_or("");
        ensure(
            placeholder.is_empty() || !text.contains(placeholder),
            &format!("{file}: the token placeholder is not applied"),
        )?;
    }
    let kustomization = deploy.documents(KUSTOMIZATION)?;
    ensure(
        kustomization
            .first()
            .is_some_and(|k| k["secretGenerator"].is_badvalue()),
        "the kustomization generates no Secret with literals",
    )
}

fn a_claim_template_holds_the_cache_data_and_work_dirs(deploy: &Deploy) -> Result<(), String> {
    let set = deploy.statefulset()?;
    let pod = pod_spec(&set);
    let worker = worker(&pod)?;
    let templates = items(&set["spec"]["volumeClaimTemplates"]);
    let template_names: Vec<&str> = templates
        .iter()
        .filter_map(|t| t["metadata"]["name"].as_str())
        .collect();
    ensure(
        !template_names.is_empty(),
        "the StatefulSet has a volumeClaimTemplate",
    )?;
    for template in &templates {
        ensure(
            !template["spec"]["resources"]["requests"]["storage"].is_badvalue(),
            "the volumeClaimTemplate requests storage",
        )?;
    }
    let mounts = items(&worker["volumeMounts"]);
    let state = mounts
        .iter()
        .find(|m| {
            m["name"]
                .as_str()
                .is_some_and(|name| template_names.contains(&name))
        })
        .ok_or("the worker mounts the claim template's volume")?;
    let state_dir = state["mountPath"].as_str().unwrap_or("");
    ensure(
        state["readOnly"].as_bool() != Some(true),
        "the state volume is writable",
    )?;
    ensure(
        state["subPath"].is_badvalue(),
        "the whole state volume is mounted",
    )?;
    for other in &mounts {
        let path = other["mountPath"].as_str().unwrap_or("");
        ensure(
            std::ptr::eq(other, state) || !under(path, state_dir),
            &format!("nothing is mounted over the state volume at {path}"),
        )?;
    }
    let cache = env_var(&worker, CACHE_ENV)?;
    ensure(
        cache["value"]
            .as_str()
            .is_some_and(|dir| under(dir, state_dir) && dir != state_dir),
        &format!("{CACHE_ENV} is a directory on the state volume ({state_dir})"),
    )?;

    // The policy: the --policy file is a key of the ConfigMap mounted at its directory.
    let policy_path = Path::new(WORKER_COMMAND[4]);
    let policy_dir = policy_path.parent().and_then(Path::to_str).unwrap_or("");
    let policy_key = policy_path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let policy_mount = mounts
        .iter()
        .find(|m| m["mountPath"].as_str() == Some(policy_dir))
        .ok_or("the policy directory is mounted")?;
    ensure(
        policy_mount["readOnly"].as_bool() == Some(true),
        "the policy is mounted read-only",
    )?;
    let volume = items(&pod["volumes"])
        .into_iter()
        .find(|v| v["name"] == policy_mount["name"])
        .ok_or("the policy mount has a volume")?;
    let config_name = volume["configMap"]["name"]
        .as_str()
        .ok_or("the policy volume is a ConfigMap")?;
    let config = deploy
        .of_kind("ConfigMap")?
        .into_iter()
        .find(|c| c["metadata"]["name"].as_str() == Some(config_name))
        .ok_or(format!("the ConfigMap {config_name} is defined"))?;
    let policy_text = config["data"][policy_key]
        .as_str()
        .ok_or(format!("the ConfigMap holds {policy_key}"))?;
    let policy: toml::Table = policy_text
        .parse()
        .map_err(|error| format!("the policy is not TOML: {error}"))?;
    ensure(
        policy.get("mode").and_then(toml::Value::as_str) == Some("outpost"),
        "the policy's mode is outpost",
    )?;
    for key in ["work_dir", "data_dir"] {
        let dir = policy
            .get("outpost")
            .and_then(|outpost| outpost.get(key))
            .and_then(toml::Value::as_str)
            .unwrap_or("");
        ensure(
            under(dir, state_dir) && dir != state_dir,
            &format!("[outpost] {key} is a directory on the state volume ({state_dir})"),
        )?;
    }
    Ok(())
}

fn cpu_and_memory_are_requested_and_limited(deploy: &Deploy) -> Result<(), String> {
    let pod = pod_spec(&deploy.statefulset()?);
    for container in containers(&pod) {
        let name = container["name"].as_str().unwrap_or("?");
        for kind in ["requests", "limits"] {
            for resource in ["cpu", "memory"] {
                let value = &container["resources"][kind][resource];
                let set = value.as_str().is_some_and(|v| !v.trim().is_empty())
                    || value.as_i64().is_some_and(|v| v > 0)
                    || value.as_f64().is_some_and(|v| v > 0.0);
                ensure(set, &format!("{name}: resources.{kind}.{resource} is set"))?;
            }
        }
    }
    Ok(())
}

fn the_grace_period_outlasts_the_worker_shutdown(deploy: &Deploy) -> Result<(), String> {
    let grace = pod_spec(&deploy.statefulset()?)["terminationGracePeriodSeconds"]
        .as_i64()
        .ok_or("terminationGracePeriodSeconds is an integer")?;
    ensure(
        grace >= MIN_GRACE_SECS,
        &format!(
            "terminationGracePeriodSeconds {grace} is at least {MIN_GRACE_SECS} and more than the worker's {WORKER_SHUTDOWN_BUDGET_SECS} s shutdown"
        ),
    )
}

fn pods_are_hardened(deploy: &Deploy) -> Result<(), String> {
    let pod = pod_spec(&deploy.statefulset()?);
    let pod_context = &pod["securityContext"];
    for key in ["hostNetwork", "hostPID", "hostIPC"] {
        ensure(pod[key].as_bool() != Some(true), &format!("no {key}"))?;
    }
    ensure(
        items(&pod["volumes"])
            .iter()
            .all(|v| v["hostPath"].is_badvalue()),
        "no hostPath volume",
    )?;
    // Set for the whole pod, so that a container added later inherits them.
    ensure(
        pod_context["runAsNonRoot"].as_bool() == Some(true),
        "the pod runs as non-root",
    )?;
    ensure(
        pod_context["seccompProfile"]["type"].as_str() == Some("RuntimeDefault"),
        "the pod's seccomp profile is RuntimeDefault",
    )?;
    ensure(
        pod_context["runAsUser"].as_i64() != Some(0),
        "the pod does not run as uid 0",
    )?;
    for container in containers(&pod) {
        let name = container["name"].as_str().unwrap_or("?");
        let context = &container["securityContext"];
        // A container may repeat the pod's settings, never weaken them.
        ensure(
            context["runAsNonRoot"].is_badvalue()
                || context["runAsNonRoot"].as_bool() == Some(true),
            &format!("{name}: runAsNonRoot"),
        )?;
        ensure(
            context["runAsUser"].as_i64() != Some(0),
            &format!("{name}: not run as uid 0"),
        )?;
        ensure(
            context["seccompProfile"].is_badvalue()
                || context["seccompProfile"]["type"].as_str() == Some("RuntimeDefault"),
            &format!("{name}: seccomp RuntimeDefault"),
        )?;
        ensure(
            context["allowPrivilegeEscalation"].as_bool() == Some(false),
            &format!("{name}: allowPrivilegeEscalation false"),
        )?;
        ensure(
            context["readOnlyRootFilesystem"].as_bool() == Some(true),
            &format!("{name}: readOnlyRootFilesystem"),
        )?;
        ensure(
            context["privileged"].as_bool() != Some(true),
            &format!("{name}: not privileged"),
        )?;
        ensure(
            strings(&context["capabilities"]["drop"]) == ["ALL"],
            &format!("{name}: capabilities drop ALL"),
        )?;
        ensure(
            items(&context["capabilities"]["add"]).is_empty(),
            &format!("{name}: no capability added"),
        )?;
    }
    // Whatever the document, nowhere a host namespace or a privileged container.
    for (file, doc) in deploy.manifests()? {
        if let Some(key) =
            enabled_anywhere(&doc, &["hostNetwork", "hostPID", "hostIPC", "privileged"])
        {
            return Err(format!("{file}: {key} is true"));
        }
    }
    Ok(())
}

/// The first of `keys` set to true anywhere inside `value`.
fn enabled_anywhere(value: &Yaml, keys: &[&str]) -> Option<String> {
    match value {
        Yaml::Hash(map) => map.iter().find_map(|(key, inner)| {
            let name = key.as_str().unwrap_or("");
            if keys.contains(&name) && inner.as_bool() == Some(true) {
                Some(name.to_owned())
            } else {
                enabled_anywhere(inner, keys)
            }
        }),
        Yaml::Array(list) => list.iter().find_map(|inner| enabled_anywhere(inner, keys)),
        _ => None,
    }
}

fn images_are_never_pulled_always(deploy: &Deploy) -> Result<(), String> {
    let pod = pod_spec(&deploy.statefulset()?);
    for container in containers(&pod) {
        let name = container["name"].as_str().unwrap_or("?");
        // Unset, the policy defaults to Always for `:latest` or an untagged image.
        let policy = container["imagePullPolicy"].as_str().unwrap_or("Always");
        ensure(
            policy == "IfNotPresent" || policy == "Never",
            &format!("{name}: imagePullPolicy {policy} (IfNotPresent or Never, never Always)"),
        )?;
    }
    Ok(())
}

fn the_kustomization_applies_every_manifest_but_the_example_secret(
    deploy: &Deploy,
) -> Result<(), String> {
    let listed = kustomization_resources(deploy)?;
    let wanted: BTreeSet<String> = deploy
        .files
        .keys()
        .filter(|f| *f != KUSTOMIZATION && *f != EXAMPLE_SECRET)
        .cloned()
        .collect();
    for file in &wanted {
        ensure(
            listed.contains(file),
            &format!("the kustomization lists {file}"),
        )?;
    }
    ensure(
        !listed.contains(EXAMPLE_SECRET),
        "the kustomization does not apply the example Secret (it would overwrite the real token)",
    )?;
    for file in &listed {
        ensure(
            deploy.files.contains_key(file),
            &format!("the kustomization's {file} exists"),
        )?;
    }
    Ok(())
}

fn every_manifest_is_a_named_object_in_the_namespace(deploy: &Deploy) -> Result<(), String> {
    let manifests = deploy.manifests()?;
    ensure(!manifests.is_empty(), "there are manifests")?;
    for (file, doc) in manifests {
        for key in ["apiVersion", "kind"] {
            ensure(doc[key].as_str().is_some(), &format!("{file}: {key}"))?;
        }
        ensure(
            doc["metadata"]["name"].as_str().is_some(),
            &format!("{file}: metadata.name"),
        )?;
        let kind = doc["kind"].as_str().unwrap_or("");
        let namespace = if kind == "Namespace" {
            doc["metadata"]["name"].as_str()
        } else {
            doc["metadata"]["namespace"].as_str()
        };
        ensure(
            namespace == Some(NAMESPACE),
            &format!("{file}: in the {NAMESPACE} namespace"),
        )?;
    }
    Ok(())
}

type Check = fn(&Deploy) -> Result<(), String>;

const CHECKS: [(&str, Check); 10] = [
    ("statefulset", workers_are_a_parallel_statefulset),
    ("acceptor id", the_acceptor_id_is_the_pod_name),
    ("token", the_token_comes_only_from_the_secret),
    (
        "state volume",
        a_claim_template_holds_the_cache_data_and_work_dirs,
    ),
    ("resources", cpu_and_memory_are_requested_and_limited),
    ("grace", the_grace_period_outlasts_the_worker_shutdown),
    ("hardening", pods_are_hardened),
    ("pull policy", images_are_never_pulled_always),
    (
        "kustomization",
        the_kustomization_applies_every_manifest_but_the_example_secret,
    ),
    ("objects", every_manifest_is_a_named_object_in_the_namespace),
];

fn check(name: &str) -> Check {
    CHECKS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, check)| *check)
        .unwrap_or_else(|| panic!("no check {name}"))
}

#[test]
fn the_manifests_keep_every_invariant() {
    let deploy = Deploy::real();
    for file in [
        "namespace.yaml",
        EXAMPLE_SECRET,
        "configmap.yaml",
        "statefulset.yaml",
        KUSTOMIZATION,
    ] {
        assert!(deploy.files.contains_key(file), "deploy/kubernetes/{file}");
    }
    for (name, check) in CHECKS {
        check(&deploy).unwrap_or_else(|problem| panic!("{name}: {problem}"));
    }
}

/// (check, file, text to replace, replacement): each edit breaks one promise.
const BREAKS: &[(&str, &str, &str, &str)] = &[
    ("statefulset", "statefulset.yaml", "kind: StatefulSet", "kind: Deployment"),
    ("statefulset", "statefulset.yaml", "podManagementPolicy: Parallel", "podManagementPolicy: OrderedReady"),
    ("statefulset", "statefulset.yaml", "replicas: 2", "replicas: 0"),
    ("statefulset", "statefulset.yaml", "replicas: 2", "replicas: \"2\""),
    ("statefulset", "statefulset.yaml", "            - start\n", "            - run\n"),
    ("statefulset", "statefulset.yaml", "image: devin-bridge:outpost", "image: devin-bridge:latest"),
    ("statefulset", "statefulset.yaml", "  template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: devin-outpost", "  template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: other"),
    ("acceptor id", "statefulset.yaml", "fieldPath: metadata.name", "fieldPath: metadata.namespace"),
    ("acceptor id", "statefulset.yaml", "            - name: DEVIN_WORKER_ACCEPTOR_ID\n              valueFrom:\n                fieldRef:\n                  fieldPath: metadata.name", "            - name: DEVIN_WORKER_ACCEPTOR_ID\n              value: worker-1"),
    ("acceptor id", "statefulset.yaml", "name: DEVIN_WORKER_ACCEPTOR_ID", "name: DEVIN_WORKER_ID"),
    ("token", "statefulset.yaml", "              valueFrom:\n                secretKeyRef:\n                  name: devin-outposts-token\n                  key: token", "              value: dop_live_0123456789"),
    ("token", "statefulset.yaml", "key: token", "key: password"),
    ("token", "statefulset.yaml", "name: devin-outposts-token", "name: other-secret"),
    ("token", "statefulset.yaml", "            - /etc/devin-bridge/outpost.toml\n", "            - /etc/devin-bridge/outpost.toml\n          args:\n            - --token=$(DEVIN_OUTPOSTS_TOKEN)\n"),
    ("token", "statefulset.yaml", "            - name: DEVIN_API_URL\n", "            - name: FLEET_API_KEY\n              value: abc\n            - name: DEVIN_API_URL\n"),
    ("token", "statefulset.yaml", "          env:\n", "          envFrom:\n            - secretRef:\n                name: devin-outposts-token\n          env:\n"),
    ("token", "secret.example.yaml", "token: REPLACE_WITH_YOUR_OUTPOSTS_TOKEN", "token: dop_live_0123456789"),
    ("token", "kustomization.yaml", "  - statefulset.yaml\n", "  - statefulset.yaml\n  - secret.example.yaml\n"),
    ("token", "kustomization.yaml", "resources:", "secretGenerator:\n  - name: devin-outposts-token\n    literals:\n      - token=abc\nresources:"),
    ("token", "configmap.yaml", "    max_sessions = 4\n", "    max_sessions = 4\n    # token = REPLACE_WITH_YOUR_OUTPOSTS_TOKEN\n"),
    ("state volume", "statefulset.yaml", "  volumeClaimTemplates:\n    - metadata:\n        name: state", "  volumeClaimTemplates:\n    - metadata:\n        name: other"),
    ("state volume", "statefulset.yaml", "            storage: 20Gi", "            size: 20Gi"),
    ("state volume", "statefulset.yaml", "              mountPath: /var/lib/devin-bridge\n", "              mountPath: /var/lib/devin-bridge\n              readOnly: true\n"),
    ("state volume", "statefulset.yaml", "              mountPath: /var/lib/devin-bridge\n", "              mountPath: /var/lib/devin-bridge\n              subPath: cache\n"),
    ("state volume", "statefulset.yaml", "              mountPath: /tmp", "              mountPath: /var/lib/devin-bridge/cache"),
    ("state volume", "statefulset.yaml", "value: /var/lib/devin-bridge/cache", "value: /var/cache/devin-bridge"),
    ("state volume", "statefulset.yaml", "value: /var/lib/devin-bridge/cache", "value: /var/lib/devin-bridge-cache"),
    ("state volume", "configmap.yaml", "work_dir = \"/var/lib/devin-bridge/work\"", "work_dir = \"/srv/work\""),
    ("state volume", "configmap.yaml", "data_dir = \"/var/lib/devin-bridge/data\"", "data_dir = \"/var/lib/devin-bridge\""),
    ("state volume", "configmap.yaml", "mode = \"outpost\"", "mode = \"summarizer\""),
    ("state volume", "configmap.yaml", "  outpost.toml: |", "  policy.toml: |"),
    ("state volume", "statefulset.yaml", "              mountPath: /etc/devin-bridge\n              readOnly: true\n", "              mountPath: /etc/devin-bridge\n"),
    ("resources", "statefulset.yaml", "              cpu: \"2\"\n", ""),
    ("resources", "statefulset.yaml", "              memory: 4Gi\n", ""),
    ("resources", "statefulset.yaml", "              cpu: 500m\n", ""),
    ("resources", "statefulset.yaml", "              memory: 1Gi\n", ""),
    ("grace", "statefulset.yaml", "terminationGracePeriodSeconds: 90", "terminationGracePeriodSeconds: 30"),
    ("grace", "statefulset.yaml", "terminationGracePeriodSeconds: 90", "terminationGracePeriodSeconds: 89"),
    ("grace", "statefulset.yaml", "      terminationGracePeriodSeconds: 90\n", ""),
    ("hardening", "statefulset.yaml", "hostNetwork: false", "hostNetwork: true"),
    ("hardening", "statefulset.yaml", "hostPID: false", "hostPID: true"),
    ("hardening", "statefulset.yaml", "privileged: false", "privileged: true"),
    ("hardening", "statefulset.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true"),
    ("hardening", "statefulset.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false"),
    ("hardening", "statefulset.yaml", "                - ALL", "                - NET_RAW"),
    ("hardening", "statefulset.yaml", "              drop:\n                - ALL\n", "              drop:\n                - ALL\n              add:\n                - NET_ADMIN\n"),
    ("hardening", "statefulset.yaml", "        runAsNonRoot: true\n        runAsUser: 10001", "        runAsNonRoot: false\n        runAsUser: 10001"),
    ("hardening", "statefulset.yaml", "        runAsUser: 10001", "        runAsUser: 0"),
    ("hardening", "statefulset.yaml", "            runAsNonRoot: true\n", "            runAsNonRoot: false\n"),
    ("hardening", "statefulset.yaml", "            runAsNonRoot: true\n", "            runAsNonRoot: true\n            runAsUser: 0\n"),
    ("hardening", "statefulset.yaml", "        seccompProfile:\n          type: RuntimeDefault", "        seccompProfile:\n          type: Localhost"),
    ("hardening", "statefulset.yaml", "            seccompProfile:\n              type: RuntimeDefault", "            seccompProfile:\n              type: Unconfined"),
    ("hardening", "statefulset.yaml", "        - name: tmp\n          emptyDir:", "        - name: tmp\n          hostPath:\n            path: /tmp\n          emptyDir:"),
    ("hardening", "namespace.yaml", "  name: devin-outpost\n", "  name: devin-outpost\n  annotations:\n    x:\n      privileged: true\n"),
    ("pull policy", "statefulset.yaml", "imagePullPolicy: IfNotPresent", "imagePullPolicy: Always"),
    ("pull policy", "statefulset.yaml", "          imagePullPolicy: IfNotPresent\n", ""),
    ("kustomization", "kustomization.yaml", "  - configmap.yaml\n", ""),
    ("kustomization", "kustomization.yaml", "  - statefulset.yaml\n", "  - statefulset.yaml\n  - service.yaml\n"),
    ("kustomization", "kustomization.yaml", "  - statefulset.yaml\n", "  - statefulset.yaml\n  - secret.example.yaml\n"),
    ("objects", "configmap.yaml", "  namespace: devin-outpost\n", ""),
    ("objects", "namespace.yaml", "  name: devin-outpost\n", "  name: default\n"),
];

#[test]
fn every_check_refuses_a_copy_that_breaks_it() {
    let deploy = Deploy::real();
    let mut broken_by: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, file, from, to) in BREAKS {
        let copy = deploy.edited(file, from, to);
        let result = check(name)(&copy);
        assert!(
            result.is_err(),
            "the {name} check accepts {file} with {from:?} replaced by {to:?}"
        );
        *broken_by.entry(name).or_default() += 1;
    }
    for (name, _) in CHECKS {
        assert!(
            broken_by.contains_key(name),
            "no edit breaks the {name} check"
        );
    }
}

/// The manifests have to be a new file away from being applied: a new YAML file in
/// deploy/kubernetes that the kustomization does not list is refused.
#[test]
fn an_unlisted_manifest_is_refused() {
    let mut deploy = Deploy::real();
    deploy.files.insert(
        "extra.yaml".into(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: devin-outpost\n"
            .into(),
    );
    let problem = the_kustomization_applies_every_manifest_but_the_example_secret(&deploy)
        .expect_err("extra.yaml is not listed");
    assert!(problem.contains("extra.yaml"), "{problem}");
}

/// The policy the ConfigMap mounts is a valid outpost policy, and the worker it configures
/// stops within the budget the grace period is checked against: its shutdown waits at most
/// `shutdown_grace_ms` plus five seconds for the remotes to end and the claims to be released.
#[test]
fn the_configmap_policy_is_an_outpost_policy_whose_shutdown_fits_the_grace_budget() {
    let deploy = Deploy::real();
    let text = &deploy.files["configmap.yaml"];
    let docs = YamlLoader::load_from_str(text).expect("configmap.yaml parses");
    let policy_text = docs[0]["data"]["outpost.toml"]
        .as_str()
        .expect("the ConfigMap holds outpost.toml");
    let policy = devin_bridge_outpost::OutpostPolicy::parse(
        policy_text,
        Path::new("configmap.yaml"),
        Path::new("/etc/devin-bridge"),
    )
    .expect("the mounted policy is valid");
    assert_eq!(policy.mode, devin_bridge_policy::Mode::Outpost);
    let shutdown_secs = (policy.outpost.shutdown_grace_ms / 1000) as i64 + 5;
    assert!(
        shutdown_secs <= WORKER_SHUTDOWN_BUDGET_SECS,
        "the worker may take {shutdown_secs} s to stop, more than the {WORKER_SHUTDOWN_BUDGET_SECS} s budget"
    );
    assert_eq!(
        policy.outpost.data_dir.as_deref(),
        Some(Path::new("/var/lib/devin-bridge/data")),
        "the data dir (acceptor id, session state) is on the persistent volume"
    );
}
