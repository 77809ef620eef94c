//! A program in a terminal of its own (a detached tmux session): how the tests and the
//! benchmarks drive the interactive Claude Code.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::claude::on_path;

pub fn tmux() -> PathBuf {
    on_path("tmux").unwrap_or_else(|| {
        panic!("tmux is missing: `cargo xtask test` installs it as root (apt-get install tmux)")
    })
}

/// A program in a pseudo-terminal of its own: a detached tmux session, killed on drop.
pub struct Terminal<'a> {
    tmux: &'a Path,
    session: String,
}

impl<'a> Terminal<'a> {
    /// Starts `command` (its program, arguments and working directory) in a 200x50 terminal.
    pub fn start(tmux: &'a Path, name: &str, command: &Command) -> Self {
        let session = format!("devin-bridge-e2e-{name}-{}", std::process::id());
        let mut tmux_command = Command::new(tmux);
        tmux_command
            .args(["new-session", "-d", "-s", &session, "-x", "200", "-y", "50"])
            .arg("--")
            .arg(command.get_program())
            .args(command.get_args());
        if let Some(dir) = command.get_current_dir() {
            tmux_command.current_dir(dir);
        }
        let status = tmux_command.status().expect("tmux new-session");
        assert!(status.success(), "tmux new-session failed");
        Self { tmux, session }
    }

    /// The screen and up to 200 lines of scrollback.
    pub fn pane(&self) -> String {
        let output = Command::new(self.tmux)
            .args([
                "capture-pane",
                "-p",
                "-J",
                "-S",
                "-200",
                "-t",
                &self.session,
            ])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub fn send(&self, keys: &[&str]) {
        let status = Command::new(self.tmux)
            .args(["send-keys", "-t", &self.session])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(status.success(), "tmux send-keys failed");
    }

    /// The screen once it shows `text`, or as it is when `limit` has passed.
    pub fn wait_for(&self, text: &str, limit: Duration) -> String {
        self.wait_for_any(&[text], limit)
    }

    /// The screen once it shows any of `texts`, or as it is when `limit` has passed.
    pub fn wait_for_any(&self, texts: &[&str], limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.pane();
            if texts.iter().any(|text| screen.contains(text)) || Instant::now() > deadline {
                return screen;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Terminal<'_> {
    fn drop(&mut self) {
        let _ = Command::new(self.tmux)
            .args(["kill-session", "-t", &self.session])
            .status();
    }
}
