//! Whether the process that claims a running job still exists: a pid alone is not proof (pids
//! are reused), so a stamp also holds the process start time (field 22 of `/proc/<pid>/stat`,
//! in clock ticks since boot) and the boot id.

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// Largest `/proc/<pid>/stat` read (the real file is well under 1 KiB).
const STAT_LIMIT: u64 = 4096;

/// Identifies one process across pid reuse and reboots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessStamp {
    pub pid: i32,
    /// Field 22 of `/proc/<pid>/stat`: start time in clock ticks after boot.
    pub start_time: u64,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
}

/// What `/proc/<pid>/stat` says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub state: char,
    pub pgid: i32,
    pub start_time: u64,
}

impl ProcessStamp {
    /// The stamp of the calling process.
    pub fn current() -> std::io::Result<Self> {
        Self::of_pid(std::process::id() as i32)?.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "cannot read /proc/self/stat for this process",
            )
        })
    }

    /// The stamp of a live process, `None` if it does not exist (or is a zombie).
    pub fn of_pid(pid: i32) -> std::io::Result<Option<Self>> {
        let Some(stat) = proc_stat(pid) else {
            return Ok(None);
        };
        if stat.state == 'Z' || stat.state == 'X' {
            return Ok(None);
        }
        Ok(Some(ProcessStamp {
            pid,
            start_time: stat.start_time,
            boot_id: boot_id()?,
        }))
    }

    /// Whether the stamped process still runs: same boot, pid present and not a zombie, same
    /// start time. Any doubt (unreadable /proc) counts as alive only if the pid exists.
    pub fn is_alive(&self) -> bool {
        if self.pid <= 0 {
            return false;
        }
        match boot_id() {
            Ok(current) if current != self.boot_id => return false,
            Ok(_) => {}
            Err(_) => return pid_exists(self.pid),
        }
        match proc_stat(self.pid) {
            Some(stat) => {
                stat.start_time == self.start_time && stat.state != 'Z' && stat.state != 'X'
            }
            None => false,
        }
    }

    /// The process group of the stamped process, if it is still the same live process.
    pub fn live_pgid(&self) -> Option<i32> {
        if !self.is_alive() {
            return None;
        }
        proc_stat(self.pid).map(|stat| stat.pgid)
    }
}

/// Ends what is left of the process group an engine process led (every agent runs as the
/// leader of its own group), when the leader itself is gone or a zombie: children it started
/// may outlive it. The group is ours when the leader's pid is a zombie with the stamped start
/// time, or when no process has that pid at all but some process is still in a group of that
/// id (the kernel never hands out a pid that is still in use as a process group id). A pid now
/// used by another process is left alone. Returns whether a group was signalled.
pub fn end_orphaned_group(engine: &ProcessStamp, grace: Duration) -> bool {
    if engine.pid <= 1 || boot_id().is_ok_and(|current| current != engine.boot_id) {
        return false;
    }
    let ours = match proc_stat(engine.pid) {
        Some(stat) => stat.start_time == engine.start_time && stat.state == 'Z',
        None => group_has_members(engine.pid),
    };
    if !ours {
        return false;
    }
    let group = Target::Group(engine.pid);
    group.signal(Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && group_has_members(engine.pid) {
        thread::sleep(Duration::from_millis(20));
    }
    if group_has_members(engine.pid) {
        group.signal(Signal::SIGKILL);
    }
    true
}

/// Whether a live (not zombie) process is in process group `pgid`.
fn group_has_members(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_stat)
        .any(|stat| stat.pgid == pgid && stat.state != 'Z' && stat.state != 'X')
}

/// The boot id of the running kernel.
pub fn boot_id() -> std::io::Result<String> {
    let text = read_bounded(Path::new("/proc/sys/kernel/random/boot_id"), 128)?;
    Ok(text.trim().to_owned())
}

/// Reads and parses `/proc/<pid>/stat`; `None` if the process does not exist.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    if pid <= 0 {
        return None;
    }
    let text = read_bounded(Path::new(&format!("/proc/{pid}/stat")), STAT_LIMIT).ok()?;
    parse_stat(&text)
}

/// Parses a `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may
/// itself contain spaces and parentheses, so the fields after it are found from the LAST `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let close = text.rfind(')')?;
    let rest = text.get(close + 1..)?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // fields[0] is field 3 (state); field N is fields[N - 3].
    let state = fields.first()?.chars().next()?;
    let pgid = fields.get(5 - 3)?.parse().ok()?;
    let start_time = fields.get(22 - 3)?.parse().ok()?;
    Some(ProcStat {
        state,
        pgid,
        start_time,
    })
}

fn read_bounded(path: &Path, limit: u64) -> std::io::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let mut text = String::new();
    file.take(limit).read_to_string(&mut text)?;
    Ok(text)
}

fn pid_exists(pid: i32) -> bool {
    !matches!(kill(Pid::from_raw(pid), None), Err(Errno::ESRCH))
}

fn group_exists(pgid: i32) -> bool {
    !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// Ends the stamped process: if it leads its own process group the whole group is signalled,
/// otherwise the process alone (a foreground helper shares its caller's group, which must not
/// be touched). SIGTERM, then up to `grace` for it to go, then SIGKILL. Returns whether a
/// signal was sent (false: the stamped process was already gone).
pub fn terminate(stamps: &[&ProcessStamp], grace: Duration) -> bool {
    let targets: Vec<Target> = stamps
        .iter()
        .filter_map(|stamp| {
            let pgid = stamp.live_pgid()?;
            Some(if pgid == stamp.pid {
                Target::Group(pgid)
            } else {
                Target::Process((*stamp).clone())
            })
        })
        .collect();
    if targets.is_empty() {
        return false;
    }
    for target in &targets {
        target.signal(Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && targets.iter().any(Target::exists) {
        thread::sleep(Duration::from_millis(20));
    }
    for target in &targets {
        if target.exists() {
            target.signal(Signal::SIGKILL);
        }
    }
    true
}

enum Target {
    Group(i32),
    Process(ProcessStamp),
}

impl Target {
    fn signal(&self, signal: Signal) {
        let outcome = match self {
            Target::Group(pgid) => killpg(Pid::from_raw(*pgid), signal),
            Target::Process(stamp) => kill(Pid::from_raw(stamp.pid), signal),
        };
        if let Err(error) = outcome {
            if error != Errno::ESRCH {
                tracing::warn!(%error, ?signal, "cannot signal a job process");
            }
        }
    }

    fn exists(&self) -> bool {
        match self {
            // Members of a group that are zombies still count; a group whose members all
            // exited and were reaped is gone.
            Target::Group(pgid) => group_exists(*pgid) && group_has_live_member(*pgid),
            Target::Process(stamp) => stamp.is_alive(),
        }
    }
}

/// Whether any non-zombie process is in group `pgid` (a zombie leader still answers
/// `killpg(pgid, 0)` until its parent reaps it).
fn group_has_live_member(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
            .and_then(proc_stat)
            .is_some_and(|stat| stat.pgid == pgid && stat.state != 'Z' && stat.state != 'X')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_survives_spaces_and_parentheses_in_the_command_name() {
        let mut fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        fields[0] = "S".to_owned();
        fields[5 - 3] = "4242".to_owned();
        fields[22 - 3] = "987654321".to_owned();
        let line = format!("1234 (evil) ) (name x) {}\n", fields.join(" "));
        let stat = parse_stat(&line).unwrap();
        assert_eq!(
            stat,
            ProcStat {
                state: 'S',
                pgid: 4242,
                start_time: 987_654_321
            }
        );
        assert!(parse_stat("1234 (truncated").is_none());
        assert!(parse_stat("1234 (short) S 1 2").is_none());
    }

    #[test]
    fn own_stamp_is_alive_and_a_changed_start_time_or_boot_is_not() {
        let stamp = ProcessStamp::current().unwrap();
        assert_eq!(stamp.pid, std::process::id() as i32);
        assert!(stamp.is_alive());
        let reused = ProcessStamp {
            start_time: stamp.start_time + 1,
            ..stamp.clone()
        };
        assert!(!reused.is_alive(), "a reused pid must not count as alive");
        let other_boot = ProcessStamp {
            boot_id: "00000000-0000-0000-0000-000000000000".to_owned(),
            ..stamp.clone()
        };
        assert!(!other_boot.is_alive());
        let nonsense = ProcessStamp { pid: -1, ..stamp };
        assert!(!nonsense.is_alive());
    }

    #[test]
    fn an_exited_child_is_not_alive_even_before_it_is_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let stamp = ProcessStamp::of_pid(child.id() as i32).unwrap().unwrap();
        assert!(stamp.is_alive());
        child.kill().unwrap();
        // Not reaped yet: a zombie.
        let deadline = Instant::now() + Duration::from_secs(5);
        while stamp.is_alive() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!stamp.is_alive());
        child.wait().unwrap();
        assert!(!stamp.is_alive());
    }
}
