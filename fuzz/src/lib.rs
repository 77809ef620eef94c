//! Shared harness of the fuzz targets: the native transform runs for coverage
//! (`Call::run_native`), and the same input goes through the wasm component (process-wide engine,
//! fresh store per input); both answers must be equal, and any trap is a finding.
//!
//! The targets are built without wasm's compiler (the engine without its `compiler` feature:
//! cranelift was two fifths of their build's CPU time). They load each component compiled as
//! the bridge compiles it (no fuel metering, which would change the machine code the fuzzer
//! checks; the engine settings of every other build) from the workspace's test compile cache
//! (`target/test-compile-cache`): the tests fill it, and `cargo xtask fuzz` compiles what is
//! missing there before it runs a target (`devin-bridge-precompile`). An entry is loaded only
//! when it verifies under the cache's key, and wasmtime refuses one compiled for other engine
//! settings. A call is bounded by a deadline rather than fuel: one that runs longer than
//! [`CALL_DEADLINE`] on an input of a fuzzer's size is a hang, and a finding.

use std::path::PathBuf;
use std::sync::OnceLock;

use devin_bridge_engine::{Call, CompileCache, Loaded, Runtime, RuntimeConfig, TransformKind};

/// The deadline of one call: the slowest transform answers a fuzz input (a few KB, up to the
/// largest seed) in milliseconds, so this is never reached but by a hang, even on a loaded
/// machine.
const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

struct Harness {
    runtime: Runtime,
    loaded: Loaded,
}

fn harness(kind: TransformKind) -> &'static Harness {
    static HARNESSES: [OnceLock<Harness>; TransformKind::COUNT] =
        [const { OnceLock::new() }; TransformKind::COUNT];
    let index = TransformKind::ALL
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(0);
    HARNESSES[index].get_or_init(|| {
        let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target");
        let dir = std::env::var_os("DEVIN_BRIDGE_COMPONENTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| target.join("components"));
        let runtime = Runtime::new(RuntimeConfig {
            memory_bytes: 512 << 20,
            call_timeout: CALL_DEADLINE,
            max_instances: 4,
            // Metering would compile other code than the bridge runs (and miss the cache).
            fuel: None,
        })
        .expect("wasm engine");
        // The workspace's test compile cache: the tests filled it with these components,
        // compiled by the same engine settings.
        let cache = CompileCache::open(&target.join("test-compile-cache"))
            .unwrap_or_else(|_| CompileCache::disabled());
        let loaded = Loaded::from_file(&runtime, &cache, kind, &dir.join(kind.file_name()), None)
            .unwrap_or_else(|error| {
                panic!(
                    "cannot load the compiled {kind} component (`cargo xtask fuzz` builds and \
                     compiles the components before it runs a target): {error}"
                )
            });
        Harness { runtime, loaded }
    })
}

/// Loads the compiled component of `kind` up front, from the fuzz target's `init` hook,
/// so a missing one fails the run at its start, and libFuzzer's time budget is all fuzzing.
pub fn prepare(kind: TransformKind) {
    let _ = harness(kind);
}

/// Runs `call` natively (`Call::run_native`) and in the component; the two answers must be
/// equal. Any engine error (a trap, the deadline, the memory cap) is a finding.
pub fn differential(call: Call) {
    let native = call.run_native();
    let harness = harness(call.transform());
    match harness.loaded.call(&harness.runtime, &call) {
        Ok(wasm) => assert_eq!(native, wasm, "native and wasm answers differ for {call:?}"),
        Err(error) => panic!("the wasm component failed where the native code answered: {error}"),
    }
}
