//! Helpers for tests, this crate's and other crates' (behind the `test-util` feature; never in
//! the binary): agents scripted in `sh`, each answering the frames a test expects; and the
//! `/proc` scan by which a test sees whether a process it marked (a word in its command line,
//! as `exec -a MARKER` sets) outlived what should have ended it.

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

/// Whether a live process (zombies excluded: they have ended, only their status waits to be
/// read) has `marker` anywhere in its command line, from `/proc`.
pub fn marked_process_running(marker: &str) -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| {
            std::fs::read_to_string(entry.path().join("stat"))
                .is_ok_and(|stat| !stat.contains(") Z "))
        })
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .any(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_process_is_seen_while_it_runs_and_not_once_it_ended() {
        use std::os::unix::process::CommandExt as _;
        let marker = format!("testkit-marker-{}", std::process::id());
        assert!(!marked_process_running(&marker));
        // `sleep` started with the marker as its argv[0] and no shell between: a shell's own
        // command line would hold the marker before its `exec`, and while that exec replaced
        // it the marker would vanish for a moment, which a busy machine let a scan see.
        let mut child = std::process::Command::new("sleep")
            .arg0(&marker)
            .arg("30")
            .spawn()
            .expect("sleep");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !marked_process_running(&marker) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(marked_process_running(&marker));
        child.kill().expect("kill");
        // Killed but not yet reaped, it is a zombie: no longer running.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while marked_process_running(&marker) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!marked_process_running(&marker));
        child.wait().expect("reap");
    }
}
