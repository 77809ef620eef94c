//! `[mock:probe]`: a hostile turn. The agent reports who it runs as and tries to reach the
//! paths the prompt names, one request per line of the last user section:
//!
//! - `probe-read PATH`: open the file and read a byte;
//! - `probe-write DIR`: create (and remove) a file in the directory;
//! - `probe-connect PATH`: connect to the Unix socket.
//!
//! Each answer line is `<kind> <path>: allowed` or `<kind> <path>: denied (<error>)`, so a test
//! can require `denied` for everything that belongs to the host.

use std::io::Read;
use std::path::Path;

/// The identity lines (from `/proc/self/status`) and one line per probe.
pub(crate) fn report(user_text: &str) -> String {
    let mut lines = identity();
    for line in user_text.lines() {
        let Some((kind, path)) = line.trim().split_once(' ') else {
            continue;
        };
        let path = Path::new(path.trim());
        let outcome = match kind {
            "probe-read" => read(path),
            "probe-write" => write(path),
            "probe-connect" => std::os::unix::net::UnixStream::connect(path).map(drop),
            _ => continue,
        };
        lines.push(match outcome {
            Ok(()) => format!("{kind} {}: allowed", path.display()),
            Err(error) => format!("{kind} {}: denied ({error})", path.display()),
        });
    }
    lines.join("\n")
}

fn identity() -> Vec<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mut lines: Vec<String> = status
        .lines()
        .filter(|line| {
            [
                "Uid:",
                "Gid:",
                "Groups:",
                "CapEff:",
                "CapPrm:",
                "NoNewPrivs:",
            ]
            .iter()
            .any(|field| line.starts_with(field))
        })
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for name in ["HOME", "TMPDIR"] {
        lines.push(format!(
            "{name}: {}",
            std::env::var(name).unwrap_or_default()
        ));
    }
    let cwd = std::env::current_dir().map(|dir| dir.display().to_string());
    lines.push(format!("cwd: {}", cwd.unwrap_or_default()));
    lines
}

fn read(path: &Path) -> std::io::Result<()> {
    let mut byte = [0u8; 1];
    std::fs::File::open(path)?.read(&mut byte).map(drop)
}

fn write(dir: &Path) -> std::io::Result<()> {
    let file = dir.join(format!("mock-devin-probe-{}", std::process::id()));
    std::fs::write(&file, b"planted by the agent")?;
    std::fs::remove_file(&file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_report_allowed_and_denied_per_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("f");
        std::fs::write(&file, "x").expect("write");
        let text = format!(
            "[mock:probe]\nprobe-read {}\nprobe-write {}\nprobe-read {}/missing\nprobe-connect {}\n",
            file.display(),
            dir.path().display(),
            dir.path().display(),
            file.display()
        );
        let report = report(&text);
        assert!(
            report.contains(&format!("probe-read {}: allowed", file.display())),
            "{report}"
        );
        assert!(
            report.contains(&format!("probe-write {}: allowed", dir.path().display())),
            "{report}"
        );
        assert!(report.contains("missing: denied"), "{report}");
        assert!(
            report.contains(&format!("probe-connect {}: denied", file.display())),
            "{report}"
        );
        assert!(
            report.lines().any(|line| line.starts_with("Uid: ")),
            "{report}"
        );
    }
}
