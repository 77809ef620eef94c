//! Debian packages whose programs the tests run: which are missing, and installing them.
//!
//! A package counts as present when its program is found (on `PATH` or in the sbin
//! directories), not by asking dpkg: a program installed another way (node from NodeSource,
//! docker from Docker's own packages) serves as well. Installing needs root and apt-get; it is
//! noninteractive and takes no recommended packages. Without root nothing is changed, and the
//! error carries the exact command to run as root.
//!
//! Two of the project's tools may install at once (CI builds the fuzz targets in the background
//! while the tests set up), and apt-get refuses to start while another holds its locks, so an
//! install first takes this project's own lock ([`INSTALL_LOCK`]) and the second one waits.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// Where Debian keeps apt-get.
const APT_GET: &str = "/usr/bin/apt-get";

/// The file whose exclusive lock an install holds: in a root-owned directory that exists
/// wherever apt-get does (never a world-writable one, where another user could plant a link).
const INSTALL_LOCK: &str = "/var/cache/apt/devin-bridge-install.lock";

/// A program the tests run, and the Debian package that installs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub program: &'static str,
    pub package: &'static str,
}

impl Need {
    /// `program`, which the Debian package `package` installs.
    pub const fn new(program: &'static str, package: &'static str) -> Self {
        Need { program, package }
    }
}

/// Why the packages are not there.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what} needs the Debian packages {}; install them as root:\n  {}", packages.join(" "), install_command(packages))]
    NotRoot {
        what: String,
        packages: Vec<&'static str>,
    },
    #[error("{what} needs the Debian packages {}, and this machine has no apt-get", packages.join(" "))]
    NoAptGet {
        what: String,
        packages: Vec<&'static str>,
    },
    #[error("cannot run apt-get: {0}")]
    AptGet(std::io::Error),
    #[error("cannot take the install lock {}: {source}", path.display())]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`apt-get {step}` failed with {status}")]
    AptFailed {
        step: &'static str,
        status: ExitStatus,
    },
    #[error("apt-get installed {}, but no program of these is found: {}", installed.join(" "), still.join(" "))]
    StillMissing {
        installed: Vec<&'static str>,
        still: Vec<&'static str>,
    },
}

impl Error {
    /// Whether the only problem is that this process may not install anything.
    pub fn is_not_root(&self) -> bool {
        matches!(self, Self::NotRoot { .. })
    }
}

/// Where programs are looked for: a list of directories, searched in order. The machine's is
/// `PATH` followed by the sbin directories a non-login root shell may lack
/// ([`ProgramSearch::from_env`]); a test builds its own ([`ProgramSearch::only`]) so that a
/// decision can be computed against a machine that is not this one.
#[derive(Debug, Clone)]
pub struct ProgramSearch {
    dirs: Vec<PathBuf>,
}

impl ProgramSearch {
    /// This process's `PATH`, then `/usr/local/sbin`, `/usr/sbin` and `/sbin`.
    pub fn from_env() -> Self {
        let path = std::env::var_os("PATH").unwrap_or_default();
        ProgramSearch {
            dirs: std::env::split_paths(&path)
                .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
                .collect(),
        }
    }

    /// Exactly `dirs`, nothing else.
    pub fn only(dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        ProgramSearch {
            dirs: dirs.into_iter().collect(),
        }
    }

    /// The file `program` in the first directory that has it.
    pub fn find(&self, program: &str) -> Option<PathBuf> {
        self.dirs
            .iter()
            .map(|dir| dir.join(program))
            .find(|file| file.is_file())
    }

    /// The packages of `needs` whose program is not found, each once, in `needs` order. Each
    /// need is checked by its own program: a neighbour (the `docker` client without `dockerd`)
    /// does not stand in for it.
    pub fn missing(&self, needs: &[Need]) -> Vec<&'static str> {
        let mut packages: Vec<&'static str> = Vec::new();
        for need in needs {
            if self.find(need.program).is_none() && !packages.contains(&need.package) {
                packages.push(need.package);
            }
        }
        packages
    }
}

/// The packages of `needs` whose program is not found on this machine (see
/// [`ProgramSearch::missing`]).
pub fn missing(needs: &[Need]) -> Vec<&'static str> {
    ProgramSearch::from_env().missing(needs)
}

/// `program` on `PATH`, or in the sbin directories a non-login root shell may lack.
pub fn find_program(program: &str) -> Option<PathBuf> {
    ProgramSearch::from_env().find(program)
}

/// The command that installs `packages`, as root.
pub fn install_command(packages: &[&str]) -> String {
    format!(
        "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {}",
        packages.join(" ")
    )
}

/// Whether this process runs as root: its effective uid (`/proc/self/status`) is 0.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| effective_uid_is_root(&status))
}

/// The `Uid:` line of a `/proc/<pid>/status` lists the real, effective, saved and filesystem
/// uids; the effective one decides.
fn effective_uid_is_root(status: &str) -> bool {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|uids| uids.split_whitespace().nth(1))
        == Some("0")
}

/// Installs the packages of `needs` whose program is missing; `what` names the consumer in
/// messages ("the cargo tests"), `tool` prefixes each printed step. Nothing happens when
/// nothing is missing.
pub fn ensure(needs: &[Need], what: &str, tool: &str) -> Result<(), Error> {
    let packages = missing(needs);
    if packages.is_empty() {
        return Ok(());
    }
    if !is_root() {
        return Err(Error::NotRoot {
            what: what.to_owned(),
            packages,
        });
    }
    if !Path::new(APT_GET).exists() {
        return Err(Error::NoAptGet {
            what: what.to_owned(),
            packages,
        });
    }
    eprintln!(
        "{tool}: installing what {what} needs: {}",
        packages.join(" ")
    );
    install(&packages, tool)?;
    let still = missing(needs);
    if still.is_empty() {
        Ok(())
    } else {
        Err(Error::StillMissing {
            installed: packages,
            still,
        })
    }
}

/// `apt-get update`, then `apt-get install` of `packages` (noninteractive, no recommends),
/// each step printed first. Needs root.
pub fn install(packages: &[&str], tool: &str) -> Result<(), Error> {
    let _lock = install_lock(Path::new(INSTALL_LOCK), tool)?;
    eprintln!("{tool}: apt-get update");
    apt_get("update", &["update", "-q"])?;
    eprintln!(
        "{tool}: apt-get install -y --no-install-recommends {}",
        packages.join(" ")
    );
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    args.extend_from_slice(packages);
    apt_get("install", &args)
}

/// Takes the exclusive lock of `path` (the [`INSTALL_LOCK`] outside tests), waiting (and
/// saying so) while another install holds it; released when the returned file is dropped.
fn install_lock(path: &Path, tool: &str) -> Result<std::fs::File, Error> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|source| lock_error(path, source))?;
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            eprintln!(
                "{tool}: another install is running; waiting for {}",
                path.display()
            );
        }
        Err(std::fs::TryLockError::Error(source)) => return Err(lock_error(path, source)),
    }
    file.lock().map_err(|source| lock_error(path, source))?;
    Ok(file)
}

fn lock_error(path: &Path, source: std::io::Error) -> Error {
    Error::Lock {
        path: path.to_owned(),
        source,
    }
}

fn apt_get(step: &'static str, args: &[&str]) -> Result<(), Error> {
    let status = Command::new(APT_GET)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map_err(Error::AptGet)?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::AptFailed { step, status })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_holds_its_lock_exclusively_until_it_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("install.lock");
        let held = install_lock(&path, "test").expect("the first install takes the lock");
        let second = std::fs::File::open(&path).expect("open the lock file");
        assert!(
            matches!(second.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
            "a second install must wait while the first holds the lock"
        );
        drop(held);
        second
            .try_lock()
            .expect("the lock is free once the first install ends");
    }

    #[test]
    fn a_program_on_path_is_present_and_an_unknown_one_is_missing_once() {
        let needs = [
            Need {
                program: "sh",
                package: "dash",
            },
            Need {
                program: "no-such-program-devin-bridge",
                package: "imaginary",
            },
            Need {
                program: "no-such-program-devin-bridge-2",
                package: "imaginary",
            },
        ];
        assert_eq!(missing(&needs), vec!["imaginary"]);
        assert!(missing(&needs[..1]).is_empty());
    }

    #[test]
    fn a_search_sees_only_its_own_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("docker"), "#!/bin/sh\n").expect("stub");
        let search = ProgramSearch::only([dir.path().to_path_buf()]);
        assert_eq!(search.find("docker"), Some(dir.path().join("docker")));
        // `sh` is on this machine's PATH, but not in the search's one directory.
        assert_eq!(search.find("sh"), None);
        let needs = [
            Need::new("docker", "docker.io"),
            Need::new("dockerd", "docker.io"),
        ];
        assert_eq!(search.missing(&needs), vec!["docker.io"]);
        assert!(ProgramSearch::only([]).find("docker").is_none());
    }

    #[test]
    fn the_effective_uid_decides_who_is_root() {
        assert!(effective_uid_is_root(
            "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t0\t0\t0\t0\n"
        ));
        assert!(!effective_uid_is_root("Uid:\t0\t1000\t1000\t1000\n"));
        assert!(!effective_uid_is_root("Name:\tx\n"));
    }

    #[test]
    fn the_refusal_without_root_carries_the_install_command() {
        let error = Error::NotRoot {
            what: "the cargo tests".into(),
            packages: vec!["curl", "git"],
        };
        assert!(error.is_not_root());
        let text = error.to_string();
        assert!(
            text.contains("DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends curl git"),
            "{text}"
        );
    }
}
