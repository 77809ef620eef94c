//! Shared harness of the fuzz targets: the native transform runs for coverage
//! (`Call::run_native`), and the same input goes through the wasm component (process-wide engine, fresh store per input, fuel for
//! determinism); both answers must be equal. A trap other than running out of fuel is a finding.

use std::path::PathBuf;
use std::sync::OnceLock;

use devin_bridge_engine::{
    Call, CompileCache, EngineError, Loaded, Runtime, RuntimeConfig, TransformKind,
};

/// Fuel per call: generous for real inputs, bounded for adversarial ones.
const FUEL: u64 = 2_000_000_000;

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
        let dir = std::env::var_os("DEVIN_BRIDGE_COMPONENTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/components")
            });
        let runtime = Runtime::new(RuntimeConfig {
            memory_bytes: 512 << 20,
            call_timeout: std::time::Duration::from_secs(600),
            max_instances: 4,
            fuel: Some(FUEL),
        })
        .expect("wasm engine");
        let cache = CompileCache::default_dir()
            .and_then(|dir| CompileCache::open(&dir).ok())
            .unwrap_or_else(CompileCache::disabled);
        let loaded = Loaded::from_file(&runtime, &cache, kind, &dir.join(kind.file_name()), None)
            .unwrap_or_else(|error| {
                panic!("cannot load the {kind} component (run `cargo xtask components`): {error}")
            });
        Harness { runtime, loaded }
    })
}

/// Loads (and compiles) the component of `kind` up front, from the fuzz target's `init` hook,
/// so libFuzzer's time budget is spent fuzzing rather than compiling.
pub fn prepare(kind: TransformKind) {
    let _ = harness(kind);
}

/// Runs `call` natively (`Call::run_native`) and in the component; the two answers must be
/// equal. Out of fuel is not a finding; any other engine error is.
pub fn differential(call: Call) {
    let native = call.run_native();
    let harness = harness(call.transform());
    match harness.loaded.call(&harness.runtime, &call) {
        Ok(wasm) => assert_eq!(native, wasm, "native and wasm answers differ for {call:?}"),
        Err(EngineError::OutOfFuel { .. }) => {}
        Err(error) => panic!("the wasm component failed where the native code answered: {error}"),
    }
}
