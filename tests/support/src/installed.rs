//! The installable tarball, extracted away from this checkout, and commands that run with
//! the checkout hidden (an empty tmpfs mounted over it in a private mount namespace), so
//! anything that still reached into the build tree at run time fails.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The checkout (the workspace root).
pub fn checkout() -> PathBuf {
    std::fs::canonicalize(crate::artifacts::workspace_root()).expect("checkout")
}

/// The tarball of the `devin-bridge` under test (see [`crate::artifacts::dist_tarball`]).
pub fn tarball() -> PathBuf {
    crate::artifacts::dist_tarball()
}

/// The tarball extracted into a fresh directory outside the checkout.
pub struct Installed {
    pub dir: tempfile::TempDir,
    /// The extracted top directory (`devin-bridge-<version>-<target>`).
    pub top: PathBuf,
}

impl Installed {
    pub fn extract() -> Installed {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(
            !dir.path().starts_with(checkout()),
            "the temporary directory must be outside the checkout"
        );
        let status = std::process::Command::new("tar")
            .arg("-xzf")
            .arg(tarball())
            .arg("-C")
            .arg(dir.path())
            .status()
            .expect("tar");
        assert!(status.success(), "tar -x failed");
        let mut tops: Vec<PathBuf> = std::fs::read_dir(dir.path())
            .expect("read")
            .map(|entry| entry.expect("entry").path())
            .collect();
        assert_eq!(tops.len(), 1, "one top directory: {tops:?}");
        let top = tops.remove(0);
        Installed { dir, top }
    }

    pub fn bin(&self) -> PathBuf {
        self.top.join("bin").join("devin-bridge")
    }

    /// Copies a helper binary of the build (the offline agent, say) out of the checkout.
    pub fn copy_out(&self, binary: &Path) -> PathBuf {
        let to = self.dir.path().join("tools");
        std::fs::create_dir_all(&to).expect("mkdir");
        let to = to.join(binary.file_name().expect("file name"));
        std::fs::copy(binary, &to).expect("copy");
        to
    }
}

/// The program and leading arguments that run `program` with the checkout hidden: `unshare`
/// gives it a private mount namespace, `sh` mounts an empty tmpfs over the checkout and execs
/// it (so its pid is the program's). Needs root, as the container proof does.
pub fn hidden(program: &Path) -> (PathBuf, Vec<OsString>) {
    let script = "mount -t tmpfs -o size=1m,mode=0700 devin-bridge-hidden \"$1\" && test ! -e \"$1/Cargo.toml\" && shift && exec \"$@\"";
    let args = vec![
        OsString::from("--mount"),
        OsString::from("--propagation"),
        OsString::from("private"),
        OsString::from("--"),
        OsString::from("sh"),
        OsString::from("-c"),
        OsString::from(script),
        OsString::from("sh"),
        checkout().into_os_string(),
        program.as_os_str().to_owned(),
    ];
    (PathBuf::from("unshare"), args)
}

/// A std command running `program` with the checkout hidden.
pub fn hidden_command(program: &Path) -> std::process::Command {
    let (unshare, args) = hidden(program);
    let mut command = std::process::Command::new(unshare);
    command.args(args);
    command
}
