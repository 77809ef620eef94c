//! `devin-bridge-containers`: the container proof and the operator's flow on
//! docker/compose.yml, apart from xtask so that the build tool stays a build tool.
//!
//! xtask builds what these commands use (the components, the host, the offline agent and the
//! fake fleet in `target/debug`) and then runs this binary: `cargo xtask image`,
//! `test-container`, `launch`, `login-devin`, `test-live` and `clean` are its commands, and
//! `cargo xtask test` runs `test-container` after the cargo tests. Run alone, it uses what the
//! last build left there.

mod compose;
mod container;
mod evidence;
mod gate;
mod image;
mod operator;
mod outpost_image;
mod setup;
mod workspace;

use std::path::PathBuf;

use anyhow::{bail, Result};

use workspace::workspace_root;

const USAGE: &str = "\
usage: devin-bridge-containers [--components DIR] <command> [ARGS...]
(run through `cargo xtask <command>`, which builds what the command needs first)

commands:
  setup                     install the Debian packages the container commands run and start
                            dockerd when no Docker daemon answers (as root), or say how
  image                     build the container images and print their ids and sizes
  test-container            set up Docker when needed, then prove the isolation in running
                            containers
  login-devin               log the Devin CLI in on the isolated devin-auth volume (live)
  launch [--offline] [--stop] [-- CLAUDE_ARGS...]
                            re-check isolation, then start Claude Code in its own container
  clean [--all]             stop and remove this project's containers and networks
  test-live                 the opt-in live suite (ENABLE_LIVE_DEVIN_TESTS=1 and an account)

--components DIR            the transform components the bridge image carries
                            (default target/components)
";

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let components = match args.first().map(String::as_str) {
        Some("--components") => {
            if args.len() < 2 {
                bail!("--components needs a directory\n{USAGE}");
            }
            let dir = PathBuf::from(args.remove(1));
            args.remove(0);
            dir
        }
        _ => workspace_root().join("target").join("components"),
    };
    let Some(command) = args.first() else {
        eprint!("{USAGE}");
        bail!("no command given");
    };
    let rest = &args[1..];
    match command.as_str() {
        "setup" => setup::ensure_container_prerequisites(),
        "image" => image::build_images(&components).map(drop),
        "test-container" => {
            setup::ensure_container_prerequisites()?;
            container::test_container(&components)
        }
        "login-devin" => operator::login_devin(),
        "launch" => operator::launch(&components, rest),
        "test-live" => operator::test_live(),
        "clean" => operator::clean(rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => {
            eprint!("{USAGE}");
            bail!("unknown command {other:?}")
        }
    }
}
