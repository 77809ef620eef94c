//! Ending a process group: the one implementation of "SIGTERM the group, up to a grace for it
//! to go, SIGKILL the group, reap" that every mode uses.
//!
//! Two callers exist and each has its own entry point:
//!
//! - The parent of the group's leader holds a [`tokio::process::Child`]: [`end_child_group`]
//!   waits on the child itself (which also reaps it) and sweeps the group with SIGKILL at the
//!   end, so nothing the leader started outlives it.
//! - Any other process (a keeper, a `cancel` run from another terminal) knows the leader only
//!   by a [`ProcessStamp`]: [`terminate`] and [`end_orphaned_group`] follow the group through
//!   `/proc` and never signal a pid that now belongs to another process.
//!
//! A pid alone is not proof of identity (pids are reused), so a stamp also holds the process
//! start time (field 22 of `/proc/<pid>/stat`, in clock ticks since boot) and the boot id; a
//! process group id is safe to signal while any member of the group lives (the kernel never
//! hands out a pid that is still in use as a process group id).

use std::path::Path;
use std::process::ExitStatus;
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// Largest `/proc/<pid>/stat` read (the real file is well under 1 KiB).
const STAT_LIMIT: u64 = 4096;
/// How often a group followed through `/proc` is looked at during its grace.
const POLL: Duration = Duration::from_millis(20);

/// How [`end_child_group`] ended a group.
#[derive(Debug, Clone, Copy)]
pub struct GroupEnd {
    /// The leader's status; `None` when it could not be collected.
    pub status: Option<ExitStatus>,
    /// Whether SIGKILL was needed for the leader (it outlived the grace).
    pub killed: bool,
}

/// Ends the group that `child` leads (its pid is `group`): SIGTERM to the group, up to `grace`
/// for the leader to exit, SIGKILL to the group, reap; then SIGKILL once more for whatever of
/// the group ignored SIGTERM while the leader exited.
pub async fn end_child_group(
    child: &mut tokio::process::Child,
    group: Pid,
    grace: Duration,
) -> GroupEnd {
    signal_group(group, Signal::SIGTERM);
    let end = match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => GroupEnd {
            status: status.ok(),
            killed: false,
        },
        Err(_) => {
            tracing::debug!(
                pid = group.as_raw(),
                "grace elapsed; SIGKILL to the process group"
            );
            signal_group(group, Signal::SIGKILL);
            GroupEnd {
                status: child.wait().await.ok(),
                killed: true,
            }
        }
    };
    kill_group(group);
    end
}

/// SIGKILL to the whole group now: a leader that exited may have left members behind, and a
/// child abandoned mid-use gets no grace.
pub fn kill_group(group: Pid) {
    signal_group(group, Signal::SIGKILL);
}

fn signal_group(group: Pid, signal: Signal) {
    if group.as_raw() <= 1 {
        return;
    }
    if let Err(error) = killpg(group, signal) {
        if error != Errno::ESRCH {
            tracing::warn!(%error, ?signal, pgid = group.as_raw(), "cannot signal a process group");
        }
    }
}

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

/// Ends the stamped processes: one that leads its own process group has the whole group
/// signalled, any other the process alone (a foreground helper shares its caller's group,
/// which must not be touched). SIGTERM, then up to `grace` for them to go, then SIGKILL.
/// Blocks the calling thread. Returns whether a signal was sent (false: every stamped process
/// was already gone).
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
        thread::sleep(POLL);
    }
    for target in &targets {
        if target.exists() {
            target.signal(Signal::SIGKILL);
        }
    }
    true
}

/// Ends what is left of the process group the stamped process led, when the leader itself is
/// gone or a zombie: children it started may outlive it. The group is the stamp's when the
/// leader's pid is a zombie with the stamped start time, or when no process has that pid at
/// all but some process is still in a group of that id. A pid now used by another process is
/// left alone. SIGTERM, up to `grace`, SIGKILL; blocks the calling thread. Returns whether a
/// group was signalled.
pub fn end_orphaned_group(leader: &ProcessStamp, grace: Duration) -> bool {
    if leader.pid <= 1 || boot_id().is_ok_and(|current| current != leader.boot_id) {
        return false;
    }
    let ours = match proc_stat(leader.pid) {
        Some(stat) => stat.start_time == leader.start_time && stat.state == 'Z',
        None => group_has_live_member(leader.pid),
    };
    if !ours {
        return false;
    }
    let group = Target::Group(leader.pid);
    group.signal(Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && group_has_live_member(leader.pid) {
        thread::sleep(POLL);
    }
    if group_has_live_member(leader.pid) {
        group.signal(Signal::SIGKILL);
    }
    true
}

/// Everything of the stamped process's group: the leader and its group while it runs
/// ([`terminate`]), then whatever it left in its group once it is gone
/// ([`end_orphaned_group`]). Blocks the calling thread. Returns whether anything was
/// signalled.
pub fn end_stamped_group(leader: &ProcessStamp, grace: Duration) -> bool {
    let running = terminate(&[leader], grace);
    let orphans = end_orphaned_group(leader, grace);
    running || orphans
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

/// Whether a live (not zombie) process is in process group `pgid` (a zombie leader still
/// answers `killpg(pgid, 0)` until its parent reaps it); `None` without `/proc`.
fn live_member_in(pgid: i32) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    Some(
        entries
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(proc_stat)
            .any(|stat| stat.pgid == pgid && stat.state != 'Z' && stat.state != 'X'),
    )
}

/// Whether the group has a live member; in doubt (no `/proc`) it has none, so a group id that
/// may name someone else's group is never signalled on a guess.
fn group_has_live_member(pgid: i32) -> bool {
    live_member_in(pgid).unwrap_or(false)
}

enum Target {
    Group(i32),
    Process(ProcessStamp),
}

impl Target {
    fn signal(&self, signal: Signal) {
        match self {
            Target::Group(pgid) => signal_group(Pid::from_raw(*pgid), signal),
            Target::Process(stamp) => {
                if let Err(error) = kill(Pid::from_raw(stamp.pid), signal) {
                    if error != Errno::ESRCH {
                        tracing::warn!(%error, ?signal, pid = stamp.pid, "cannot signal a process");
                    }
                }
            }
        }
    }

    fn exists(&self) -> bool {
        match self {
            // A group we already signalled is waited for while it answers at all when `/proc`
            // cannot tell a zombie leader from a live member.
            Target::Group(pgid) => group_exists(*pgid) && live_member_in(*pgid).unwrap_or(true),
            Target::Process(stamp) => stamp.is_alive(),
        }
    }
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
        let stat = parse_stat(&line).expect("parses");
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
        let stamp = ProcessStamp::current().expect("stamp");
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
            .expect("spawn");
        let stamp = ProcessStamp::of_pid(child.id() as i32)
            .expect("stat")
            .expect("alive");
        assert!(stamp.is_alive());
        child.kill().expect("kill");
        // Not reaped yet: a zombie.
        let deadline = Instant::now() + Duration::from_secs(5);
        while stamp.is_alive() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!stamp.is_alive());
        child.wait().expect("reap");
        assert!(!stamp.is_alive());
    }

    /// `sh` leading its own group, ignoring SIGTERM, with a grandchild that ignores it too;
    /// returns the leader and the grandchild's pid.
    fn stubborn_group() -> (std::process::Child, i32) {
        use std::io::BufRead as _;
        use std::os::unix::process::CommandExt as _;
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "trap '' TERM; sleep 300 & echo $!; wait"])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        (child, line.trim().parse().expect("pid"))
    }

    fn gone_soon(pid: i32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if proc_stat(pid).is_none_or(|stat| stat.state == 'Z' || stat.state == 'X') {
                return true;
            }
            thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn terminating_a_stamp_ends_its_whole_group_and_a_second_time_finds_nothing() {
        let (mut leader, grandchild) = stubborn_group();
        let stamp = ProcessStamp::of_pid(leader.id() as i32)
            .expect("stat")
            .expect("alive");
        assert_eq!(stamp.live_pgid(), Some(stamp.pid));
        assert!(terminate(&[&stamp], Duration::from_millis(200)));
        leader.wait().expect("reap");
        assert!(gone_soon(grandchild), "the grandchild survived");
        assert!(!terminate(&[&stamp], Duration::from_millis(200)));
    }

    #[test]
    fn what_a_gone_leader_left_in_its_group_is_ended_and_a_reused_pid_is_not() {
        let (mut leader, grandchild) = stubborn_group();
        let stamp = ProcessStamp::of_pid(leader.id() as i32)
            .expect("stat")
            .expect("alive");
        let reused = ProcessStamp {
            start_time: stamp.start_time + 1,
            ..stamp.clone()
        };
        leader.kill().expect("kill the leader alone");
        assert!(gone_soon(stamp.pid));
        assert!(
            !end_orphaned_group(&reused, Duration::from_millis(200)),
            "a zombie with another start time is another process"
        );
        assert!(end_orphaned_group(&stamp, Duration::from_millis(200)));
        assert!(gone_soon(grandchild), "the orphaned grandchild survived");
        leader.wait().expect("reap");
    }

    #[tokio::test]
    async fn a_child_group_that_ignores_sigterm_is_killed_after_the_grace() {
        let mut child = tokio::process::Command::new("/bin/sh")
            .args(["-c", "trap '' TERM; sleep 300 & wait"])
            .process_group(0)
            .spawn()
            .expect("spawn");
        let group = Pid::from_raw(child.id().expect("pid") as i32);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        let end = end_child_group(&mut child, group, Duration::from_millis(200)).await;
        assert!(end.killed);
        assert!(started.elapsed() >= Duration::from_millis(200));
        // SIGKILL is delivered asynchronously: the grandchild `sleep` (reparented when the
        // shell died) exits soon after, not at once.
        let deadline = Instant::now() + Duration::from_secs(5);
        while group_has_live_member(group.as_raw()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            !group_has_live_member(group.as_raw()),
            "a member of the killed group is still alive after 5 s"
        );
    }
}
