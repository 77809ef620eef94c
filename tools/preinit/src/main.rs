//! `devin-bridge-preinit --root DIR (NAME INPUT OUTPUT)...`: pre-initialises transform
//! components (see [`preinit`] for what and why). `cargo xtask components` runs it as one step
//! of the component build, so that xtask itself links no wasmtime.
//!
//! NAME is a transform and picks the warm-up call; INPUT is the plain component, OUTPUT where
//! its snapshot is written; DIR is the repository whose fixtures the warm-ups read. Nothing is
//! written for a component whose warm-up fails, and the run fails. A transform with no warm-up
//! call here (a new one) is written as built, and the run says so: pre-initialisation makes a
//! transform's first call cheaper, it does not change an answer.
//!
//! A snapshot is made again only when something it is made of changed: beside each OUTPUT the
//! tool keeps a stamp, the SHA-256 of its inputs (this tool's own executable, which holds
//! wasmtime and the warm-up code; the warm-up call with its arguments, which hold the fixtures
//! it read; the plain component), and an OUTPUT whose stamp matches is left as it is. Every
//! command that builds the components (the tests, `serve`, the benches, the fuzz runs) runs
//! this step, and a snapshot costs seconds of compiling the component.

mod preinit;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

const USAGE: &str = "usage: devin-bridge-preinit --root DIR (NAME INPUT OUTPUT)...";

/// One component to pre-initialise.
struct Job {
    name: String,
    input: PathBuf,
    output: PathBuf,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (root, jobs) = parse(&args)?;
    let tool = std::env::current_exe()
        .and_then(std::fs::read)
        .context("reading this tool's own executable (a snapshot's stamp covers it)")?;
    for job in jobs {
        let component = std::fs::read(&job.input)
            .with_context(|| format!("reading {}", job.input.display()))?;
        let Some(warm_up) = warm_up_for(&job.name) else {
            std::fs::write(&job.output, &component)
                .with_context(|| format!("writing {}", job.output.display()))?;
            eprintln!(
                "preinit: {:<26} has no warm-up call: written as built (not pre-initialised)",
                job.name
            );
            continue;
        };
        let warm_up = warm_up(&root)?;
        let stamp = stamp(&tool, &warm_up, &component);
        let stamp_path = job.output.with_extension("stamp");
        if job.output.is_file()
            && std::fs::read_to_string(&stamp_path).is_ok_and(|kept| kept == stamp)
        {
            eprintln!(
                "preinit: {:<26} up to date (its inputs' stamp matches)",
                job.name
            );
            continue;
        }
        // Gone first: a run that fails below leaves no stamp that names a new snapshot's
        // inputs beside an old snapshot.
        let _ = std::fs::remove_file(&stamp_path);
        let snapshot = preinit::preinitialize(&component, &warm_up).with_context(|| {
            format!(
                "{}: pre-initialising with {}#{}",
                job.name, warm_up.interface, warm_up.function
            )
        })?;
        std::fs::write(&job.output, &snapshot)
            .with_context(|| format!("writing {}", job.output.display()))?;
        std::fs::write(&stamp_path, &stamp)
            .with_context(|| format!("writing {}", stamp_path.display()))?;
        eprintln!(
            "preinit: {:<26} pre-initialised by one {} call ({} -> {} bytes)",
            job.name,
            warm_up.function,
            component.len(),
            snapshot.len()
        );
    }
    Ok(())
}

/// The stamp of a snapshot: the SHA-256, in hex, of everything it is made of (see the module
/// documentation).
fn stamp(tool: &[u8], warm_up: &preinit::WarmUp, component: &[u8]) -> String {
    let mut digest = Sha256::new();
    for part in [
        tool,
        warm_up.interface.as_bytes(),
        warm_up.function.as_bytes(),
        format!("{:?}", warm_up.args).as_bytes(),
        component,
    ] {
        // Each part's length first, so no two lists of parts hash alike.
        digest.update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_le_bytes());
        digest.update(part);
    }
    hex::encode(digest.finalize())
}

/// `--root DIR` then triples.
fn parse(args: &[String]) -> Result<(PathBuf, Vec<Job>)> {
    let [flag, root, rest @ ..] = args else {
        bail!("{USAGE}");
    };
    if flag != "--root" || rest.is_empty() || rest.len() % 3 != 0 {
        bail!("{USAGE}");
    }
    let jobs = rest
        .chunks_exact(3)
        .map(|job| Job {
            name: job[0].clone(),
            input: PathBuf::from(&job[1]),
            output: PathBuf::from(&job[2]),
        })
        .collect();
    Ok((PathBuf::from(root), jobs))
}

/// The warm-up of a transform, by its component name; none for a transform that has none.
fn warm_up_for(name: &str) -> Option<fn(&Path) -> Result<preinit::WarmUp>> {
    Some(match name {
        "serializer" => preinit::serializer_warm_up,
        "envelope" => preinit::envelope_warm_up,
        "sse" => preinit::sse_warm_up,
        "model-alias" => preinit::model_alias_warm_up,
        "safeguard" => preinit::safeguard_warm_up,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn triples_after_the_root_are_jobs() {
        let (root, jobs) =
            parse(&strings(&["--root", "/r", "sse", "a.wasm", "b.wasm"])).expect("parsed");
        assert_eq!(root, PathBuf::from("/r"));
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].name, "sse");
        assert_eq!(jobs[0].output, PathBuf::from("b.wasm"));
    }

    #[test]
    fn a_stamp_changes_with_each_input_and_only_with_them() {
        let warm_up = |arg: &str| preinit::WarmUp {
            interface: "devin-bridge:transforms/sse@0.1.0",
            function: "stream-ping",
            args: vec![wasmtime::component::Val::String(arg.to_owned())],
        };
        let base = stamp(b"tool", &warm_up("a"), b"component");
        assert_eq!(base, stamp(b"tool", &warm_up("a"), b"component"));
        assert_eq!(base.len(), 64);
        for other in [
            stamp(b"tool2", &warm_up("a"), b"component"),
            stamp(b"tool", &warm_up("b"), b"component"),
            stamp(b"tool", &warm_up("a"), b"component2"),
            // A byte moved from the tool to the component: the lengths keep them apart.
            stamp(b"too", &warm_up("a"), b"lcomponent"),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn anything_else_is_refused_with_the_usage() {
        for args in [
            &[][..],
            &["--root", "/r"][..],
            &["--root", "/r", "sse", "a.wasm"][..],
            &["--out", "/r", "sse", "a.wasm", "b.wasm"][..],
        ] {
            let error = parse(&strings(args)).err().expect("refused");
            assert!(error.to_string().contains(USAGE), "{args:?}: {error}");
        }
    }

    #[test]
    fn every_transform_has_a_warm_up_built_from_the_checkout() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for name in ["serializer", "envelope", "sse", "model-alias", "safeguard"] {
            let warm_up = warm_up_for(name).expect("known")(&root).expect("fixtures read");
            assert!(warm_up.interface.contains(name), "{name}");
        }
        assert!(warm_up_for("twin").is_none());
    }
}
