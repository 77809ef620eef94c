//! Shared helpers of the host's integration tests.
#![allow(dead_code)]

pub mod bridge;
pub mod claude;
pub mod installed;
pub mod outpost;
pub mod yaml;

use std::path::{Path, PathBuf};

use devin_bridge_engine::{CompileCache, Runtime, RuntimeConfig, Transforms};
use devin_bridge_policy::ModePolicy as _;
use devin_bridge_summarizer::policy::SummarizerPolicy;

/// The built transform components (`cargo xtask test` sets `DEVIN_BRIDGE_COMPONENTS`).
pub fn components_dir() -> PathBuf {
    let dir = std::env::var_os("DEVIN_BRIDGE_COMPONENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/components"));
    assert!(
        dir.join("serializer.wasm").exists(),
        "no components in {}: run the tests with `cargo xtask test`, which builds them",
        dir.display()
    );
    dir
}

/// The deliberately faulty components built for these tests.
pub fn test_components_dir() -> PathBuf {
    let dir = std::env::var_os("DEVIN_BRIDGE_TEST_COMPONENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| components_dir().join("test"));
    assert!(
        dir.join("misbehaving-serializer.wasm").exists(),
        "no test components in {}: run the tests with `cargo xtask test`",
        dir.display()
    );
    dir
}

pub fn component(name: &str) -> PathBuf {
    components_dir().join(format!("{name}.wasm"))
}

pub fn test_component(name: &str) -> PathBuf {
    test_components_dir().join(format!("{name}.wasm"))
}

/// A policy whose components are the built ones, given as absolute paths.
pub fn policy_text(extra: &str) -> String {
    let dir = components_dir();
    let mut text = String::from("mode = \"summarizer\"\n");
    for name in ["serializer", "envelope", "sse", "model-alias"] {
        text.push_str(&format!(
            "[components.{name}]\npath = {:?}\n",
            dir.join(format!("{name}.wasm")).display().to_string()
        ));
    }
    text.push_str(extra);
    text
}

pub fn policy(extra: &str) -> SummarizerPolicy {
    SummarizerPolicy::parse(
        &policy_text(extra),
        Path::new("test-policy.toml"),
        Path::new("/"),
    )
    .expect("test policy")
}

/// Limits small enough that the fault tests finish quickly.
pub fn test_runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        memory_bytes: 64 << 20,
        call_timeout: std::time::Duration::from_millis(500),
        max_instances: 64,
        fuel: None,
    })
    .expect("runtime")
}

/// The shared compile cache of the test run (a private directory under target/).
pub fn test_cache() -> CompileCache {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-compile-cache");
    CompileCache::open(&dir).expect("test compile cache")
}

pub fn transforms() -> Transforms {
    Transforms::load_with(test_runtime(), test_cache(), &policy("").engine_config())
        .expect("components load")
}

/// Follows a `devin-bridge serve` process's stderr on a thread: echoes and keeps every line,
/// and sends the address of its `listening on http://ADDR` line once, or `None` when stderr
/// ends without one (the process exited).
pub fn follow_bridge_stderr(
    pipe: std::process::ChildStderr,
) -> (
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    std::sync::mpsc::Receiver<Option<String>>,
) {
    use std::io::BufRead;
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let kept = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            eprintln!("bridge: {line}");
            // `listening on http://127.0.0.1:PORT (mode ...)`
            if let Some(rest) = line.strip_prefix("listening on http://") {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                let _ = addr_tx.send(Some(addr.to_owned()));
            }
            kept.lock().expect("lines").push(line);
        }
        let _ = addr_tx.send(None);
    });
    (lines, addr_rx)
}
