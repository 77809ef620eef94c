//! `devin-bridge-preinit --root DIR (NAME INPUT OUTPUT)...`: pre-initialises transform
//! components (see [`preinit`] for what and why). `cargo xtask components` runs it as one step
//! of the component build, so that xtask itself links no wasmtime.
//!
//! NAME is a transform and picks the warm-up call; INPUT is the plain component, OUTPUT where
//! its snapshot is written; DIR is the repository whose fixtures the warm-ups read. Nothing is
//! written for a component whose warm-up fails, and the run fails. A transform with no warm-up
//! call here (a new one) is written as built, and the run says so: pre-initialisation makes a
//! transform's first call cheaper, it does not change an answer.

mod preinit;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

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
        let snapshot = preinit::preinitialize(&component, &warm_up).with_context(|| {
            format!(
                "{}: pre-initialising with {}#{}",
                job.name, warm_up.interface, warm_up.function
            )
        })?;
        std::fs::write(&job.output, &snapshot)
            .with_context(|| format!("writing {}", job.output.display()))?;
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
