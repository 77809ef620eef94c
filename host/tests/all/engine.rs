//! The wasm runtime: loading, pinning, faults, hot swap, the import policy, the contract
//! self-test and the compile cache.

use crate::common;
use devin_bridge_engine::TransformCalls as _;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use devin_bridge_engine::{
    self_test, sha256_hex, Call, CompileCache, Corpus, EngineError, Loaded, MessageHead, SseEvent,
    SseFrames, TransformKind, Transforms, Turn,
};
use devin_bridge_policy::ModePolicy as _;
use devin_bridge_summarizer::policy::SummarizerPolicy;
use devin_bridge_types::{Reply, Usage};

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
    assert_eq!(info.len(), TransformKind::COUNT);
    for entry in info {
        let bytes = std::fs::read(common::component(entry.name)).expect("component file");
        assert_eq!(entry.sha256, sha256_hex(&bytes), "{} digest", entry.name);
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
    let policy = SummarizerPolicy::parse(
        &text,
        std::path::Path::new("p.toml"),
        std::path::Path::new("/"),
    )
    .expect("policy");
    let error = Transforms::load_with(
        common::test_runtime(),
        common::test_cache(),
        &policy.engine_config(),
    )
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
    let policy = SummarizerPolicy::parse(
        &text,
        std::path::Path::new("p.toml"),
        std::path::Path::new("/"),
    )
    .expect("policy");
    Transforms::load_with(
        common::test_runtime(),
        common::test_cache(),
        &policy.engine_config(),
    )
    .expect("pinned load");
}

#[test]
fn panics_loops_and_unbounded_allocation_are_typed_errors_and_the_host_keeps_serving() {
    let transforms = common::transforms();
    let bytes = devin_bridge_test_artifacts::MISBEHAVING_SERIALIZER.bytes();
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
fn contract_breaking_candidates_are_refused_naming_the_fixture_and_what_differs() {
    let transforms = common::transforms();
    let wrong = devin_bridge_test_artifacts::WRONG_ANSWERS.bytes();
    for (kind, fixture, difference) in [
        (
            TransformKind::Serializer,
            "fixture err_",
            "not in the class of the expected 400 (4xx)",
        ),
        (
            // The first envelope fixture it breaks (in file order): a call's id in upper case.
            TransformKind::Envelope,
            "fixture fence_example_beside_a_call.json",
            "the tool id \"DEVIN_CALL_",
        ),
        (
            TransformKind::Sse,
            "fixture 03_stream_finish_text.json",
            "event sequence",
        ),
        (
            TransformKind::ModelAlias,
            "fixture 03_validate_missing_prefix.json",
            "failure code missing_model_prefix_v2 differs from the expected missing_model_prefix",
        ),
        (
            // A judge that passes everything: the first call the corpus flags refuses it.
            TransformKind::Safeguard,
            "fixture 01_rm_rf_home_flagged.json",
            "is flagged by the reference and not by the candidate",
        ),
    ] {
        let before = transforms.current(kind).sha256.clone();
        match transforms.swap(kind, &wrong, "test".into()) {
            Err(EngineError::SelfTest { transform, message }) => {
                assert_eq!(transform, kind);
                assert!(message.contains(fixture), "{kind}: {message}");
                assert!(message.contains(difference), "{kind}: {message}");
            }
            other => panic!("{kind}: expected a self-test failure, got {other:?}"),
        }
        assert_eq!(transforms.current(kind).sha256, before, "{kind} changed");
    }
}

/// A part of the corpus (the cases the predicate keeps), the fixture where the wrong component
/// must be caught, and what the refusal must say differs.
type BrokenPromise = (fn(&Call) -> bool, &'static str, &'static str);

/// Loads the wrong-answers test component as `kind` and checks that each part of the
/// embedded corpus (the cases its predicate keeps) refuses it at `fixture`, naming
/// `difference`; the real component passes the whole corpus.
fn each_broken_promise_is_caught(kind: TransformKind, parts: [BrokenPromise; 2]) {
    let runtime = common::test_runtime();
    let wrong = Loaded::from_file(
        &runtime,
        &common::test_cache(),
        kind,
        devin_bridge_test_artifacts::WRONG_ANSWERS.path(),
        None,
    )
    .unwrap_or_else(|error| panic!("the test component loads as {kind}: {error}"));
    let embedded = Corpus::embedded(kind).expect("embedded corpus");
    for (keep, fixture, difference) in parts {
        let corpus = Corpus {
            cases: embedded
                .cases
                .iter()
                .filter(|case| keep(&case.call))
                .cloned()
                .collect(),
            ..embedded.clone()
        };
        assert!(!corpus.cases.is_empty(), "no cases for {fixture}");
        match self_test(&runtime, &wrong, &corpus) {
            Err(EngineError::SelfTest { message, .. }) => {
                assert!(message.contains(fixture), "{message}");
                assert!(message.contains(difference), "{message}");
            }
            other => panic!("expected a self-test failure at {fixture}, got {other:?}"),
        }
    }
    // The real component keeps both promises on the same cases.
    let real = Loaded::from_file(
        &runtime,
        &common::test_cache(),
        kind,
        &common::component(kind.name()),
        None,
    )
    .unwrap_or_else(|error| panic!("the real {kind} loads: {error}"));
    let report = self_test(&runtime, &real, &embedded).expect("the real component passes");
    assert_eq!(report.cases, embedded.cases.len());
}

/// The wrong-answers envelope breaks two promises; each is caught on its own part of the corpus.
#[test]
fn a_wrong_parse_and_a_wrong_parse_review_are_each_refused_by_the_corpus() {
    each_broken_promise_is_caught(
        TransformKind::Envelope,
        [
            (
                |call| matches!(call, Call::Parse { .. }),
                "fixture fence_example_beside_a_call.json",
                "the tool id \"DEVIN_CALL_",
            ),
            (
                |call| matches!(call, Call::ParseReview { .. }),
                "fixture review_bad_line.json",
                "expected the failure review_invalid (502), got a success",
            ),
        ],
    );
}

/// The envelope component validates a reviewer's reply: found after prose, canonical, and
/// refused with the stable codes when it is missing or invalid.
#[test]
fn parse_review_runs_in_the_envelope_component() {
    let transforms = common::transforms();
    let reply = "Done.\n```json\n{\"findings\": [{\"body\": \"b }\", \"title\": \"t\", \"line\": null, \"file\": \"a.rs\", \"severity\": \"low\", \"x\": 1}], \"summary\": \"ok\", \"verdict\": \"approve\"}\n```";
    let review = transforms
        .parse_review(reply.to_owned())
        .expect("engine")
        .expect("a valid review");
    assert_eq!(
        review,
        r#"{"verdict":"approve","summary":"ok","findings":[{"severity":"low","file":"a.rs","line":null,"title":"t","body":"b }"}]}"#
    );
    let missing = transforms
        .parse_review("No JSON here.".into())
        .expect("engine")
        .expect_err("missing");
    assert_eq!(
        (missing.code.as_str(), missing.status, missing.repairable),
        ("review_missing", 502, false)
    );
    let invalid = transforms
        .parse_review(
            r#"{"verdict":"approve","summary":"s","findings":[{"severity":"low","file":"f","line":-1,"title":"SECRET","body":"b"}]}"#.into(),
        )
        .expect("engine")
        .expect_err("invalid");
    assert_eq!(invalid.code, "review_invalid");
    assert!(
        invalid
            .message
            .contains("findings[0].line must be an integer >= 1 or null"),
        "{}",
        invalid.message
    );
    assert!(!invalid.message.contains("SECRET"), "{}", invalid.message);
    let too_large = transforms
        .parse_review(" ".repeat(devin_bridge_envelope::MAX_TEXT_BYTES + 1))
        .expect("engine")
        .expect_err("too large");
    assert_eq!(too_large.code, "review_invalid");
    assert!(
        too_large.message.contains("too large"),
        "{}",
        too_large.message
    );
}

/// The wrong-answers sse breaks two promises; each is caught on its own part of the corpus.
#[test]
fn a_wrong_stream_render_and_a_wrong_event_framing_are_each_refused_by_the_corpus() {
    each_broken_promise_is_caught(
        TransformKind::Sse,
        [
            (
                |call| !matches!(call, Call::ParseEvents { .. }),
                "fixture 03_stream_finish_text.json",
                "event sequence",
            ),
            (
                |call| matches!(call, Call::ParseEvents { .. }),
                "fixture 34_parse_events_cr_only.json",
                "the tail [] differs from the expected",
            ),
        ],
    );
}

/// The sse component frames an event stream fed in pieces, keeps the unfinished event for the
/// next call, and ends the stream with the stable codes.
#[test]
fn parse_events_runs_in_the_sse_component() {
    let transforms = common::transforms();
    let first = transforms
        .parse_events(
            b"event: added
id: 1
data: {\"a\":1}

data: par"
                .to_vec(),
            1024,
        )
        .expect("engine")
        .expect("valid frames");
    assert_eq!(
        first.events,
        [SseEvent {
            event: "added".into(),
            data: "{\"a\":1}".into(),
            id: Some("1".into()),
        }]
    );
    assert_eq!(first.tail, b"data: par");
    let mut buffer = first.tail;
    buffer.extend_from_slice(b"tial\n\n: ping\n\n");
    let second = transforms
        .parse_events(buffer, 1024)
        .expect("engine")
        .expect("valid frames");
    assert_eq!(
        second,
        SseFrames {
            events: vec![SseEvent {
                event: "message".into(),
                data: "partial".into(),
                id: None,
            }],
            tail: Vec::new(),
        }
    );
    for (buffer, limit, code) in [
        (&b"data: 0123456789"[..], 8, "sse_event_too_large"),
        (b"data: \xff\n\n", 1024, "sse_invalid_utf8"),
    ] {
        let failure = transforms
            .parse_events(buffer.to_vec(), limit)
            .expect("engine")
            .expect_err(code);
        assert_eq!(
            (failure.code.as_str(), failure.status, failure.repairable),
            (code, 502, false)
        );
    }
}

/// Texts built to make the scan for the first object re-read as much as possible are answered
/// within the default two-second call limit (the production limits, not the tests' short ones).
#[test]
fn hostile_megabyte_reviews_are_answered_within_the_default_call_limit() {
    let runtime = devin_bridge_engine::Runtime::new(devin_bridge_engine::RuntimeConfig {
        memory_bytes: 256 << 20,
        call_timeout: std::time::Duration::from_millis(2_000),
        max_instances: 4,
        fuel: None,
    })
    .expect("runtime");
    let envelope = Loaded::from_file(
        &runtime,
        &common::test_cache(),
        TransformKind::Envelope,
        &common::component("envelope"),
        None,
    )
    .expect("the envelope loads");
    let near_limit =
        |unit: &str| unit.repeat((devin_bridge_envelope::MAX_TEXT_BYTES - 512) / unit.len());
    for output in [
        near_limit("{"),
        near_limit("{\"a\":"),
        near_limit("{\"a\":["),
        near_limit("{\"\\\"{"),
        near_limit("\"{\":"),
    ] {
        let started = std::time::Instant::now();
        let answer = envelope
            .call(
                &runtime,
                &Call::ParseReview {
                    output: output.clone(),
                },
            )
            .unwrap_or_else(|error| panic!("{:?}…: {error}", &output[..8]));
        eprintln!("{:?}…: {:?}", &output[..8], started.elapsed());
        match answer {
            Err(failure)
                if ["review_missing", "review_invalid"].contains(&failure.code.as_str()) => {}
            other => panic!("unexpected answer {other:?}"),
        }
    }
}

#[test]
fn a_byte_different_twin_that_keeps_the_contract_is_accepted_for_every_transform_it_exports() {
    let transforms = common::transforms();
    let twin_component = devin_bridge_test_artifacts::TWIN;
    let twin = twin_component.bytes();
    // The twin exports the transforms it has a twin of (a new transform may have none yet);
    // the checks after the swap need the serializer, the envelope and the sse among them.
    let twinned = |kind: TransformKind| twin_component.exports_transform(kind.name());
    for kind in [
        TransformKind::Serializer,
        TransformKind::Envelope,
        TransformKind::Sse,
    ] {
        assert!(twinned(kind), "the twin exports no {kind}");
    }
    // The twin answers differently byte for byte: a failure's wording, an SSE body's spacing.
    let refused = "{\"model\":\"devin-cli-agentic/swe-1-7\",\"messages\":[]}".to_owned();
    let real_failure = transforms
        .serialize(refused.clone())
        .expect("engine")
        .expect_err("no messages");
    let head = devin_bridge_engine::MessageHead {
        id: "msg_0".into(),
        model: "devin-cli-agentic/swe-1-7".into(),
        usage: devin_bridge_types::Usage::estimated(1, 2),
    };
    let reply = devin_bridge_types::Reply::Text("hello".into());
    let real_body = transforms
        .render_json(head.clone(), reply.clone(), None)
        .expect("render");
    for kind in TransformKind::ALL.into_iter().filter(|kind| twinned(*kind)) {
        let report = transforms
            .swap(kind, &twin, "test".into())
            .unwrap_or_else(|error| panic!("{kind}: the twin must be accepted: {error}"));
        assert_eq!(report.new_sha256, sha256_hex(&twin));
        assert!(report.self_test_cases > 0);
        assert_eq!(transforms.current(kind).sha256, sha256_hex(&twin));
    }
    let twin_failure = transforms
        .serialize(refused)
        .expect("engine")
        .expect_err("no messages");
    assert_eq!(twin_failure.code, real_failure.code);
    assert_ne!(
        twin_failure.message, real_failure.message,
        "the twin rewords failures"
    );
    let twin_review = transforms
        .parse_review("no review here".into())
        .expect("engine")
        .expect_err("missing");
    assert_eq!(twin_review.code, "review_missing");
    assert!(
        twin_review.message.ends_with("(twin build)"),
        "the swapped-in envelope answers parse_review: {}",
        twin_review.message
    );
    let twin_frames = transforms
        .parse_events(b"data: 0123456789".to_vec(), 8)
        .expect("engine")
        .expect_err("too large");
    assert_eq!(twin_frames.code, "sse_event_too_large");
    assert!(
        twin_frames.message.ends_with("(twin build)"),
        "the swapped-in sse answers parse_events: {}",
        twin_frames.message
    );
    let twin_body = transforms.render_json(head, reply, None).expect("render");
    assert_ne!(twin_body, real_body, "the twin spaces its JSON");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&twin_body).expect("JSON"),
        serde_json::from_str::<serde_json::Value>(&real_body).expect("JSON"),
    );
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
    let alternate = devin_bridge_test_artifacts::MISBEHAVING_SERIALIZER.bytes();
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
fn a_wasi_importing_component_is_refused_at_load_naming_the_import() {
    let transforms = common::transforms();
    let before = transforms.current(TransformKind::Serializer).sha256.clone();
    let path = devin_bridge_test_artifacts::WASI_PROBE_SERIALIZER
        .path()
        .to_path_buf();
    let probe = std::fs::read(&path).expect("test component");
    let import = "wasi:cli/environment@0.2.0";
    match transforms.swap(TransformKind::Serializer, &probe, "test".into()) {
        Err(EngineError::Imports { transform, message }) => {
            assert_eq!(transform, TransformKind::Serializer);
            assert!(message.contains(import), "{message}");
        }
        other => panic!("expected an import refusal, got {other:?}"),
    }
    assert_eq!(transforms.current(TransformKind::Serializer).sha256, before);
    // Serving it from a policy is refused the same way.
    let text = common::policy_text("").replacen(
        &format!(
            "path = {:?}",
            common::component("serializer").display().to_string()
        ),
        &format!("path = {:?}", path.display().to_string()),
        1,
    );
    let policy = SummarizerPolicy::parse(
        &text,
        std::path::Path::new("p.toml"),
        std::path::Path::new("/"),
    )
    .expect("policy");
    let error = Transforms::load_with(
        common::test_runtime(),
        common::test_cache(),
        &policy.engine_config(),
    )
    .err()
    .expect("a WASI importer must not load");
    assert!(error.to_string().contains(import), "{error}");
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

/// Warnings logged while `f` runs on this thread.
fn warnings_during<T>(f: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Logs {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
        type Writer = Logs;
        fn make_writer(&'a self) -> Logs {
            self.clone()
        }
    }
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let value = tracing::subscriber::with_default(subscriber, f);
    let text =
        String::from_utf8_lossy(&logs.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
    (value, text)
}

/// The one `.cwasm` entry of the cache whose name starts with `sha256`.
fn artifact_of(cache_dir: &std::path::Path, sha256: &str) -> std::path::PathBuf {
    std::fs::read_dir(cache_dir)
        .expect("cache dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.extension().is_some_and(|x| x == "cwasm")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(sha256))
        })
        .unwrap_or_else(|| panic!("no cache entry for {sha256}"))
}

#[test]
fn a_planted_artifact_under_another_components_key_is_never_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache_dir = dir.path().join("cache");
    let runtime = common::test_runtime();
    let cache = CompileCache::open(&cache_dir).expect("cache");
    let real_path = common::component("serializer");
    let real = Loaded::from_file(
        &runtime,
        &cache,
        TransformKind::Serializer,
        &real_path,
        None,
    )
    .expect("compile the real serializer");
    // Another valid artifact of the same engine: the serializer that panics on a marker.
    let evil = Loaded::from_file(
        &runtime,
        &cache,
        TransformKind::Serializer,
        devin_bridge_test_artifacts::MISBEHAVING_SERIALIZER.path(),
        None,
    )
    .expect("compile the misbehaving serializer");
    let target = artifact_of(&cache_dir, &real.sha256);
    let planted = std::fs::read(artifact_of(&cache_dir, &evil.sha256)).expect("planted bytes");
    let evil_mac = std::fs::read(artifact_of(&cache_dir, &evil.sha256).with_extension("cwasm.mac"))
        .expect("its MAC");
    let panics = request("__PANIC__");

    // 1: the whole entry (artifact and its genuine MAC) moved under the real component's key.
    // 2: the artifact with the sidecar digest the old scheme trusted, and that digest as a MAC.
    let sha_sidecar = sha256_hex(&planted);
    type Sidecars = Vec<(std::path::PathBuf, Vec<u8>)>;
    let plants: [(&str, Sidecars); 2] = [
        (
            "moved entry",
            vec![(target.with_extension("cwasm.mac"), evil_mac)],
        ),
        (
            "recomputed digest",
            vec![
                (
                    target.with_extension("cwasm.sha256"),
                    sha_sidecar.clone().into_bytes(),
                ),
                (target.with_extension("cwasm.mac"), sha_sidecar.into_bytes()),
            ],
        ),
    ];
    for (label, sidecars) in plants {
        std::fs::write(&target, &planted).expect("plant");
        for (path, bytes) in sidecars {
            std::fs::write(path, bytes).expect("plant sidecar");
        }
        let (loaded, logs) = warnings_during(|| {
            Loaded::from_file(
                &runtime,
                &cache,
                TransformKind::Serializer,
                &real_path,
                None,
            )
        });
        let loaded = loaded.expect("recompiled");
        assert!(
            logs.contains("WARN")
                && logs.contains(&real.sha256)
                && logs.contains("not authenticated"),
            "{label}: no warning naming the component digest: {logs}"
        );
        // The real serializer serializes the marker; the planted one would panic (a trap).
        let answer = loaded.call(
            &runtime,
            &devin_bridge_engine::Call::Serialize {
                request: panics.clone(),
            },
        );
        assert!(
            matches!(answer, Ok(Ok(devin_bridge_engine::Output::Prompt(_)))),
            "{label}: the planted code ran: {answer:?}"
        );
        assert_ne!(
            std::fs::read(&target).expect("entry"),
            planted,
            "{label}: the planted entry was not replaced"
        );
    }
}

#[test]
fn the_cache_key_is_private_and_a_loose_or_linked_key_is_replaced() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().expect("tempdir");
    let cache_dir = dir.path().join("cache");
    CompileCache::open(&cache_dir).expect("cache");
    let key_path = cache_dir.join(devin_bridge_engine::CACHE_KEY_FILE);
    let meta = std::fs::symlink_metadata(&key_path).expect("key file");
    assert!(meta.file_type().is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 32);
    assert_eq!(meta.uid(), nix::unistd::geteuid().as_raw());
    let key = std::fs::read(&key_path).expect("key");
    CompileCache::open(&cache_dir).expect("reopen");
    assert_eq!(
        std::fs::read(&key_path).expect("key"),
        key,
        "a good key is kept"
    );
    // Debug output never shows the key.
    let shown = format!("{:?}", CompileCache::open(&cache_dir).expect("reopen"));
    assert!(
        !shown.contains(&hex::encode(&key)) && !shown.contains(&format!("{:?}", &key[..4])),
        "{shown}"
    );

    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    CompileCache::open(&cache_dir).expect("reopen");
    let replaced = std::fs::read(&key_path).expect("key");
    assert_ne!(replaced, key, "a key others could read must be replaced");
    assert_eq!(
        std::fs::metadata(&key_path)
            .expect("key")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    let elsewhere = dir.path().join("chosen-key");
    std::fs::write(&elsewhere, [7u8; 32]).expect("write");
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::remove_file(&key_path).expect("rm");
    std::os::unix::fs::symlink(&elsewhere, &key_path).expect("symlink");
    CompileCache::open(&cache_dir).expect("reopen");
    assert!(std::fs::symlink_metadata(&key_path)
        .expect("key")
        .file_type()
        .is_file());
    assert_ne!(std::fs::read(&key_path).expect("key"), vec![7u8; 32]);
}

fn pinned_policy(kind: &str, digest: &str) -> SummarizerPolicy {
    let text = common::policy_text("").replacen(
        &format!("[components.{kind}]\n"),
        &format!("[components.{kind}]\nsha256 = \"{digest}\"\n"),
        1,
    );
    SummarizerPolicy::parse(
        &text,
        std::path::Path::new("p.toml"),
        std::path::Path::new("/"),
    )
    .expect("policy")
}

#[test]
fn a_pinned_transform_refuses_a_swap_to_another_digest_naming_both() {
    let real = std::fs::read(common::component("serializer")).expect("serializer");
    let other = devin_bridge_test_artifacts::MISBEHAVING_SERIALIZER.bytes();
    let (real_sha, other_sha) = (sha256_hex(&real), sha256_hex(&other));
    let transforms = Transforms::load_with(
        common::test_runtime(),
        common::test_cache(),
        &pinned_policy("serializer", &real_sha).engine_config(),
    )
    .expect("pinned load");
    assert_eq!(
        transforms.pin(TransformKind::Serializer).as_deref(),
        Some(real_sha.as_str())
    );
    let error = transforms
        .swap(TransformKind::Serializer, &other, "test".into())
        .expect_err("a pinned transform must refuse other bytes");
    assert!(matches!(error, EngineError::PinnedSwap { .. }), "{error:?}");
    let message = error.to_string();
    for needle in [
        real_sha.as_str(),
        other_sha.as_str(),
        "[components.serializer] sha256",
        "SIGHUP",
    ] {
        assert!(message.contains(needle), "{needle} missing from: {message}");
    }
    assert_eq!(
        transforms.current(TransformKind::Serializer).sha256,
        real_sha
    );
    // The pinned bytes themselves still go through the self-test and are accepted.
    let report = transforms
        .swap(TransformKind::Serializer, &real, "test".into())
        .expect("the pinned digest is accepted");
    assert!(report.self_test_cases > 0);
    // Transforms without a pin still swap.
    let twin = devin_bridge_test_artifacts::TWIN.bytes();
    transforms
        .swap(TransformKind::Envelope, &twin, "test".into())
        .expect("unpinned swap");
}

#[test]
fn a_reload_honours_the_new_pins_even_for_the_version_already_serving() {
    let real = std::fs::read(common::component("serializer")).expect("serializer");
    let other = devin_bridge_test_artifacts::MISBEHAVING_SERIALIZER.bytes();
    let (real_sha, other_sha) = (sha256_hex(&real), sha256_hex(&other));
    let transforms = common::transforms();
    // The policy now pins another digest than the file it names (the file that serves now):
    // the whole reload is refused, and nothing changes, the pins included.
    let refused = transforms.reload(
        &pinned_policy("serializer", &other_sha).engine_config(),
        transforms.runtime(),
        false,
    );
    match refused {
        Err(EngineError::PinMismatch {
            expected, actual, ..
        }) => {
            assert_eq!(expected, other_sha);
            assert_eq!(actual, real_sha);
        }
        other => panic!("expected a pin mismatch, got {other:?}"),
    }
    assert_eq!(
        transforms.current(TransformKind::Serializer).sha256,
        real_sha
    );
    assert_eq!(transforms.pin(TransformKind::Serializer), None);
    // A policy that pins the serving digest is accepted, and its pin governs later swaps.
    let reports = transforms
        .reload(
            &pinned_policy("serializer", &real_sha).engine_config(),
            transforms.runtime(),
            false,
        )
        .expect("a matching pin reloads");
    assert!(reports.is_empty(), "nothing changed bytes: {reports:?}");
    assert_eq!(
        transforms.pin(TransformKind::Serializer).as_deref(),
        Some(real_sha.as_str())
    );
    assert!(matches!(
        transforms.swap(TransformKind::Serializer, &other, "test".into()),
        Err(EngineError::PinnedSwap { .. })
    ));
    // A reload without pins lifts them.
    transforms
        .reload(
            &common::policy("").engine_config(),
            transforms.runtime(),
            false,
        )
        .expect("reload without pins");
    assert_eq!(transforms.pin(TransformKind::Serializer), None);
    transforms
        .swap(TransformKind::Serializer, &other, "test".into())
        .expect("an unpinned swap");
}

/// A copy of the built component set with a corpus built from `tests/fixtures`, where
/// `edit` may change a fixture before it is listed.
fn component_set_with_corpus(
    dir: &std::path::Path,
    edit: impl Fn(&str, &str, String) -> String,
) -> std::path::PathBuf {
    let set = dir.join("set");
    let mut components = Vec::new();
    for kind in TransformKind::ALL {
        let name = kind.name();
        std::fs::create_dir_all(set.join("corpus").join(name)).expect("mkdir");
        std::fs::copy(common::component(name), set.join(format!("{name}.wasm"))).expect("copy");
        let mut corpus = Vec::new();
        for (file, text) in devin_bridge_engine::corpus::files(kind) {
            let text = edit(name, file, (*text).to_owned());
            std::fs::write(set.join("corpus").join(name).join(file), &text).expect("write");
            corpus.push(serde_json::json!({
                "file": format!("corpus/{name}/{file}"),
                "sha256": sha256_hex(text.as_bytes()),
            }));
        }
        components.push(
            serde_json::json!({ "name": name, "file": format!("{name}.wasm"), "corpus": corpus }),
        );
    }
    std::fs::write(
        set.join("manifest.json"),
        serde_json::to_vec(&serde_json::json!({ "components": components })).expect("json"),
    )
    .expect("manifest");
    set
}

fn policy_for_set(set: &std::path::Path) -> SummarizerPolicy {
    let mut text = String::from("mode = \"summarizer\"\n");
    for kind in TransformKind::ALL {
        text.push_str(&format!(
            "[components.{}]\npath = {:?}\n",
            kind.name(),
            set.join(kind.file_name()).display().to_string()
        ));
    }
    SummarizerPolicy::parse(
        &text,
        std::path::Path::new("p.toml"),
        std::path::Path::new("/"),
    )
    .expect("policy")
}

#[test]
fn the_corpus_shipped_with_the_component_set_is_used_and_verified() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A set whose corpus expects another code for one model-alias case: the real component
    // must now fail its self-test, which shows the shipped corpus (not the embedded one) ran.
    let set = component_set_with_corpus(dir.path(), |name, file, text| {
        if name == "model-alias" && file == "05_validate_unknown_model.json" {
            text.replace("\"unknown_model\"", "\"renamed_code\"")
        } else {
            text
        }
    });
    let error = Transforms::load_with(
        common::test_runtime(),
        common::test_cache(),
        &policy_for_set(&set).engine_config(),
    )
    .err()
    .expect("the shipped corpus must be the one used");
    let message = error.to_string();
    assert!(
        message.contains("05_validate_unknown_model.json") && message.contains("renamed_code"),
        "{message}"
    );

    // An untouched corpus loads, and a swap reports it as the corpus it used.
    let dir = tempfile::tempdir().expect("tempdir");
    let set = component_set_with_corpus(dir.path(), |_, _, text| text);
    let transforms = Transforms::load_with(
        common::test_runtime(),
        common::test_cache(),
        &policy_for_set(&set).engine_config(),
    )
    .expect("set with its corpus");
    let report = transforms
        .swap(
            TransformKind::Sse,
            &std::fs::read(common::component("sse")).expect("sse"),
            "t".into(),
        )
        .expect("swap");
    assert_eq!(
        report.corpus,
        set.join("manifest.json").display().to_string()
    );

    // A corpus file that no longer matches its listed digest is refused (fail closed).
    let case = set.join("corpus").join("sse").join("02_stream_ping.json");
    std::fs::write(&case, "{}").expect("tamper");
    let error = Transforms::load_with(
        common::test_runtime(),
        common::test_cache(),
        &policy_for_set(&set).engine_config(),
    )
    .err()
    .expect("a tampered corpus must be refused");
    assert!(
        matches!(
            error,
            EngineError::Corpus {
                transform: TransformKind::Sse,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("02_stream_ping.json"), "{error}");
}

#[test]
fn the_built_component_set_ships_its_corpus_listed_with_digests() {
    let dir = common::components_dir();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest"))
            .expect("manifest JSON");
    for kind in TransformKind::ALL {
        let entry = manifest["components"]
            .as_array()
            .and_then(|c| c.iter().find(|e| e["name"] == kind.name()))
            .unwrap_or_else(|| panic!("{kind} missing from the manifest"));
        let corpus = entry["corpus"].as_array().expect("corpus list");
        assert_eq!(
            corpus.len(),
            devin_bridge_engine::corpus::files(kind).len(),
            "{kind}"
        );
        for item in corpus {
            let file = item["file"].as_str().expect("file");
            assert!(
                file.starts_with(&format!("corpus/{}/", kind.name())),
                "{file}"
            );
            let bytes = std::fs::read(dir.join(file)).expect("corpus file");
            assert_eq!(item["sha256"], sha256_hex(&bytes).as_str(), "{file}");
        }
        let shipped =
            devin_bridge_engine::Corpus::for_component(kind, &common::component(kind.name()))
                .expect("corpus");
        assert!(
            shipped.origin.ends_with("manifest.json"),
            "{}",
            shipped.origin
        );
    }
}

/// A Bash tool list for the reply-stream tests.
fn bash_tools() -> String {
    serde_json::json!([{"name": "Bash", "input_schema": {"type": "object",
        "properties": {"command": {"type": "string"}}, "required": ["command"]}}])
    .to_string()
}

#[test]
fn a_turns_reply_stream_releases_prose_as_it_comes_and_ends_as_parse_answers() {
    let transforms = common::transforms();
    let output = [
        "I'll list the files",
        " first.\n\n<to",
        "ol>{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}</tool>",
    ];
    let mut stream = transforms
        .reply_stream(&bash_tools(), "seed", 4)
        .expect("the stream opens");
    let released: Vec<String> = output
        .iter()
        .map(|chunk| {
            let pieces = stream
                .push(chunk.to_string())
                .expect("engine")
                .expect("no failure");
            pieces.iter().map(|piece| stream.text(piece)).collect()
        })
        .collect();
    // The prose is shown as it arrives; nothing of the envelope ever is.
    assert_eq!(released[0], "I'll list the files");
    assert_eq!(released[1], " first.");
    assert_eq!(released[2], "");
    let end = stream.finish(true).expect("engine");
    let whole = transforms
        .parse(output.concat(), bash_tools(), "seed".into(), 4)
        .expect("engine");
    assert_eq!(end.reply, whole);
    let shown = end.reply.as_ref().expect("a reply").reply.shown_text();
    assert_eq!(format!("{}{}", released.concat(), end.tail), shown);
    assert!(!end.narrates);
}

#[test]
fn a_component_swap_never_reaches_a_turn_whose_stream_is_open() {
    let transforms = common::transforms();
    let twin = devin_bridge_test_artifacts::TWIN.bytes();
    let original = std::fs::read(common::component("envelope")).expect("envelope");
    // An envelope opening inside another: the push that shows it fails, for certain.
    let nested = "<tool>{\"name\":\"Bash\",<tool>";
    let mut before = transforms
        .reply_stream(&bash_tools(), "seed", 4)
        .expect("the stream opens");
    transforms
        .swap(TransformKind::Envelope, &twin, "test".into())
        .expect("the twin is accepted");
    let mut after = transforms
        .reply_stream(&bash_tools(), "seed", 4)
        .expect("the stream opens");
    let old = before
        .push(nested.into())
        .expect("engine")
        .expect_err("nested");
    let new = after
        .push(nested.into())
        .expect("engine")
        .expect_err("nested");
    assert_eq!(old.code, new.code);
    assert!(
        !old.message.ends_with("(twin build)"),
        "the stream opened before the swap is answered by the version that opened it: {}",
        old.message
    );
    assert!(
        new.message.ends_with("(twin build)"),
        "a stream opened after the swap is the twin's: {}",
        new.message
    );
    // Finishing a stream after the swap back is still the version that opened it.
    transforms
        .swap(TransformKind::Envelope, &original, "test".into())
        .expect("the original is accepted again");
    let end = after.finish(true).expect("engine");
    assert!(end
        .reply
        .expect_err("the reply fails")
        .message
        .ends_with("(twin build)"));
}

/// The components with a memory cap of 4 MiB per instance.
fn capped_at_four_mib() -> Transforms {
    let runtime = common::test_runtime();
    runtime.set_limits(4 << 20, std::time::Duration::from_secs(5));
    Transforms::load_with(
        runtime,
        common::test_cache(),
        &common::policy("").engine_config(),
    )
    .expect("components load")
}

/// Pushes 600 KB chunks until a push fails (the stream keeps the output, so the cap is
/// reached); the error.
fn push_past_the_cap(stream: &mut devin_bridge_engine::ReplyStream) -> EngineError {
    let chunk = "words ".repeat(100_000);
    (0..40)
        .find_map(|_| stream.push(chunk.clone()).err())
        .expect("the cap is reached")
}

#[test]
fn a_reply_stream_push_that_runs_past_its_memory_cap_is_a_typed_error_and_the_stream_stays_broken()
{
    // A store capped at a few MiB: the stream keeps the output, so pushing more than the cap
    // allows ends the stream with a typed error, and every later call says it failed.
    let transforms = capped_at_four_mib();
    let mut stream = transforms
        .reply_stream("[]", "seed", 4)
        .expect("the stream opens");
    let error = push_past_the_cap(&mut stream);
    assert!(
        matches!(error, EngineError::OutOfMemory { .. }),
        "a typed out-of-memory error: {error:?}"
    );
    let later = stream.push("more".into()).expect_err("broken");
    assert!(
        later
            .to_string()
            .contains("an earlier call of this turn failed"),
        "{later}"
    );
}

#[test]
fn a_turn_makes_each_component_once_and_answers_as_fresh_instances_do() {
    let transforms = common::transforms();
    let turn = std::sync::Arc::new(Turn::open(&transforms));
    assert_eq!(turn.instantiated(), 0, "nothing is made before a call");
    // A response's events: all of them on one sse instance.
    let head = MessageHead {
        id: "msg_turn".into(),
        model: "claude-sonnet-4-5".into(),
        usage: Usage::default(),
    };
    let start = turn.stream_start(head.clone()).expect("engine");
    let mut texts = Vec::new();
    for piece in ["The change ", "is done.", " The tests pass."] {
        texts.push(
            turn.stream_text(texts.is_empty(), piece.into())
                .expect("engine"),
        );
    }
    assert_eq!(
        turn.instantiated(),
        1,
        "one sse instance served every event"
    );
    // The same answers fresh instances give.
    assert_eq!(start, transforms.stream_start(head).expect("engine"));
    assert_eq!(
        texts[1],
        transforms
            .stream_text(false, "is done.".into())
            .expect("engine")
    );
    // A reply stream opened in the turn is one more instance, of the envelope.
    let mut stream = turn.reply_stream(&bash_tools(), "seed", 4).expect("opens");
    let pieces = stream.push("Done.".into()).expect("engine").expect("text");
    assert_eq!(stream.text(&pieces[0]), "Done.");
    drop(stream);
    assert_eq!(turn.instantiated(), 2);
    // A second attempt's stream reuses the turn's envelope instance.
    let stream = turn.reply_stream(&bash_tools(), "seed", 4).expect("opens");
    let end = stream.finish(true).expect("engine");
    assert_eq!(
        end.reply.expect("an empty text reply").reply,
        Reply::Text(String::new())
    );
    assert_eq!(turn.instantiated(), 2);
}

#[test]
fn a_component_swap_never_reaches_a_turn_already_open() {
    let transforms = common::transforms();
    let twin = devin_bridge_test_artifacts::TWIN.bytes();
    let original = std::fs::read(common::component("envelope")).expect("envelope");
    let nested = "<tool>{\"name\":\"Bash\",<tool>".to_owned();
    // Opened before the swap, first called after it: still the version it opened with.
    let turn = Turn::open(&transforms);
    transforms
        .swap(TransformKind::Envelope, &twin, "test".into())
        .expect("the twin is accepted");
    let old = turn
        .parse(nested.clone(), bash_tools(), "seed".into(), 4)
        .expect("engine")
        .expect_err("nested");
    let new = Turn::open(&transforms)
        .parse(nested, bash_tools(), "seed".into(), 4)
        .expect("engine")
        .expect_err("nested");
    transforms
        .swap(TransformKind::Envelope, &original, "test".into())
        .expect("the original is accepted again");
    assert!(!old.message.ends_with("(twin build)"), "{}", old.message);
    assert!(new.message.ends_with("(twin build)"), "{}", new.message);
}

#[test]
fn a_turn_whose_call_broke_refuses_every_later_call_of_any_component() {
    let transforms = capped_at_four_mib();
    let turn = std::sync::Arc::new(Turn::open(&transforms));
    let mut stream = turn.reply_stream("[]", "seed", 4).expect("opens");
    let error = push_past_the_cap(&mut stream);
    assert!(
        matches!(error, EngineError::OutOfMemory { .. }),
        "{error:?}"
    );
    // Another component of the same turn is refused too: the store is not entered again.
    let later = turn.stream_ping().expect_err("the turn is broken");
    assert!(
        later
            .to_string()
            .contains("an earlier call of this turn failed"),
        "{later}"
    );
    // A turn of its own is not affected.
    assert!(Turn::open(&transforms).stream_ping().is_ok());
}
