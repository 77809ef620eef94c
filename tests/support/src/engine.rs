//! The engine in the test process: small limits, the test run's compile cache, the
//! transforms loaded with them.

use devin_bridge_engine::{CompileCache, Runtime, RuntimeConfig, Transforms};
use devin_bridge_policy::ModePolicy as _;

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
    CompileCache::open(&test_cache_dir()).expect("test compile cache")
}

/// Where [`test_cache`] keeps its entries.
pub fn test_cache_dir() -> std::path::PathBuf {
    crate::artifacts::workspace_root()
        .join("target")
        .join("test-compile-cache")
}

/// The five transforms, loaded with the test limits and cache.
pub fn transforms() -> Transforms {
    Transforms::load_with(
        test_runtime(),
        test_cache(),
        &crate::policies::policy("").engine_config(),
    )
    .expect("components load")
}

/// The `XDG_CACHE_HOME` for the bridges the tests start as processes (created private, mode
/// 0700): their compile cache is then `devin-bridge/` in it, shared by every run, so each
/// transform is compiled once per test run instead of once per process. Tests that check a
/// cold start or a cache of their own give theirs instead.
pub fn bridge_cache_home() -> std::path::PathBuf {
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = crate::artifacts::workspace_root()
        .join("target")
        .join("test-cache-home");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .expect("the spawned bridges' cache home");
    dir
}
