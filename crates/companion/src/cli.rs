//! The clap definitions of `devin-bridge companion`.
//!
//! The top-level binary hands everything after `companion` to [`parse`] unparsed, so that a
//! bad flag is reported as exactly one line (`devin-bridge companion: <message>`, exit 2)
//! rather than clap's multi-line usage, and so that `--raw-args-token` can replace the
//! arguments before they are parsed.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::commands::{
    CancelArgs, HistoryArgs, RecordAcceptanceArgs, ResultArgs, SessionEndArgs, StatusArgs,
};

/// Everything after `devin-bridge companion`, parsed by the companion itself.
#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct CompanionArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<OsString>,
}

/// `devin-bridge companion [--policy P] <subcommand>`.
#[derive(Debug, Parser)]
#[command(
    name = "devin-bridge companion",
    no_binary_name = true,
    about = "Delegate tasks and reviews to the Devin CLI, with job records and typed failures",
    after_help = "task, review, status, history, result, cancel and setup also accept \
                  `--raw-args-token T` as their only argument: the arguments are then read from \
                  the private file made by `raw-args-create` (see docs/companion.md)."
)]
pub(crate) struct CompanionCli {
    /// A companion policy (default: DEVIN_BRIDGE_POLICY, else the built-in one).
    #[arg(long, env = "DEVIN_BRIDGE_POLICY")]
    pub policy: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Delegate a task (read-only consult by default; --write lets Devin edit the workspace).
    Task(TaskArgs),
    /// Ask Devin for a read-only review of the working tree or the branch.
    Review(ReviewArgs),
    /// Show one job or the jobs of this workspace.
    Status(StatusArgs),
    /// Print a job's result (optionally waiting for it).
    Result(ResultArgs),
    /// Cancel a running job.
    Cancel(CancelArgs),
    /// List past jobs (safe projection).
    History(HistoryArgs),
    /// Record whether a job's result was accepted.
    RecordAcceptance(RecordAcceptanceArgs),
    /// The Claude Code SessionEnd hook.
    SessionEnd(SessionEndArgs),
    /// List the models of the Devin account (cached for an hour).
    Models(ModelsArgs),
    /// Check the Devin CLI, its version, the data directory and the credentials.
    Setup(SetupArgs),
    /// Create an empty private raw-args file and print its token and path.
    #[command(alias = "transport-create")]
    RawArgsCreate(RawArgsCreateArgs),
    /// Remove a raw-args file (idempotent).
    #[command(alias = "transport-discard")]
    RawArgsDiscard(RawArgsDiscardArgs),
    #[command(hide = true)]
    TaskWorker(WorkerArgs),
    #[command(hide = true)]
    ReviewWorker(WorkerArgs),
}

/// Which Devin CLI interface runs a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub(crate) enum RunnerKind {
    /// `devin acp`: sessions, models, typed failures (default).
    #[default]
    Acp,
    /// `devin -p`: one stateless print-mode run.
    Print,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct TaskArgs {
    /// Let Devin edit files in the workspace (default: read-only consult).
    #[arg(long)]
    pub write: bool,
    /// A model family, alias or model id from `models`.
    #[arg(long)]
    pub model: Option<String>,
    /// Thought level: `default` or one the model offers.
    #[arg(long)]
    pub effort: Option<String>,
    /// Resume this Devin session.
    #[arg(long, value_name = "SID", conflicts_with_all = ["resume_last", "fresh"])]
    pub resume: Option<String>,
    /// Resume the newest finished session of this workspace and mode.
    #[arg(long, conflicts_with_all = ["resume", "fresh"])]
    pub resume_last: bool,
    /// Start a new session (the default).
    #[arg(long, conflicts_with_all = ["resume", "resume_last"])]
    pub fresh: bool,
    /// Run detached; prints the job id at once.
    #[arg(long)]
    pub background: bool,
    /// The workspace (default: the current directory, which must be a repository root).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// How the task runs: `acp` (sessions, models, typed failures) or `print` (`devin -p`).
    /// `--transport` is the deprecated spelling.
    #[arg(long, value_enum, default_value_t = RunnerKind::Acp, alias = "transport")]
    pub runner: RunnerKind,
    /// The prompt (default: read from stdin). Put `--` before a prompt that starts with `-`.
    #[arg(trailing_var_arg = true, num_args = 0..)]
    pub prompt: Vec<String>,
}

/// Which changes a review covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub(crate) enum Scope {
    /// The working tree when it has changes, else the branch.
    #[default]
    Auto,
    WorkingTree,
    Branch,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct ReviewArgs {
    #[arg(long, value_enum, default_value_t = Scope::Auto)]
    pub scope: Scope,
    /// The base of a branch review (default: the default branch).
    #[arg(long)]
    pub base: Option<String>,
    /// What to pay attention to.
    #[arg(long)]
    pub focus: Option<String>,
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long)]
    pub effort: Option<String>,
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    #[arg(long)]
    pub background: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct ModelsArgs {
    /// Re-read the catalog from the CLI.
    #[arg(long)]
    pub refresh: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct SetupArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct RawArgsCreateArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct RawArgsDiscardArgs {
    #[arg(long, value_name = "T")]
    pub raw_args_token: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct WorkerArgs {
    #[arg(long)]
    pub job: String,
}

/// Subcommands that accept `--raw-args-token`.
pub(crate) const RAW_ARGS_SUBCOMMANDS: [&str; 7] = [
    "task", "review", "status", "history", "result", "cancel", "setup",
];

/// The arguments split into the global part, the subcommand name and its own arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split {
    pub policy: Option<PathBuf>,
    pub subcommand: Option<String>,
    pub rest: Vec<String>,
}

/// Finds the subcommand without parsing it (so `--raw-args-token` can be handled first).
pub(crate) fn split_args(args: &[String]) -> Split {
    let mut policy = None;
    let mut index = 0;
    while index < args.len() {
        let arg = &args[index];
        if arg == "--policy" {
            policy = args.get(index + 1).map(PathBuf::from);
            index += 2;
        } else if let Some(value) = arg.strip_prefix("--policy=") {
            policy = Some(PathBuf::from(value));
            index += 1;
        } else {
            break;
        }
    }
    Split {
        policy,
        subcommand: args.get(index).cloned(),
        rest: args
            .get(index + 1..)
            .map(<[String]>::to_vec)
            .unwrap_or_default(),
    }
}

/// `Some(token)` when the subcommand's arguments are exactly `--raw-args-token T`;
/// `Err` when the flag is mixed with other arguments or given to another subcommand.
pub(crate) fn raw_args_token(split: &Split) -> Result<Option<String>, String> {
    let mentions = split
        .rest
        .iter()
        .any(|a| a == "--raw-args-token" || a.starts_with("--raw-args-token="));
    let sub = split.subcommand.as_deref().unwrap_or_default();
    if !mentions || sub == "raw-args-discard" || sub == "transport-discard" {
        return Ok(None);
    }
    if !RAW_ARGS_SUBCOMMANDS.contains(&sub) {
        return Err(format!("{sub} does not accept --raw-args-token"));
    }
    match split.rest.as_slice() {
        [flag, token] if flag == "--raw-args-token" => Ok(Some(token.clone())),
        [single] => Ok(single.strip_prefix("--raw-args-token=").map(str::to_owned)),
        _ => Err("--raw-args-token must be the only argument of the subcommand".into()),
    }
}

/// The deprecated spellings still read, and what replaces them.
const DEPRECATED: [(&str, &str); 3] = [
    ("transport-create", "raw-args-create"),
    ("transport-discard", "raw-args-discard"),
    ("--transport", "--runner"),
];

/// One warning line for each deprecated spelling among the arguments.
pub(crate) fn deprecation_warnings(split: &Split) -> Vec<String> {
    let words = split.subcommand.iter().chain(split.rest.iter());
    let mut warnings = Vec::new();
    for word in words {
        let name = word.split('=').next().unwrap_or(word);
        if let Some((old, new)) = DEPRECATED.iter().find(|(old, _)| *old == name) {
            warnings.push(format!("`{old}` is deprecated; use `{new}`"));
        }
        if word == "--" {
            break;
        }
    }
    warnings
}

/// Parses the arguments after `companion` (with the subcommand's own arguments replaced).
pub(crate) fn parse(split: &Split) -> Result<CompanionCli, clap::Error> {
    let mut argv: Vec<String> = Vec::new();
    if let Some(policy) = &split.policy {
        argv.push("--policy".into());
        argv.push(policy.display().to_string());
    }
    argv.extend(split.subcommand.iter().cloned());
    argv.extend(split.rest.iter().cloned());
    CompanionCli::try_parse_from(argv)
}

/// Clap's error as one line, without the `error: ` prefix and the usage.
pub(crate) fn one_line(error: &clap::Error) -> String {
    let text = error.to_string();
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments");
    line.trim_start_matches("error: ").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn the_subcommand_is_found_after_the_policy() {
        let split = split_args(&strings(&["--policy", "p.toml", "task", "--write", "x"]));
        assert_eq!(split.policy, Some(PathBuf::from("p.toml")));
        assert_eq!(split.subcommand.as_deref(), Some("task"));
        assert_eq!(split.rest, ["--write", "x"]);
    }

    #[test]
    fn raw_args_token_must_stand_alone() {
        let ok = split_args(&strings(&["task", "--raw-args-token", "abc"]));
        assert_eq!(raw_args_token(&ok), Ok(Some("abc".into())));
        let mixed = split_args(&strings(&["task", "--write", "--raw-args-token", "abc"]));
        assert!(raw_args_token(&mixed).is_err());
        let wrong = split_args(&strings(&["models", "--raw-args-token", "abc"]));
        assert!(raw_args_token(&wrong).is_err());
        let none = split_args(&strings(&["task", "hello"]));
        assert_eq!(raw_args_token(&none), Ok(None));
    }

    #[test]
    fn task_options_come_before_the_prompt() {
        let cli = parse(&split_args(&strings(&[
            "task", "--write", "--model", "swe-2", "fix", "--write", "now",
        ])))
        .expect("parse");
        let Command::Task(task) = cli.command else {
            panic!("not a task")
        };
        assert!(task.write);
        assert_eq!(task.prompt, ["fix", "--write", "now"]);
        let dashed = parse(&split_args(&strings(&["task", "--", "-x", "y"]))).expect("parse");
        let Command::Task(task) = dashed.command else {
            panic!("not a task")
        };
        assert_eq!(task.prompt, ["-x", "y"]);
    }

    #[test]
    fn resume_flags_are_mutually_exclusive_and_errors_are_one_line() {
        let error = parse(&split_args(&strings(&[
            "task", "--resume", "s", "--fresh", "x",
        ])))
        .expect_err("conflict");
        let line = one_line(&error);
        assert!(!line.contains('\n'));
        assert!(line.contains("cannot be used with"), "{line}");
        assert!(parse(&split_args(&strings(&["task", "--bogus"]))).is_err());
    }
}
