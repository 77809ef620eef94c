//! Subcommands of the `devin-bridge` binary (the edges: anyhow is fine here).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};

use devin_bridge_engine::{
    self as engine, CompileCache, Corpus, Loaded, Runtime, RuntimeLimits, TransformKind,
};
use devin_bridge_summarizer::control;
use devin_bridge_summarizer::startup::control_socket_path;

use crate::policy::load_summarizer;

/// Logs go to stderr; `DEVIN_BRIDGE_LOG` (or `RUST_LOG`) sets the filter, else the policy's
/// `[log] filter`, default `info`; `DEVIN_BRIDGE_LOG_FORMAT=json` switches to one JSON object
/// per line.
pub(crate) fn init_tracing() {
    devin_bridge_policy::log::init();
}

/// Logs of a one-shot command (`doctor`, `client-env`), which prints its own report: only
/// errors unless `-v` (info) or `-vv` (debug) asks for more, or the environment sets a filter.
pub(crate) fn init_tracing_one_shot(verbose: u8) {
    devin_bridge_policy::log::init_with_default(match verbose {
        0 => "error",
        1 => "info",
        _ => "debug",
    });
}

/// `devin-bridge serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The policy file that selects the mode and configures everything.
    #[arg(long, env = "DEVIN_BRIDGE_POLICY")]
    pub policy: PathBuf,
    /// Listen address (overrides the policy's).
    #[arg(long)]
    pub listen: Option<String>,
}

/// `devin-bridge doctor`.
#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// The summarizer policy whose agent is checked (as `serve` would run it).
    #[arg(long, env = "DEVIN_BRIDGE_POLICY")]
    pub policy: PathBuf,
    /// Also send one short prompt: proves the service accepts the client identity and shows
    /// which model answered (uses the account).
    #[arg(long)]
    pub prompt: bool,
    /// Print the report as one JSON object (token-free: attach it to a bug report).
    #[arg(long)]
    pub json: bool,
    /// Write the exchange with the agent to FILE as a trace (JSON lines; secrets, prompt
    /// text, paths and account ids redacted before anything is written; mode 0600).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Show the bridge's own log lines on stderr (-v: info, -vv: debug).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// `devin-bridge doctor`: every check on the policy's agent, one line each (or JSON); exit 1
/// when any fails.
pub(crate) async fn doctor(
    args: DoctorArgs,
    policy: devin_bridge_summarizer::policy::SummarizerPolicy,
    identity: devin_bridge_agent::identity::AgentIdentity,
    identity_notice: Option<String>,
) -> anyhow::Result<ExitCode> {
    let report = devin_bridge_summarizer::doctor::run(
        &policy,
        args.policy.display().to_string(),
        &identity,
        devin_bridge_summarizer::doctor::Options {
            prompt: args.prompt,
            record: args.record,
            identity_notice,
        },
    )
    .await;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.human());
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `devin-bridge components ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum ComponentsCommand {
    /// Validate a component file for a transform: interface, imports, golden corpus (the one
    /// shipped next to the file, else the embedded one), timings.
    Check {
        /// The `.wasm` component file.
        file: PathBuf,
        /// Which transform it implements.
        #[arg(long = "as", value_parser = transform_names())]
        transform: String,
    },
    /// Hot-swap a transform of a running host (over its control socket).
    Swap {
        /// Which transform to replace.
        #[arg(value_parser = transform_names())]
        transform: String,
        /// The `.wasm` component file.
        file: PathBuf,
        #[command(flatten)]
        target: ControlTarget,
    },
    /// List the components a running host serves.
    List {
        #[command(flatten)]
        target: ControlTarget,
    },
}

/// Which running host to talk to.
#[derive(Debug, Args)]
pub(crate) struct ControlTarget {
    /// The control socket (default: the one the policy names, else the per-user default for
    /// `--listen`, else the policy's listen address, 127.0.0.1:20128 without a policy).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Read the socket path from this policy.
    #[arg(long, env = "DEVIN_BRIDGE_POLICY")]
    pub policy: Option<PathBuf>,
    /// The address the host was started with (`serve --listen`), when it overrode the
    /// policy's: the default socket is named after the address the host really listens on.
    #[arg(long)]
    pub listen: Option<String>,
}

impl ControlTarget {
    fn socket_path(&self) -> anyhow::Result<PathBuf> {
        if let Some(socket) = &self.socket {
            return Ok(socket.clone());
        }
        if let Some(path) = &self.policy {
            let policy = load_summarizer(path, "components")?;
            return Ok(control_socket_path(&policy, self.listen.as_deref()));
        }
        // No policy: the given address, else the default policy's.
        let default_listen = devin_bridge_summarizer::policy::ServerSection::default().listen;
        Ok(control::default_socket_path(
            self.listen.as_deref().unwrap_or(&default_listen),
        ))
    }
}

/// `devin-bridge components ...`.
pub(crate) async fn components(command: ComponentsCommand) -> anyhow::Result<ExitCode> {
    match command {
        ComponentsCommand::Check { file, transform } => {
            let kind: TransformKind = transform.parse()?;
            tokio::task::spawn_blocking(move || check(kind, &file)).await?
        }
        ComponentsCommand::Swap {
            transform,
            file,
            target,
        } => {
            let kind: TransformKind = transform.parse()?;
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let request = control::Request::Swap {
                transform: kind.name().to_owned(),
                size: bytes.len() as u64,
                source: file.display().to_string(),
            };
            let report = control::request(&target.socket_path()?, &request, &bytes).await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        ComponentsCommand::List { target } => {
            let list =
                control::request(&target.socket_path()?, &control::Request::List, &[]).await?;
            println!("{}", serde_json::to_string_pretty(&list)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// For component authors: everything the host checks before a component may serve.
fn check(kind: TransformKind, file: &std::path::Path) -> anyhow::Result<ExitCode> {
    let runtime = Runtime::new(RuntimeLimits::default().into())?;
    let started = Instant::now();
    let loaded = Loaded::from_file(&runtime, &CompileCache::disabled(), kind, file, None)?;
    let compile = started.elapsed();
    println!("file      {}", file.display());
    println!("transform {kind}");
    println!("sha256    {}", loaded.sha256);
    println!("size      {} bytes", loaded.size);
    println!("imports   none (type definitions only)");
    println!(
        "compile   {:.1} ms (interface and imports checked)",
        compile.as_secs_f64() * 1e3
    );
    let corpus = Corpus::for_component(kind, file)?;
    let report = engine::self_test(&runtime, &loaded, &corpus)?;
    println!(
        "self-test {} golden cases passed ({} corpus) in {:.1} ms ({:.1} µs per fresh instance + call)",
        report.cases,
        report.corpus,
        report.elapsed.as_secs_f64() * 1e3,
        report.elapsed.as_secs_f64() * 1e6 / report.cases.max(1) as f64
    );
    println!(
        "ok: this component can be swapped in with `devin-bridge components swap {kind} {}`",
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The transforms' names, which `--help` lists and clap checks.
fn transform_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        devin_bridge_engine::TransformKind::ALL.map(devin_bridge_engine::TransformKind::name),
    )
}
