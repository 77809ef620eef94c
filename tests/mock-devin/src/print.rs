//! Print mode: `mock-devin -p [--model M] [--permission-mode P] [--sandbox] [-r SESSION]
//! [--respect-workspace-trust BOOL] [--] PROMPT`, one prompt answered on stdout, the way
//! `devin -p` answers it (its argument errors, its "not logged in", workspace trust, its
//! agent-error tail).
//!
//! Checks run in this order: argv (exit 2), `autonomous` without `--sandbox` (exit 1), workspace
//! trust (exit 1), sign-in (exit 1), the model (exit 1), then the prompt's markers.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::full::catalog;
use crate::full::markers::marker_bodies;
use crate::log;
use crate::wire::{self, Fault};

/// The permission modes `--permission-mode` takes, as the CLI lists them.
const PERMISSION_MODES: &str =
    "normal (auto), accept-edits, dangerous (yolo, bypass), autonomous (requires --sandbox)";
/// What print mode says about `--permission-mode autonomous` without `--sandbox` (the CLI's
/// exact words are not recorded, only that it names `--sandbox`).
pub(crate) const AUTONOMOUS_NEEDS_SANDBOX: &str =
    "Error: --permission-mode autonomous requires --sandbox";

/// A parsed print-mode command line.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Args {
    pub model: Option<String>,
    /// The canonical permission mode (`auto` is `normal`; `yolo` and `bypass` are `dangerous`).
    pub permission_mode: Option<String>,
    pub sandbox: bool,
    pub resume: Option<String>,
    pub respect_workspace_trust: Option<bool>,
    pub prompt: String,
}

/// Whether argv asks for print mode: `-p` or `--print` before any `--`.
pub(crate) fn wanted(args: &[&str]) -> bool {
    args.iter()
        .take_while(|arg| **arg != "--")
        .any(|arg| *arg == "-p" || *arg == "--print")
}

fn unexpected(arg: &str) -> String {
    format!(
        "error: unexpected argument '{arg}' found\n\nUsage: devin -p [OPTIONS] [PROMPT]\n\n\
         For more information, try '--help'."
    )
}

fn invalid_value(value: &str, flag: &str, possible: &str) -> String {
    format!("error: invalid value '{value}' for '{flag}'\n  [possible values: {possible}]")
}

fn missing_value(flag: &str) -> String {
    format!("error: a value is required for '{flag}' but none was supplied")
}

/// The canonical name of a permission mode, or the CLI's refusal.
fn permission_mode(value: &str) -> Result<&'static str, String> {
    Ok(match value {
        "normal" | "auto" => "normal",
        "accept-edits" => "accept-edits",
        "dangerous" | "yolo" | "bypass" => "dangerous",
        "autonomous" => "autonomous",
        _ => {
            return Err(format!(
                "error: invalid value '{value}' for '--permission-mode <PERMISSION_MODE>': \
                 Invalid permission mode: {value}. Valid options: {PERMISSION_MODES}"
            ))
        }
    })
}

/// Parses a print-mode command line; the error is what the CLI prints before exit status 2.
pub(crate) fn parse(args: &[&str]) -> Result<Args, String> {
    let mut parsed = Args::default();
    let mut prompt: Option<String> = None;
    let mut rest = args.iter().copied();
    let mut positional_only = false;
    while let Some(arg) = rest.next() {
        if positional_only || !arg.starts_with('-') || arg == "-" {
            if prompt.is_some() {
                return Err(unexpected(arg));
            }
            prompt = Some(arg.to_owned());
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value)),
            _ => (arg, None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline {
                Some(value) => Ok(value.to_owned()),
                None => rest
                    .next()
                    .map(str::to_owned)
                    .ok_or_else(|| missing_value(name)),
            }
        };
        match flag {
            "--" => positional_only = true,
            "-p" | "--print" if inline.is_none() => {}
            "--sandbox" if inline.is_none() => parsed.sandbox = true,
            "--model" => parsed.model = Some(value("--model <MODEL>")?),
            "--permission-mode" => {
                let mode = value("--permission-mode <PERMISSION_MODE>")?;
                parsed.permission_mode = Some(permission_mode(&mode)?.to_owned());
            }
            "-r" | "--resume" => parsed.resume = Some(value("--resume <SESSION>")?),
            "--respect-workspace-trust" => {
                let text = value("--respect-workspace-trust <BOOL>")?;
                parsed.respect_workspace_trust = Some(match text.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(invalid_value(
                            &text,
                            "--respect-workspace-trust <BOOL>",
                            "true, false",
                        ))
                    }
                });
            }
            _ => return Err(unexpected(arg)),
        }
    }
    parsed.prompt = prompt.ok_or_else(|| {
        "error: the following required arguments were not provided:\n  <PROMPT>".to_owned()
    })?;
    Ok(parsed)
}

/// The agent-error report of `devin -p`: the message with a trace id, then the error's data as
/// indented JSON.
fn agent_error(message: &str, data: &Value) -> String {
    let tail = serde_json::to_string_pretty(data).unwrap_or_else(|_| "{}".to_owned());
    format!(
        "Error: Agent error: {message} (trace ID: {}): {tail}",
        wire::random_hex(8)
    )
}

/// What a print-mode run writes and its exit status.
struct PrintResult {
    stdout: String,
    stderr: String,
    status: i32,
}

/// Signed in for print mode: a valid `WINDSURF_API_KEY` (preferred over stored credentials,
/// so an invalid one signs the process out), else credentials on disk.
fn signed_in() -> bool {
    wire::environment_key().unwrap_or_else(wire::credentials_exist)
}

/// `$XDG_CONFIG_HOME/devin/config.json` (fallback `$HOME/.config/devin/config.json`).
fn config_file() -> Option<PathBuf> {
    let dir = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(|home| PathBuf::from(home).join(".config")),
    };
    dir.map(|dir| dir.join("devin").join("config.json"))
}

/// Whether `dir` is a trusted workspace. How the real CLI records trust is not known: the mock
/// trusts a directory when it, or a directory above it, is listed in `trustedWorkspaces` (a
/// list of absolute paths) of `config.json`. A missing or unreadable file trusts nothing.
pub(crate) fn trusted(dir: &Path) -> bool {
    const MAX_CONFIG: u64 = 1024 * 1024;
    let Some(file) = config_file() else {
        return false;
    };
    let small = std::fs::metadata(&file).is_ok_and(|meta| meta.len() <= MAX_CONFIG);
    let config: Option<Value> = small
        .then(|| std::fs::read_to_string(&file).ok())
        .flatten()
        .and_then(|text| serde_json::from_str(&text).ok());
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    config
        .as_ref()
        .and_then(|config| config.get("trustedWorkspaces"))
        .and_then(Value::as_array)
        .is_some_and(|listed| {
            listed.iter().filter_map(Value::as_str).any(|entry| {
                let entry = std::fs::canonicalize(entry).unwrap_or_else(|_| entry.into());
                dir.starts_with(entry)
            })
        })
}

fn answer(args: &Args) -> PrintResult {
    let fail = |stderr: String| PrintResult {
        stdout: String::new(),
        stderr,
        status: 1,
    };
    if args.permission_mode.as_deref() == Some("autonomous") && !args.sandbox {
        return fail(AUTONOMOUS_NEEDS_SANDBOX.to_owned());
    }
    if args.respect_workspace_trust.unwrap_or(true) {
        let here = std::env::current_dir().unwrap_or_default();
        if !trusted(&here) {
            return fail(format!(
                "Error: Workspace {} is not trusted. Trust it in an interactive `devin` \
                 session first, or pass --respect-workspace-trust false.",
                here.display()
            ));
        }
    }
    if !signed_in() {
        return fail("Error: Not logged in".to_owned());
    }
    let model = args
        .model
        .clone()
        .unwrap_or_else(|| catalog::DEFAULT_MODEL.to_owned());
    if catalog::find_offered(&model).is_none() {
        let offered: Vec<String> = catalog::offered().map(|(id, _)| id).collect();
        let (_, message, data) = wire::model_not_found(&model, offered.iter().map(String::as_str));
        return fail(agent_error(&message, &data.unwrap_or_default()));
    }
    let done = |stdout: String| PrintResult {
        stdout,
        stderr: String::new(),
        status: 0,
    };
    for body in marker_bodies(&args.prompt) {
        let fault = match body.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["fail", "quota"] => Some(Fault::Quota),
            ["fail", "rate_limited"] => Some(Fault::RateLimited),
            ["fail", "network"] => Some(Fault::Connection),
            ["fail", "server"] => Some(Fault::Internal),
            ["fail", "auth"] => return fail("Error: Not logged in".to_owned()),
            ["env"] => return done(crate::plan::environment()),
            ["echo"] => return done(args.prompt.clone()),
            ["whoami"] => {
                return done(format!(
                    "model: {model}\npermission: {}\nsandbox: {}\nresume: {}",
                    args.permission_mode.as_deref().unwrap_or("default"),
                    args.sandbox,
                    args.resume.as_deref().unwrap_or("none"),
                ))
            }
            _ => None,
        };
        if let Some(fault) = fault {
            let (_, message) = fault.parts();
            return fail(agent_error(message, &fault.data().unwrap_or_default()));
        }
    }
    done("Devin mock: done.".to_owned())
}

/// Runs print mode and exits.
pub(crate) fn run(args: &Args) -> ! {
    let log = log::Log::new(crate::log::path());
    log.event(
        "print_start",
        None,
        json!({
            "model": args.model,
            "permissionMode": args.permission_mode,
            "sandbox": args.sandbox,
            "resume": args.resume.is_some(),
            "respectWorkspaceTrust": args.respect_workspace_trust,
        }),
    );
    let outcome = answer(args);
    if !outcome.stdout.is_empty() {
        println!("{}", outcome.stdout);
    }
    if !outcome.stderr.is_empty() {
        eprintln!("{}", outcome.stderr);
    }
    log.event("print_exit", None, json!({"status": outcome.status}));
    std::process::exit(outcome.status);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_modes_and_aliases() {
        for (given, canonical) in [
            ("normal", "normal"),
            ("auto", "normal"),
            ("accept-edits", "accept-edits"),
            ("dangerous", "dangerous"),
            ("yolo", "dangerous"),
            ("bypass", "dangerous"),
        ] {
            let args = parse(&["-p", "--permission-mode", given, "hi"]).expect(given);
            assert_eq!(args.permission_mode.as_deref(), Some(canonical));
        }
        assert_eq!(
            parse(&["-p", "--permission-mode", "ask", "hi"]).unwrap_err(),
            "error: invalid value 'ask' for '--permission-mode <PERMISSION_MODE>': Invalid \
             permission mode: ask. Valid options: normal (auto), accept-edits, dangerous (yolo, \
             bypass), autonomous (requires --sandbox)"
        );
        // autonomous without --sandbox parses: the run refuses it (exit 1).
        let args = parse(&["-p", "--permission-mode=autonomous", "hi"]).expect("parses");
        assert!(!args.sandbox);
        let args = parse(&["-p", "--sandbox", "--permission-mode", "autonomous", "hi"])
            .expect("autonomous");
        assert!(args.sandbox);
    }

    #[test]
    fn flags_and_the_prompt() {
        let args = parse(&[
            "-p",
            "--model",
            "swe-2",
            "-r",
            "abc",
            "--respect-workspace-trust",
            "false",
            "--",
            "--not-a-flag",
        ])
        .expect("parsed");
        assert_eq!(args.model.as_deref(), Some("swe-2"));
        assert_eq!(args.resume.as_deref(), Some("abc"));
        assert_eq!(args.respect_workspace_trust, Some(false));
        assert_eq!(args.prompt, "--not-a-flag");
        assert!(parse(&["-p", "--verbose", "hi"])
            .unwrap_err()
            .starts_with("error: unexpected argument '--verbose' found"));
        assert!(parse(&["-p", "a", "b"]).is_err());
        assert!(parse(&["-p"]).is_err());
        assert!(parse(&["-p", "--model"]).is_err());
        assert!(wanted(&["-p", "x"]) && !wanted(&["acp"]) && !wanted(&["--", "-p"]));
    }

    #[test]
    fn agent_errors_end_with_the_json_tail() {
        let text = agent_error(
            "Quota exhausted.",
            &wire::error_data("resource_exhausted", true),
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("Error: Agent error: Quota exhausted. (trace ID: "));
        assert!(lines[0].ends_with("): {"));
        assert!(lines.contains(&"  \"cognition.ai/errorKind\": \"resource_exhausted\","));
        assert!(lines[1..3]
            .iter()
            .any(|l| l.starts_with("  \"cognition.ai/retryable\": true")));
        assert_eq!(lines[3], "}");
    }
}
