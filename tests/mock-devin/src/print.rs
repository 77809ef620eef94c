//! Print mode: `mock-devin -p [--model M] [--permission-mode P] [--sandbox] [-r SESSION]
//! [--respect-workspace-trust BOOL] [--] PROMPT`, one prompt answered on stdout, the way
//! `devin -p` answers it (its argument errors, its "not logged in", its agent-error tail).

use serde_json::json;

use crate::full::catalog;
use crate::full::markers::marker_bodies;
use crate::log;
use crate::wire::{self, Fault};

/// The permission modes `--permission-mode` takes, as the CLI lists them.
const PERMISSION_MODES: &str = "normal, accept-edits, dangerous, autonomous";

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
            return Err(invalid_value(
                value,
                "--permission-mode <PERMISSION_MODE>",
                PERMISSION_MODES,
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
    if parsed.permission_mode.as_deref() == Some("autonomous") && !parsed.sandbox {
        return Err("error: --permission-mode autonomous requires --sandbox".to_owned());
    }
    parsed.prompt = prompt.ok_or_else(|| {
        "error: the following required arguments were not provided:\n  <PROMPT>".to_owned()
    })?;
    Ok(parsed)
}

/// The agent-error report of `devin -p`: the message with a trace id, then the JSON tail.
fn agent_error(message: &str, kind: &str, retryable: bool) -> String {
    format!(
        "Error: Agent error: {message} (trace ID: {}): {{\n  \"cognition.ai/errorKind\": \"{kind}\",\n  \
         \"cognition.ai/retryable\": {retryable}\n}}",
        wire::random_hex(8)
    )
}

/// What a print-mode run writes and its exit status.
struct PrintResult {
    stdout: String,
    stderr: String,
    status: i32,
}

/// Signed in for print mode: credentials on disk, or a non-empty `WINDSURF_API_KEY`.
fn signed_in() -> bool {
    wire::credentials_exist()
        || std::env::var_os("WINDSURF_API_KEY").is_some_and(|key| !key.is_empty())
}

fn answer(args: &Args) -> PrintResult {
    let fail = |stderr: String| PrintResult {
        stdout: String::new(),
        stderr,
        status: 1,
    };
    if !signed_in() {
        return fail("Error: Not logged in".to_owned());
    }
    let model = args
        .model
        .clone()
        .unwrap_or_else(|| catalog::DEFAULT_MODEL.to_owned());
    if catalog::find_offered(&model).is_none() {
        let offered: Vec<String> = catalog::offered().map(|(id, _)| id).collect();
        let message = wire::model_not_found_message(&model, offered.iter().map(String::as_str));
        return fail(agent_error(&message, "invalid_argument", false));
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
            let (_, message, kind) = fault.parts();
            let (kind, retryable) = kind.unwrap_or(("internal", false));
            return fail(agent_error(message, kind, retryable));
        }
    }
    done("Devin mock: done.".to_owned())
}

/// Runs print mode and exits.
pub(crate) fn run(args: &Args) -> ! {
    let log = log::Log::new(crate::log_path());
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
            "error: invalid value 'ask' for '--permission-mode <PERMISSION_MODE>'\n  \
             [possible values: normal, accept-edits, dangerous, autonomous]"
        );
        assert_eq!(
            parse(&["-p", "--permission-mode=autonomous", "hi"]).unwrap_err(),
            "error: --permission-mode autonomous requires --sandbox"
        );
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
        let text = agent_error("Rate limit exceeded.", "unavailable", true);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("Error: Agent error: Rate limit exceeded. (trace ID: "));
        assert!(lines[0].ends_with("): {"));
        assert_eq!(lines[1], "  \"cognition.ai/errorKind\": \"unavailable\",");
        assert_eq!(lines[2], "  \"cognition.ai/retryable\": true");
        assert_eq!(lines[3], "}");
    }
}
