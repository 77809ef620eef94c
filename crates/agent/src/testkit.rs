//! Helpers for tests, this crate's and other crates' (behind the `test-util` feature; never in
//! the binary): agents scripted in `sh`, each answering the frames a test expects.

use std::path::PathBuf;
use std::time::Duration;

use crate::process::Spec;

/// `/bin/sh -c script` in the temporary directory, with only `PATH`.
pub fn scripted_agent(script: &str) -> Spec {
    Spec {
        program: PathBuf::from("/bin/sh"),
        args: vec!["-c".into(), script.into()],
        cwd: std::env::temp_dir(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        stderr_tail_bytes: 4096,
        kill_grace: Duration::from_millis(300),
        identity: None,
    }
}
