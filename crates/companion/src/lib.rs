//! `devin-bridge companion`: delegate tasks and reviews to Devin's CLI, with job records and
//! typed failures.
//!
//! A Claude Code plugin calls this helper. It runs as the invoking user; every agent it
//! starts (`devin acp`, `devin -p`) gets a private HOME and configuration (`private_home`), a
//! per-mode tool list (`run`) and an environment allowlist. Bad flags or input print exactly
//! one line on stderr and exit 2 without creating a record; every job outcome ends with the
//! footer block (`render`).

mod cli;
mod commands;
mod context;
mod error;
mod failure;
mod jobs;
mod keeper;
mod launch;
mod models;
mod output;
mod policy;
mod preflight;
mod print;
mod private_home;
mod raw_args;
mod render;
mod review;
mod run;
mod settings;

use std::path::PathBuf;
use std::process::ExitCode;

pub use cli::CompanionArgs;
pub use context::Context;
pub use error::CompanionError;
pub use output::{job_output, Output};
// The job store, for tools that prepare or inspect a data directory (the companion bench).
pub use jobs::clock::format_rfc3339;
pub use jobs::{JobRecord, JobStatus, JobStore, Role, RunMode};

use cli::Command;
use failure::{FailureKind, JobFailure};
use settings::Settings;

const PREFIX: &str = "devin-bridge companion";

fn fail_line(message: &str, code: u8) -> ExitCode {
    use std::io::Write;
    let line: String = message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    // A closed stderr is no reason to panic: the exit code still tells the outcome.
    let _ = writeln!(std::io::stderr().lock(), "{PREFIX}: {line}");
    ExitCode::from(code)
}

/// Writes to stdout; a reader that went away (a closed pipe) is not an error of the job.
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// The entry point: parses the arguments after `companion` and runs the subcommand.
pub async fn main(args: CompanionArgs) -> anyhow::Result<ExitCode> {
    let mut strings = Vec::with_capacity(args.args.len());
    for arg in args.args {
        match arg.into_string() {
            Ok(arg) => strings.push(arg),
            Err(_) => return Ok(fail_line("arguments must be UTF-8", failure::EXIT_INPUT)),
        }
    }
    // The print runs' group keeper needs no policy: it only watches a lifeline.
    if strings.first().map(String::as_str) == Some(keeper::SUBCOMMAND) {
        return Ok(match keeper::parse_args(&strings[1..]) {
            Some(args) => keeper::run(args).await,
            None => fail_line("usage: group-keeper --grace-ms MS", failure::EXIT_INPUT),
        });
    }
    let mut split = cli::split_args(&strings);
    for warning in cli::deprecation_warnings(&split) {
        eprintln!("devin-bridge companion: warning: {warning}");
    }
    let policy_path = split.policy.clone().or_else(|| {
        std::env::var_os("DEVIN_BRIDGE_POLICY")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    });
    let policy = match settings::load_policy(policy_path.as_deref()) {
        Ok(policy) => policy,
        Err(error) => return Ok(fail_line(&error.to_string(), failure::EXIT_INPUT)),
    };
    let _ = devin_bridge_policy::log::apply_policy_filter(
        policy.log.filter.as_deref().unwrap_or("error"),
    );
    let settings = match Settings::resolve(&policy) {
        Ok(settings) => settings,
        Err(error) => return Ok(fail_line(&error.to_string(), failure::EXIT_INPUT)),
    };
    match cli::raw_args_token(&split) {
        Ok(None) => {}
        Ok(Some(token)) => match raw_args::consume(&settings.data_dir, &token) {
            Ok(words) => split.rest = words,
            Err(error) if error.is_input() => {
                return Ok(fail_line(&error.to_string(), failure::EXIT_INPUT))
            }
            Err(error) => return Ok(fail_line(&error.to_string(), failure::EXIT_FAILED)),
        },
        Err(message) => return Ok(fail_line(&message, failure::EXIT_INPUT)),
    }
    let parsed = match cli::parse(&split) {
        Ok(parsed) => parsed,
        Err(error)
            if matches!(
                error.kind(),
                clap::error::ErrorKind::DisplayHelp
                    | clap::error::ErrorKind::DisplayVersion
                    | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            emit(&error.render().to_string());
            return Ok(ExitCode::SUCCESS);
        }
        Err(error) => return Ok(fail_line(&cli::one_line(&error), failure::EXIT_INPUT)),
    };
    let ctx = Context {
        policy,
        policy_path,
        settings,
    };
    let (json, outcome) = dispatch(&ctx, parsed.command).await;
    match outcome {
        Ok(output) => {
            if json {
                emit(&format!("{}\n", output.json));
            } else if output.text.is_empty() || output.text.ends_with('\n') {
                emit(&output.text);
            } else {
                emit(&format!("{}\n", output.text));
            }
            Ok(output.exit)
        }
        Err(error) => Ok(fail_line(&error.to_string(), error.exit_code())),
    }
}

async fn dispatch(ctx: &Context, command: Command) -> (bool, Result<Output, CompanionError>) {
    let settings = &ctx.settings;
    match command {
        Command::Task(args) => (args.json, launch::task(ctx, args).await),
        Command::Review(args) => (args.json, launch::review(ctx, args).await),
        Command::Status(args) => (args.json, commands::status(settings, args)),
        Command::Result(args) => (args.json, commands::result(settings, args)),
        Command::Cancel(args) => (args.json, commands::cancel(settings, args)),
        Command::History(args) => (args.json, commands::history(settings, args)),
        Command::RecordAcceptance(args) => (args.json, commands::record_acceptance(settings, args)),
        Command::SessionEnd(args) => (false, commands::session_end(settings, args)),
        Command::Models(args) => (args.json, models_command(ctx, args.refresh).await),
        Command::Setup(args) => (args.json, setup(ctx).await),
        Command::RawArgsCreate(args) => (args.json, raw_args_create(settings)),
        Command::RawArgsDiscard(args) => {
            (args.json, raw_args_discard(settings, &args.raw_args_token))
        }
        Command::TaskWorker(args) => (false, launch::worker(ctx, &args.job, Role::Task).await),
        Command::ReviewWorker(args) => (false, launch::worker(ctx, &args.job, Role::Review).await),
    }
}

fn transport_error(error: raw_args::RawArgsError) -> CompanionError {
    if error.is_input() {
        CompanionError::input(error.to_string())
    } else {
        CompanionError::JobFailure(JobFailure::new(FailureKind::Error, error.to_string()))
    }
}

fn raw_args_create(settings: &Settings) -> Result<Output, CompanionError> {
    let (token, path) = raw_args::create(&settings.data_dir).map_err(transport_error)?;
    Ok(Output {
        text: format!("token: {token}\npath: {}\n", path.display()),
        json: serde_json::json!({ "token": token, "path": path }),
        exit: ExitCode::SUCCESS,
    })
}

fn raw_args_discard(settings: &Settings, token: &str) -> Result<Output, CompanionError> {
    let removed = raw_args::discard(&settings.data_dir, token).map_err(transport_error)?;
    Ok(Output {
        text: format!(
            "{}\n",
            if removed {
                "discarded"
            } else {
                "nothing to discard"
            }
        ),
        json: serde_json::json!({ "token": token, "removed": removed }),
        exit: ExitCode::SUCCESS,
    })
}

/// `models`: the catalog, one line per family.
async fn models_command(ctx: &Context, refresh: bool) -> Result<Output, CompanionError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let devin = launch::preflight(ctx, &cwd)
        .await
        .map_err(CompanionError::JobFailure)?;
    let (shared, _) = private_home::prepare_home(&ctx.settings.data_dir).map_err(|e| {
        CompanionError::JobFailure(JobFailure::new(FailureKind::Setup, e.to_string()))
    })?;
    let text = models::catalog(
        &ctx.settings.data_dir,
        &devin.path,
        private_home::child_env(&shared, None, private_home::Sandbox::ReadOnly),
        &cwd,
        ctx.probe_timeout(),
        ctx.models_ttl(),
        refresh,
    )
    .await
    .map_err(|error| match error {
        models::ModelsError::Input(message) => CompanionError::input(message),
        other => CompanionError::JobFailure(JobFailure::new(FailureKind::Setup, other.to_string())),
    })?;
    let catalog: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let mut lines = String::new();
    for family in catalog["families"].as_array().into_iter().flatten() {
        let slug = family["slug"].as_str().unwrap_or("?");
        let label = family["family_label"].as_str().unwrap_or(slug);
        let aliases: Vec<&str> = family["aliases"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str())
            .collect();
        let variants: Vec<&str> = family["variants"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["model_uid"].as_str())
            .collect();
        lines.push_str(&format!(
            "{slug}\t{label}\tvariants: {}",
            variants.join(", ")
        ));
        if !aliases.is_empty() {
            lines.push_str(&format!("\taliases: {}", aliases.join(", ")));
        }
        lines.push('\n');
    }
    Ok(Output {
        text: lines,
        json: catalog,
        exit: ExitCode::SUCCESS,
    })
}

/// `setup`: the CLI, its version against the tested interval, the data directory and the
/// credentials.
async fn setup(ctx: &Context) -> Result<Output, CompanionError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let data_dir = &ctx.settings.data_dir;
    let credentials = private_home::real_credentials().ok();
    let credentials_present = credentials
        .as_ref()
        .is_some_and(|path| std::fs::metadata(path).is_ok_and(|m| m.is_file()));
    let api_key = std::env::var_os("WINDSURF_API_KEY").is_some_and(|k| !k.is_empty());
    let devin = launch::preflight(ctx, &cwd).await;
    let (state, kind, exit) = match &devin {
        Ok(devin) => (
            devin.standing.describe().to_owned(),
            None,
            ExitCode::SUCCESS,
        ),
        Err(failure) => (
            failure.message.clone(),
            Some(failure.kind),
            ExitCode::from(failure.kind.exit_code()),
        ),
    };
    let path = match &devin {
        Ok(devin) => Some(devin.path.display().to_string()),
        Err(_) => preflight::resolve_binary(&ctx.policy.companion.command)
            .ok()
            .map(|p| p.display().to_string()),
    };
    let version = devin.as_ref().ok().map(|d| d.version.clone());
    let mut text = String::new();
    text.push_str(&format!(
        "devin: {}\n",
        path.as_deref().unwrap_or("not found")
    ));
    text.push_str(&format!(
        "version: {}\n",
        version.as_deref().unwrap_or("unknown")
    ));
    text.push_str(&format!(
        "tested interval: [{}.{}, {}.{}): {state}\n",
        preflight::TESTED_FROM.0,
        preflight::TESTED_FROM.1,
        preflight::TESTED_UNTIL.0,
        preflight::TESTED_UNTIL.1
    ));
    text.push_str(&format!("data: {}\n", data_dir.display()));
    text.push_str(&format!(
        "credentials: {}\n",
        match (credentials_present, api_key) {
            (true, _) => "linkable".to_owned(),
            (false, true) => "WINDSURF_API_KEY is set".to_owned(),
            (false, false) => format!(
                "missing ({}); run `devin auth login`",
                credentials
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ),
        }
    ));
    if let Some(kind) = kind {
        text.push_str(&format!("failure: {kind}: {state}\n"));
    }
    let json = serde_json::json!({
        "devinPath": path,
        "devinVersion": version,
        "testedInterval": format!("[{}.{}, {}.{})", preflight::TESTED_FROM.0, preflight::TESTED_FROM.1, preflight::TESTED_UNTIL.0, preflight::TESTED_UNTIL.1),
        "versionStanding": devin.as_ref().ok().map(|d| match d.standing {
            preflight::Standing::Tested => "inside",
            preflight::Standing::Newer => "newer",
            preflight::Standing::Older => "older",
        }),
        "dataDir": data_dir,
        "credentialsLinkable": credentials_present,
        "apiKeySet": api_key,
        "failure": kind.map(|kind| serde_json::json!({"kind": kind, "message": state})),
    });
    Ok(Output { text, json, exit })
}
