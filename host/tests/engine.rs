//! The wasm runtime: loading, pinning, faults, hot swap, WASI isolation and the compile cache.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use devin_bridge::engine::{
    sha256_hex, CompileCache, EngineError, Loaded, TransformKind, Transforms,
};
use devin_bridge::policy::Policy;

fn request(marker: &str) -> String {
    serde_json::json!({
        "model": "devin-cli-agentic/swe-1-7",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": format!("please {marker}")}]
    })
    .to_string()
}

#[test]
fn the_built_components_load_and_pass_their_corpus() {
    let transforms = common::transforms();
    let info = transforms.info();
    assert_eq!(info.len(), 4);
    for entry in info {
        let bytes = std::fs::read(common::component(entry.name)).expect("component file");
        assert_eq!(entry.sha256, sha256_hex(&bytes), "{} digest", entry.name);
        assert!(!entry.uses_wasi, "{} must import nothing", entry.name);
    }
}

#[test]
fn a_pin_mismatch_is_refused_naming_both_digests() {
    let wrong = "0".repeat(64);
    let mut text = common::policy_text("");
    text = text.replacen(
        "[components.sse]\n",
        &format!("[components.sse]\nsha256 = \"{wrong}\"\n"),
        1,
    );
    let policy = Policy::parse(
        &text,
        std::path::Path::new("p.toml"),
        std::path::Path::new("/"),
    )
    .expect("policy");
    let error = Transforms::load_with(common::test_runtime(), common::test_cache(), &policy)
        .err()
        .expect("pin mismatch must refuse");
    let actual = sha256_hex(&std::fs::read(common::component("sse")).expect("sse"));
    match &error {
        EngineError::PinMismatch {
            transform,
            expected,
            actual: got,
        } => {
            assert_eq!(*transform, TransformKind::Sse);
            assert_eq!(expected, &wrong);
            assert_eq!(got, &actual);
        }
        other => panic!("expected a pin mismatch, got {other}"),
    }
    let message = error.to_string();
    assert!(
        message.contains(&wrong) && message.contains(&actual),
        "{message}"
    );
}

#[test]
fn a_correct_pin_is_accepted() {
    let actual = sha256_hex(&std::fs::read(common::component("envelope")).expect("envelope"));
    let text = common::policy_text("").replacen(
        "[components.envelope]\n",
        &format!("[components.envelope]\nsha256 = \"{actual}\"\n"),
        1,
    );
    let policy = Policy::parse(
        &text,
        std::path::Path::new("p.toml"),
        std::path::Path::new("/"),
    )
    .expect("policy");
    Transforms::load_with(common::test_runtime(), common::test_cache(), &policy)
        .expect("pinned load");
}

#[test]
fn panics_loops_and_unbounded_allocation_are_typed_errors_and_the_host_keeps_serving() {
    let transforms = common::transforms();
    let bytes =
        std::fs::read(common::test_component("misbehaving-serializer")).expect("test component");
    transforms
        .swap(TransformKind::Serializer, &bytes, "test".into())
        .expect("it passes the corpus");

    match transforms.serialize(request("__PANIC__")) {
        Err(EngineError::Trap {
            transform: TransformKind::Serializer,
            ..
        }) => {}
        other => panic!("panic: expected a trap, got {other:?}"),
    }
    let started = std::time::Instant::now();
    match transforms.serialize(request("__LOOP__")) {
        Err(EngineError::Timeout {
            transform: TransformKind::Serializer,
            limit_ms: 500,
        }) => {}
        other => panic!("loop: expected a timeout, got {other:?}"),
    }
    // Not a timing assertion on performance: a loop must be stopped at all, not run forever.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the deadline did not stop the loop"
    );
    match transforms.serialize(request("__ALLOC__")) {
        Err(EngineError::OutOfMemory {
            transform: TransformKind::Serializer,
            limit_mib: 64,
        }) => {}
        other => panic!("alloc: expected out of memory, got {other:?}"),
    }
    let prompt = transforms
        .serialize(request("say hello"))
        .expect("engine")
        .expect("serializes");
    assert!(prompt.text.contains("please say hello"));
    assert_eq!(
        EngineError::Timeout {
            transform: TransformKind::Serializer,
            limit_ms: 1
        }
        .code(),
        "transform_timeout"
    );
}

#[test]
fn a_component_with_the_wrong_interface_is_refused_and_the_old_one_keeps_serving() {
    let transforms = common::transforms();
    let before = transforms.current(TransformKind::Serializer).sha256.clone();
    let sse = std::fs::read(common::component("sse")).expect("sse");
    match transforms.swap(TransformKind::Serializer, &sse, "test".into()) {
        Err(EngineError::Interface {
            transform: TransformKind::Serializer,
            ..
        }) => {}
        other => panic!("expected an interface error, got {other:?}"),
    }
    assert_eq!(transforms.current(TransformKind::Serializer).sha256, before);
    transforms
        .serialize(request("x"))
        .expect("engine")
        .expect("still serving");
}

#[test]
fn a_component_that_fails_the_corpus_is_refused() {
    let transforms = common::transforms();
    let before = transforms.current(TransformKind::Serializer).sha256.clone();
    let wrong =
        std::fs::read(common::test_component("wrong-answers-serializer")).expect("test component");
    match transforms.swap(TransformKind::Serializer, &wrong, "test".into()) {
        Err(EngineError::SelfTest {
            transform: TransformKind::Serializer,
            message,
        }) => {
            assert!(message.contains("expected"), "{message}");
        }
        other => panic!("expected a self-test failure, got {other:?}"),
    }
    assert_eq!(transforms.current(TransformKind::Serializer).sha256, before);
}

#[test]
fn garbage_bytes_are_refused() {
    let transforms = common::transforms();
    for bytes in [&b""[..], b"\0asm\x01\0\0\0", b"not wasm at all"] {
        match transforms.swap(TransformKind::Envelope, bytes, "test".into()) {
            Err(EngineError::Compile { .. }) => {}
            other => panic!("expected a compile error, got {other:?}"),
        }
    }
}

#[test]
fn hot_swap_under_eight_concurrent_callers_loses_no_call() {
    let transforms = Arc::new(common::transforms());
    let original = std::fs::read(common::component("serializer")).expect("serializer");
    let alternate =
        std::fs::read(common::test_component("misbehaving-serializer")).expect("test component");
    let expected = transforms
        .serialize(request("count"))
        .expect("engine")
        .expect("ok");
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let (transforms, stop, calls, expected) = (
                transforms.clone(),
                stop.clone(),
                calls.clone(),
                expected.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let answer = transforms
                        .serialize(request("count"))
                        .expect("no call may fail during a swap");
                    assert_eq!(answer.expect("serializes"), expected);
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut shas = std::collections::BTreeSet::new();
    for round in 0..6 {
        let bytes = if round % 2 == 0 {
            &alternate
        } else {
            &original
        };
        let report = transforms
            .swap(TransformKind::Serializer, bytes, format!("round {round}"))
            .expect("swap");
        assert_ne!(report.old_sha256, report.new_sha256);
        shas.insert(report.new_sha256);
    }
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        caller.join().expect("a caller failed");
    }
    assert_eq!(shas.len(), 2);
    assert!(calls.load(Ordering::Relaxed) >= 8, "callers made progress");
}

#[test]
fn a_wasi_importing_component_sees_an_empty_world() {
    std::env::set_var("DEVIN_BRIDGE_PROBE_SECRET", "must-not-leak");
    let transforms = common::transforms();
    let probe =
        std::fs::read(common::test_component("wasi-probe-serializer")).expect("test component");
    transforms
        .swap(TransformKind::Serializer, &probe, "test".into())
        .expect("probe passes the corpus");
    assert!(transforms.current(TransformKind::Serializer).uses_wasi);
    let failure = transforms
        .serialize(request("__ENV__"))
        .expect("engine")
        .expect_err("the probe reports");
    assert_eq!(failure.code, "probe");
    assert_eq!(
        failure.message, "env=0 args=0 cwd=",
        "the component saw something of the host"
    );
}

#[test]
fn the_compile_cache_is_reused_and_a_corrupt_entry_is_recompiled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache_dir = dir.path().join("cache");
    let runtime = common::test_runtime();
    let cache = CompileCache::open(&cache_dir).expect("cache");
    let path = common::component("model-alias");
    let first = Loaded::from_file(&runtime, &cache, TransformKind::ModelAlias, &path, None)
        .expect("compile");
    let artifacts: Vec<_> = std::fs::read_dir(&cache_dir)
        .expect("cache dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    assert_eq!(artifacts.len(), 1, "one artifact per component");
    let artifact = &artifacts[0];
    assert!(artifact
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(&first.sha256)));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(artifact)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(&cache_dir)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o700
    );

    let modified = std::fs::metadata(artifact)
        .expect("meta")
        .modified()
        .expect("mtime");
    Loaded::from_file(&runtime, &cache, TransformKind::ModelAlias, &path, None)
        .expect("from cache");
    assert_eq!(
        std::fs::metadata(artifact)
            .expect("meta")
            .modified()
            .expect("mtime"),
        modified,
        "a hit must not rewrite"
    );

    // Corrupt the artifact: it must be detected by its digest and recompiled, never executed.
    let mut bytes = std::fs::read(artifact).expect("artifact");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(artifact, &bytes).expect("corrupt");
    let again = Loaded::from_file(&runtime, &cache, TransformKind::ModelAlias, &path, None)
        .expect("recompiled");
    assert_eq!(again.sha256, first.sha256);
    assert_ne!(
        std::fs::read(artifact).expect("artifact"),
        bytes,
        "the corrupt entry was replaced"
    );
}

#[test]
fn a_cache_directory_open_to_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let error = CompileCache::open(dir.path()).expect_err("world-writable cache must be refused");
    assert!(error.to_string().contains("0700"), "{error}");
}
