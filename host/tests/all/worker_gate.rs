//! The gate a worker starts its child through (`devin-bridge gate`): it runs nothing until its
//! worker writes `go`, then becomes the program in place, with `/dev/null` as its stdin and the
//! environment it was given, untouched.

use std::io::Write as _;
use std::process::{Command, Stdio};

const BRIDGE: &str = env!("CARGO_BIN_EXE_devin-bridge");

/// `devin-bridge gate PATH ARG0 ARGS...` with exactly `env`, its stdin a pipe.
fn gate(path: &str, arg0: &str, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    Command::new(BRIDGE)
        .args(["gate", path, arg0])
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the gate")
}

#[test]
fn a_gate_whose_worker_leaves_before_opening_it_runs_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ran = dir.path().join("ran");
    let script = format!("touch '{}'", ran.display());
    for input in [&b""[..], b"g", b"no\n", b"GO\n"] {
        let mut child = gate("/bin/sh", "sh", &["-c", &script], &[]);
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input).expect("write");
        drop(stdin);
        let output = child.wait_with_output().expect("wait");
        assert_eq!(output.status.code(), Some(125), "{output:?}");
        assert!(
            output.stdout.is_empty() && output.stderr.is_empty(),
            "{output:?}"
        );
        assert!(!ran.exists(), "{input:?} ran the program");
    }
}

#[test]
fn an_opened_gate_becomes_the_program_with_its_pid_a_null_stdin_and_only_the_given_environment() {
    let mut child = gate(
        "/bin/sh",
        "sh",
        &[
            "-c",
            "echo \"pid=$$ args=$0,$*\"; tr '\\0' '\\n' </proc/$$/cmdline | head -n 1; cat; env; echo done",
            "first",
            "second",
        ],
        &[("ONLY_THIS", "kept")],
    );
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    // What follows `go` is never the program's input: its stdin is /dev/null.
    stdin
        .write_all(b"go\nnot for the program\n")
        .expect("write");
    drop(stdin);
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("pid={pid} args=first,second").as_str()),
        "{stdout}"
    );
    assert_eq!(lines.next(), Some("sh"), "argv[0]: {stdout}");
    let rest: Vec<&str> = lines.collect();
    assert!(!stdout.contains("not for the program"), "{stdout}");
    assert_eq!(rest.last(), Some(&"done"), "{stdout}");
    // The shell adds its own PWD (and dash nothing else); no variable of the test's leaks in.
    let variables: Vec<&str> = rest[..rest.len() - 1]
        .iter()
        .copied()
        .filter(|line| !line.starts_with("PWD=") && !line.starts_with("OLDPWD="))
        .collect();
    assert_eq!(variables, ["ONLY_THIS=kept"], "{stdout}");
}

#[test]
fn an_opened_gate_whose_program_vanished_says_so_and_exits_127() {
    let mut child = gate("/nonexistent/devin", "devin", &[], &[]);
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("write");
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(127), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("devin-bridge: cannot run /nonexistent/devin:")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn a_gate_with_a_relative_program_or_no_program_is_refused() {
    for args in [&["gate", "devin", "devin"][..], &["gate", "/bin/true"]] {
        let output = Command::new(BRIDGE)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("usage: devin-bridge gate"),
            "{output:?}"
        );
    }
}
