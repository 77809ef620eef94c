//! `cargo xtask dist`: the installable tarball.
//!
//! `target/dist/devin-bridge-<version>-<target>.tar.gz` holds `bin/devin-bridge` (its
//! transform components embedded, debug info stripped), the policies that work outside this checkout, the Claude
//! Code plugin with its marketplace, the docs and the license; a `.sha256` file sits beside
//! it. The tarball is staged in a private directory and renamed into place only when it is
//! complete, so a failed run leaves no partial tarball.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::workspace::{cargo, run, workspace_root};

/// The policies the tarball ships: those that name nothing inside this checkout.
const POLICIES: [&str; 6] = [
    "summarizer.toml",
    "companion.toml",
    "outpost.toml",
    "guard-devin.toml",
    "guard-deny-all.toml",
    "models.json",
];

/// Top-level files and directories copied as they are.
const TREES: [&str; 5] = ["README.md", "LICENSE", "docs", "plugins", ".claude-plugin"];

const USAGE: &str = "usage: cargo xtask dist [--profile release|dev] [--out DIR] [--binary PATH]";

/// What `dist` was asked for.
#[derive(Debug)]
struct Options {
    profile: String,
    out: PathBuf,
    /// An already-built `devin-bridge` to package as it is (nothing is built).
    binary: Option<PathBuf>,
}

fn options(rest: &[String]) -> Result<Options> {
    let mut options = Options {
        profile: "release".to_owned(),
        out: workspace_root().join("target").join("dist"),
        binary: None,
    };
    let mut args = rest.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--profile" => match args.next().map(String::as_str) {
                Some(profile @ ("release" | "dev")) => profile.clone_into(&mut options.profile),
                other => bail!("--profile must be release or dev, not {other:?}\n{USAGE}"),
            },
            "--out" => match args.next() {
                Some(dir) => options.out = PathBuf::from(dir),
                None => bail!("--out needs a directory\n{USAGE}"),
            },
            "--binary" => match args.next() {
                Some(binary) => options.binary = Some(PathBuf::from(binary)),
                None => bail!("--binary needs a path\n{USAGE}"),
            },
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    Ok(options)
}

/// Builds the components and the binary, then writes the tarball; prints its path. With
/// `--binary`, packages that binary instead of building one.
pub(crate) fn dist(rest: &[String]) -> Result<PathBuf> {
    let options = options(rest)?;
    if let Some(binary) = &options.binary {
        // The host's tests package the dev binary they run this way when `cargo xtask test`
        // has not packaged it for them: building here would rewrite the components and the
        // binary those tests are using.
        let tarball = package_built(binary, &options.out)?;
        println!("{}", tarball.display());
        return Ok(tarball);
    }
    // The host's build script embeds what this writes to target/components.
    crate::components::build_components()?;
    let mut build = cargo();
    build.args([
        "build",
        "--locked",
        "-p",
        "devin-bridge",
        "--bin",
        "devin-bridge",
    ]);
    if options.profile == "release" {
        build.arg("--release");
    }
    run(&mut build)?;
    let binary = workspace_root()
        .join("target")
        .join(if options.profile == "release" {
            "release"
        } else {
            "debug"
        })
        .join("devin-bridge");
    let version_text = embedded_version(&binary)?;
    let target = host_target()?;
    let name = format!("devin-bridge-{}-{target}", env!("CARGO_PKG_VERSION"));
    let tarball = package(&binary, &name, &options.out)?;
    eprintln!("xtask: {}", version_text.replace('\n', "\nxtask:   "));
    println!("{}", tarball.display());
    Ok(tarball)
}

/// Packages the dev binary the tests just built (`target/debug/devin-bridge`) into
/// `target/dist-test`, for the tests that install it away from the checkout.
pub(crate) fn package_for_tests() -> Result<PathBuf> {
    let root = workspace_root();
    package_built(
        &root.join("target").join("debug").join("devin-bridge"),
        &root.join("target").join("dist-test"),
    )
}

/// Packages an already-built binary into `out`, refusing one that lacks a component.
fn package_built(binary: &Path, out: &Path) -> Result<PathBuf> {
    embedded_version(binary)?;
    let name = format!(
        "devin-bridge-{}-{}",
        env!("CARGO_PKG_VERSION"),
        host_target()?
    );
    package(binary, &name, out)
}

/// The binary's `--version`, refusing one that lacks a component.
fn embedded_version(binary: &Path) -> Result<String> {
    let output = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {} --version", binary.display()))?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || text.contains("not built in") {
        bail!(
            "{} does not carry every transform component:\n{text}",
            binary.display()
        );
    }
    Ok(text)
}

/// The target triple rustc builds for on this machine.
fn host_target() -> Result<String> {
    let output = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("-vV")
        .output()
        .context("cannot run rustc -vV")?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .context("rustc -vV names no host target")
}

/// Stages `name/` in a private directory under `out`, tars it, and renames the tarball (and
/// its `.sha256`) into place.
fn package(binary: &Path, name: &str, out: &Path) -> Result<PathBuf> {
    let root = workspace_root();
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let staging = out.join(format!(".staging-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    let result = (|| -> Result<PathBuf> {
        let top = staging.join(name);
        std::fs::create_dir_all(top.join("bin"))?;
        std::fs::create_dir_all(top.join("policies"))?;
        let installed = top.join("bin").join("devin-bridge");
        std::fs::copy(binary, &installed)
            .with_context(|| format!("cannot copy {}", binary.display()))?;
        // Debug info is three quarters of the binary; symbols stay, so backtraces keep names.
        run(Command::new("strip").arg("--strip-debug").arg(&installed))?;
        for policy in POLICIES {
            let from = root.join("policies").join(policy);
            std::fs::copy(&from, top.join("policies").join(policy))
                .with_context(|| format!("cannot copy {}", from.display()))?;
        }
        for tree in TREES {
            run(Command::new("cp")
                .arg("-R")
                .arg(root.join(tree))
                .arg(top.join(tree)))?;
        }
        let partial = staging.join(format!("{name}.tar.gz"));
        // Owner, group and order fixed, so two runs over the same files give the same listing.
        run(Command::new("tar")
            .arg("-C")
            .arg(&staging)
            .args([
                "--sort=name",
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "-czf",
            ])
            .arg(&partial)
            .arg(name))?;
        let digest = Sha256::digest(std::fs::read(&partial)?);
        let tarball = out.join(format!("{name}.tar.gz"));
        let file_name = format!("{name}.tar.gz");
        std::fs::write(
            out.join(format!("{file_name}.sha256")),
            format!("{}  {file_name}\n", hex::encode(digest)),
        )?;
        std::fs::rename(&partial, &tarball)?;
        Ok(tarball)
    })();
    // Whatever happened, the staging directory goes; only a finished tarball stays.
    let _ = std::fs::remove_dir_all(&staging);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_default_to_a_release_build_into_target_dist() {
        let options = options(&[]).expect("defaults");
        assert_eq!(options.profile, "release");
        assert!(options.out.ends_with("target/dist"));
        assert!(options.binary.is_none());
    }

    #[test]
    fn a_built_binary_is_named_with_binary() {
        let args: Vec<String> = ["--binary", "/tmp/devin-bridge", "--out", "/tmp/out"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        let options = options(&args).expect("parsed");
        assert_eq!(options.binary, Some(PathBuf::from("/tmp/devin-bridge")));
        assert_eq!(options.out, PathBuf::from("/tmp/out"));
    }

    #[test]
    fn bad_options_are_refused_with_the_usage() {
        for args in [
            vec!["--profile", "fast"],
            vec!["--out"],
            vec!["--binary"],
            vec!["--tarball"],
        ] {
            let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
            let message = options(&args).expect_err("refused").to_string();
            assert!(message.contains(USAGE), "{message}");
        }
    }

    #[test]
    fn every_shipped_file_exists_in_the_checkout() {
        let root = workspace_root();
        for policy in POLICIES {
            assert!(root.join("policies").join(policy).is_file(), "{policy}");
        }
        for tree in TREES {
            assert!(root.join(tree).exists(), "{tree}");
        }
    }

    #[test]
    fn shipped_policies_name_nothing_inside_the_checkout() {
        let root = workspace_root();
        for policy in POLICIES.iter().filter(|p| p.ends_with(".toml")) {
            let text = std::fs::read_to_string(root.join("policies").join(policy)).expect("read");
            for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
                assert!(
                    !line.contains("../") && !line.contains("target/"),
                    "{policy}: {line}"
                );
            }
        }
    }
}
