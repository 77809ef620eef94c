//! `mock-devin`: an offline stand-in for the Devin CLI: `devin acp --agent-type summarizer`
//! (summarizer mode), `devin acp` (the full agent that companion mode drives), `devin -p`
//! (print mode), `devin models list` and `devin --version`.
//!
//! It speaks the Agent Client Protocol the way the real CLI does (JSON-RPC 2.0, one message per
//! line on stdout, logs only on stderr), in the CLI's own dialect: the `windsurf` client
//! identity gate, the `devin-browser` auth method with a key in `_meta`, the model as a config
//! option, snake_case error kinds, the `_cognition.ai/*` notifications. It can fail in every way
//! the real one can. It is used by the host's tests, the benchmark, the end-to-end test with the
//! real Claude Code, and `cargo xtask serve` when no `devin` CLI is installed.
//!
//! # Invocation
//! - `mock-devin [--model M] acp --agent-type summarizer`: the summarizer agent.
//! - `mock-devin [--model M] acp`: the full agent.
//!
//!   Both are served by one reading loop ([`server`]) and one turn loop ([`turn`]); what sets
//!   them apart is data: their [`profile`] (catalog, sign-in, workspace, sessions, concurrency)
//!   and the dialect that turns a prompt into a turn's plan ([`bridge`] for the summarizer's
//!   scenarios, [`full::markers`] for the full agent's markers).
//! - `--model M` (or `--model=M`) before `acp` or after it picks the model every session of
//!   the process starts with (after it wins when both are given); a model the agent does not
//!   offer makes every `session/new` fail with the unknown-model error.
//! - `mock-devin -p [FLAGS] PROMPT`: print mode ([`mod@print`]).
//! - `mock-devin acp` with `--cloud`, `--refusal-fallback`, an `--agent-type` other than
//!   `summarizer`, or any other argument: a message on stderr and exit status 64 (so a test
//!   proves the companion never passes them).
//! - `mock-devin --replay FILE ...` (or `--replay=FILE`, anywhere in argv): plays the agent of
//!   a recorded trace ([`replay`]); the rest of argv is not read.
//! - `mock-devin --version`: prints `devin 3000.11.4 (mock-devin offline)`.
//! - `mock-devin models list [--format json]`: the model catalog (see [`full::catalog`]),
//!   exit 0 whether or not anyone is signed in.
//! - Any other argv: a message on stderr and exit status 64.
//!
//! What both agents say the way the CLI says it lives in [`wire`]. The protocol rules, every scenario marker and
//! every environment variable are documented in `tests/mock-devin/README.md`.
//!
//! # Environment
//! - `MOCK_DEVIN_STARTUP_MS`: sleep this long before reading stdin (default 0).
//! - `MOCK_DEVIN_SLOW_MS`: the delay between `[mock:slow]` chunks (default 500).
//! - `MOCK_DEVIN_SCENARIO`: the marker used when the prompt has none.
//! - `MOCK_DEVIN_IMAGES=1`: the summarizer agent advertises and accepts image prompts.
//! - `MOCK_DEVIN_LOGGED_OUT=1`: the summarizer agent is signed out unless credentials exist or
//!   it authenticated with a key.
//! - `MOCK_DEVIN_LOGOUT_STYLE`: how a signed-out process fails (`prompt`, the default, or
//!   `session_new`).
//! - `MOCK_DEVIN_THOUGHT_LEVEL=1`: sessions of either agent offer a `thought_level` select.
//! - `MOCK_DEVIN_EFFORT_VARIANTS=1`: the summarizer agent also takes `--model swe-2-high`.
//! - `MOCK_DEVIN_LOG`: append one JSON line per action to this file (never prompt text,
//!   environment values or keys).
//!
//! Invalid values are refused at start-up with exit status 64.

mod bridge;
mod cli;
mod full;
mod log;
mod plan;
mod plugin_script;
mod print;
mod probe;
mod profile;
mod replay;
mod rewrite;
mod rpc;
mod scenario;
mod script;
mod server;
mod session;
mod shared;
mod trace;
mod turn;
mod wire;

use std::ffi::OsString;
use std::time::Duration;

use serde_json::json;

use crate::cli::{AGENT_VERSION, ARGS_EXIT, GRANDCHILD_ARG, USAGE_EXIT};
use crate::profile::{AgentType, Profile};

/// Flags of the real `devin acp` that the bridge must never pass after `acp`.
const FORBIDDEN_FLAGS: [&str; 2] = ["--cloud", "--refusal-fallback"];

/// What argv asks for.
#[derive(Debug, PartialEq, Eq)]
enum Invocation {
    Version,
    Grandchild(u64),
    Models {
        json: bool,
    },
    /// An ACP agent, with the model of a `--model` before or after `acp`.
    Acp(AgentType, Option<String>),
    /// `-p`: one prompt, answered on stdout.
    Print(print::Args),
    /// Exit 64 with this message.
    Refused(String),
    /// Exit 2 with this message, as the CLI's argument parser does.
    BadArgs(String),
}

/// A global `--model M` or `--model=M` in front of the subcommand, and the rest.
fn global_model<'a>(args: &'a [&'a str]) -> Result<(Option<String>, &'a [&'a str]), String> {
    match args {
        ["--model", model, rest @ ..] if !model.starts_with('-') => {
            Ok((Some((*model).to_owned()), rest))
        }
        ["--model", ..] => {
            Err("error: a value is required for '--model <MODEL>' but none was supplied".to_owned())
        }
        [first, rest @ ..] if first.starts_with("--model=") => {
            Ok((Some(first["--model=".len()..].to_owned()), rest))
        }
        _ => Ok((None, args)),
    }
}

fn invocation(args: &[OsString]) -> Invocation {
    let Some(args) = args
        .iter()
        .map(|arg| arg.to_str())
        .collect::<Option<Vec<&str>>>()
    else {
        return Invocation::Refused("unsupported arguments: not UTF-8".to_owned());
    };
    if print::wanted(&args) {
        return match print::parse(&args) {
            Ok(parsed) => Invocation::Print(parsed),
            Err(message) => Invocation::BadArgs(message),
        };
    }
    let (model, rest) = match global_model(&args) {
        Ok(split) => split,
        Err(message) => return Invocation::BadArgs(message),
    };
    match (rest, &model) {
        (["--version"], None) => Invocation::Version,
        // The grandchild of `[mock:grandchild]` and `[mock:slow]`: this binary again, so that
        // the scenario needs no `sleep` program (the bridge image has none).
        ([GRANDCHILD_ARG, seconds], None) => Invocation::Grandchild(seconds.parse().unwrap_or(300)),
        (["models", "list"], None) => Invocation::Models { json: false },
        (["models", "list", "--format", "json"] | ["models", "list", "--format=json"], None) => {
            Invocation::Models { json: true }
        }
        (["acp", rest @ ..], _) => acp(&args, rest, model),
        _ => Invocation::Refused(format!(
            "unsupported arguments {args:?}; the supported invocations are `mock-devin [--model \
             M] acp`, `mock-devin [--model M] acp --agent-type summarizer`, `mock-devin -p \
             [FLAGS] PROMPT`, `mock-devin models list [--format json]` and `mock-devin --version`"
        )),
    }
}

/// `acp [--agent-type summarizer] [--model M]`, in any order; `--model` after `acp` wins over
/// the global one.
fn acp(args: &[&str], rest: &[&str], global: Option<String>) -> Invocation {
    let mut agent = AgentType::Full;
    let mut model = global;
    let mut rest = rest.iter();
    while let Some(arg) = rest.next() {
        match *arg {
            "--model" => {
                match rest.next() {
                    Some(value) if !value.starts_with('-') => model = Some((*value).to_owned()),
                    _ => return Invocation::BadArgs(
                        "error: a value is required for '--model <MODEL>' but none was supplied"
                            .to_owned(),
                    ),
                }
            }
            _ if arg.starts_with("--model=") => model = Some(arg["--model=".len()..].to_owned()),
            "--agent-type" => match rest.next() {
                Some(&"summarizer") => agent = AgentType::Summarizer,
                other => {
                    return Invocation::Refused(format!(
                        "unsupported arguments {args:?}: unknown --agent-type {:?} (only \
                         `summarizer`, or none for the full agent)",
                        other.copied().unwrap_or("(missing)")
                    ))
                }
            },
            _ => {
                let forbidden = FORBIDDEN_FLAGS
                    .iter()
                    .find(|flag| arg == *flag || arg.starts_with(&format!("{flag}=")));
                return Invocation::Refused(match forbidden {
                    Some(_) => format!(
                        "unsupported arguments {args:?}: {arg} is refused (the agent is run \
                         without --cloud or --refusal-fallback)"
                    ),
                    None => format!("unsupported arguments {args:?}"),
                });
            }
        }
    }
    Invocation::Acp(agent, model)
}

/// The flags' names only (never their values), as evidence of what a caller passed.
fn flag_names(args: &[OsString]) -> Vec<String> {
    args.iter()
        .filter_map(|arg| arg.to_str())
        .filter(|arg| arg.starts_with('-'))
        .map(|arg| arg.split('=').next().unwrap_or(arg).to_owned())
        .collect()
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    // `--replay FILE`: a recorded trace plays the agent (see `replay`).
    match replay::wanted(&args) {
        Some(Ok(file)) if args.iter().any(|arg| arg == "--version") => replay::version(&file),
        Some(Ok(file)) => replay::run(&file),
        Some(Err(message)) => {
            eprintln!("mock-devin: {message}");
            std::process::exit(USAGE_EXIT);
        }
        None => {}
    }
    let (agent, model) = match invocation(&args) {
        Invocation::Version => {
            println!("devin {AGENT_VERSION} (mock-devin offline)");
            return;
        }
        Invocation::Grandchild(seconds) => {
            std::thread::sleep(Duration::from_secs(seconds));
            return;
        }
        Invocation::Models { json } => {
            if json {
                println!("{}", full::catalog::catalog_json());
            } else {
                print!("{}", full::catalog::catalog_text());
            }
            return;
        }
        Invocation::Refused(message) => {
            eprintln!("mock-devin: {message}");
            log::Log::new(log::path()).event(
                "argv_refused",
                None,
                json!({"flags": flag_names(&args), "status": USAGE_EXIT}),
            );
            std::process::exit(USAGE_EXIT);
        }
        Invocation::BadArgs(message) => {
            eprintln!("{message}");
            log::Log::new(log::path()).event(
                "argv_refused",
                None,
                json!({"flags": flag_names(&args), "status": ARGS_EXIT}),
            );
            std::process::exit(ARGS_EXIT);
        }
        Invocation::Print(parsed) => print::run(&parsed),
        Invocation::Acp(agent, model) => (agent, model),
    };
    match Profile::new(agent, model) {
        Ok(profile) => server::run(profile),
        Err(message) => {
            eprintln!("mock-devin: {message}");
            std::process::exit(USAGE_EXIT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Invocation {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        invocation(&args)
    }

    #[test]
    fn argv_selects_the_agent_or_is_refused() {
        assert_eq!(parse(&["acp"]), Invocation::Acp(AgentType::Full, None));
        assert_eq!(
            parse(&["acp", "--agent-type", "summarizer"]),
            Invocation::Acp(AgentType::Summarizer, None)
        );
        // A global --model in front of the subcommand picks the process's model.
        assert_eq!(
            parse(&["--model", "swe-1-6", "acp", "--agent-type", "summarizer"]),
            Invocation::Acp(AgentType::Summarizer, Some("swe-1-6".into()))
        );
        assert_eq!(
            parse(&["--model=kimi-k3", "acp"]),
            Invocation::Acp(AgentType::Full, Some("kimi-k3".into()))
        );
        // --model after the subcommand too, in any place; it wins over the global one.
        assert_eq!(
            parse(&["acp", "--agent-type", "summarizer", "--model", "swe-1-6"]),
            Invocation::Acp(AgentType::Summarizer, Some("swe-1-6".into()))
        );
        assert_eq!(
            parse(&["acp", "--model=swe-1-6", "--agent-type", "summarizer"]),
            Invocation::Acp(AgentType::Summarizer, Some("swe-1-6".into()))
        );
        assert_eq!(
            parse(&["--model", "swe-2", "acp", "--model", "kimi-k3"]),
            Invocation::Acp(AgentType::Full, Some("kimi-k3".into()))
        );
        assert!(matches!(parse(&["acp", "--model"]), Invocation::BadArgs(_)));
        assert!(matches!(parse(&["--model"]), Invocation::BadArgs(_)));
        assert!(matches!(
            parse(&["--model", "x", "models", "list"]),
            Invocation::Refused(_)
        ));
        assert!(matches!(
            parse(&["-p", "hello"]),
            Invocation::Print(print::Args { .. })
        ));
        assert!(matches!(
            parse(&["-p", "--permission-mode", "ask", "hello"]),
            Invocation::BadArgs(_)
        ));
        assert_eq!(parse(&["--version"]), Invocation::Version);
        assert_eq!(
            parse(&["models", "list", "--format", "json"]),
            Invocation::Models { json: true }
        );
        assert_eq!(
            parse(&["models", "list"]),
            Invocation::Models { json: false }
        );
        assert_eq!(parse(&[GRANDCHILD_ARG, "7"]), Invocation::Grandchild(7));
        for (args, says) in [
            (&["acp", "--cloud"][..], "--cloud is refused"),
            (&["acp", "--cloud=true"], "--cloud=true is refused"),
            (
                &["acp", "--refusal-fallback"],
                "--refusal-fallback is refused",
            ),
            (
                &["acp", "--agent-type", "default"],
                "unknown --agent-type \"default\"",
            ),
            (
                &["acp", "--agent-type"],
                "unknown --agent-type \"(missing)\"",
            ),
            (&["acp", "--verbose"], "unsupported arguments"),
            (
                &["models", "list", "--format", "yaml"],
                "unsupported arguments",
            ),
            (&[], "unsupported arguments"),
        ] {
            match parse(args) {
                Invocation::Refused(message) => {
                    assert!(message.contains(says), "{args:?}: {message}");
                    assert!(message.contains("unsupported arguments"), "{message}");
                }
                other => panic!("{args:?} gave {other:?}"),
            }
        }
    }
}
