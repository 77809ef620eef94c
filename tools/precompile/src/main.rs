//! `devin-bridge-precompile <components dir> <cache dir>`: loads each transform's component
//! from the directory into the compile cache, compiled with the bridge's default engine
//! settings (no fuel metering), exactly as the bridge and the tests compile it.
//!
//! The fuzz targets are built without a compiler (cranelift is most of their build) and load
//! their components from the tests' compile cache; `cargo xtask fuzz` runs this first, so a
//! fuzz run on a checkout whose tests never ran still finds them there. A component already
//! cached is loaded, not compiled again.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use devin_bridge_engine::{CompileCache, Loaded, Runtime, RuntimeConfig, TransformKind};

const USAGE: &str = "usage: devin-bridge-precompile <components dir> <cache dir>";

fn main() -> Result<()> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [components, cache_dir] = args.as_slice() else {
        bail!("{USAGE}");
    };
    // The bridge's default limits: none of them changes the compiled code but metering, which
    // the bridge leaves off (as do the fuzz targets).
    let runtime = Runtime::new(RuntimeConfig::from(
        devin_bridge_engine::RuntimeLimits::default(),
    ))
    .context("creating the wasm engine")?;
    let cache = CompileCache::open(cache_dir)
        .with_context(|| format!("opening the compile cache {}", cache_dir.display()))?;
    for kind in TransformKind::ALL {
        let path = components.join(kind.file_name());
        let started = Instant::now();
        Loaded::from_file(&runtime, &cache, kind, &path, None)
            .with_context(|| format!("compiling {}", path.display()))?;
        eprintln!(
            "precompile: {kind} ready in {} ({} ms)",
            cache_dir.display(),
            started.elapsed().as_millis()
        );
    }
    Ok(())
}
