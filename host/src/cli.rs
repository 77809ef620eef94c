//! Subcommands of the `devin-bridge` binary (the edges: anyhow is fine here).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use tokio::signal::unix::{signal, SignalKind};

use crate::control;
use crate::engine::{self, CompileCache, Corpus, Loaded, Runtime, TransformKind, Transforms};
use crate::identity::{self, AgentIdentity};
use crate::policy::{Mode, Policy};
use crate::reload::Reloader;
use crate::summarizer::{self, Bridge};

/// Logs go to stderr; `DEVIN_BRIDGE_LOG` (or `RUST_LOG`) sets the filter, else the policy's
/// `[log] filter`, default `info`; `DEVIN_BRIDGE_LOG_FORMAT=json` switches to one JSON object
/// per line.
pub fn init_tracing() {
    crate::logging::init();
}

/// `devin-bridge serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The policy file that selects the mode and configures everything.
    #[arg(long, env = "DEVIN_BRIDGE_POLICY")]
    pub policy: PathBuf,
    /// Listen address (overrides the policy's).
    #[arg(long)]
    pub listen: Option<String>,
}

/// `devin-bridge components ...`.
#[derive(Debug, Subcommand)]
pub enum ComponentsCommand {
    /// Validate a component file for a transform: interface, imports, golden corpus (the one
    /// shipped next to the file, else the embedded one), timings.
    Check {
        /// The `.wasm` component file.
        file: PathBuf,
        /// Which transform it implements: serializer, envelope, sse or model-alias.
        #[arg(long = "as")]
        transform: String,
    },
    /// Hot-swap a transform of a running host (over its control socket).
    Swap {
        /// serializer, envelope, sse or model-alias.
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
pub struct ControlTarget {
    /// The control socket (default: the one the policy names, else the per-user default).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Read the socket path from this policy.
    #[arg(long, env = "DEVIN_BRIDGE_POLICY")]
    pub policy: Option<PathBuf>,
}

impl ControlTarget {
    fn socket_path(&self) -> anyhow::Result<PathBuf> {
        if let Some(socket) = &self.socket {
            return Ok(socket.clone());
        }
        if let Some(path) = &self.policy {
            let policy = Policy::load(path)?;
            return Ok(control_socket_path(&policy));
        }
        Ok(control::default_socket_path())
    }
}

fn control_socket_path(policy: &Policy) -> PathBuf {
    policy
        .control
        .socket
        .as_ref()
        .map(|socket| policy.resolve(socket))
        .unwrap_or_else(control::default_socket_path)
}

/// Loads the policy and sets up identities for `serve`: switches a root-started host to
/// `[server] user` and decides whether agents get their own uid. Call before any thread exists.
pub fn serve_identity(args: &ServeArgs) -> anyhow::Result<AgentIdentity> {
    let policy = Policy::load(&args.policy)?;
    Ok(identity::establish(&policy)?)
}

/// `devin-bridge serve`: load the policy and its components, check the agent, then serve the
/// Anthropic Messages endpoint until SIGTERM (SIGHUP re-reads the policy; see `reload`).
pub async fn serve(args: ServeArgs, identity: AgentIdentity) -> anyhow::Result<ExitCode> {
    let policy = Policy::load(&args.policy)?;
    crate::logging::apply_policy_filter(policy.log.filter_or_default())?;
    match policy.mode {
        Mode::Summarizer => {}
        Mode::Companion => bail!(
            "a companion policy is not served: run `devin-bridge companion --policy {} <subcommand>` instead; refusing to start (fail closed)",
            args.policy.display()
        ),
        Mode::Outpost => bail!(
            "an outpost policy is not served: run `devin-bridge outpost start --policy {}` instead; refusing to start (fail closed)",
            args.policy.display()
        ),
    }
    let transforms = {
        let policy = policy.clone();
        tokio::task::spawn_blocking(move || Transforms::load(&policy))
            .await
            .context("loading components")??
    };
    let transforms = Arc::new(transforms);
    for info in transforms.info() {
        eprintln!(
            "component {:<12} sha256 {}  ({})",
            info.name, info.sha256, info.source
        );
    }
    let bridge = Bridge::from_policy(&policy, transforms.clone(), &identity).await?;
    eprintln!(
        "agent     {} {} ({}, {} agent; transport {:?}; prewarm {}; identity {})",
        bridge.agent.command,
        bridge.agent.args.join(" "),
        bridge.agent.version,
        bridge.agent.kind,
        policy.agent.transport,
        policy.agent.prewarm,
        bridge.agent.identity
    );
    let listen = args
        .listen
        .clone()
        .unwrap_or_else(|| policy.server.listen.clone());
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let address = listener.local_addr()?;

    let socket = control_socket_path(&policy);
    let control_listener = control::bind(&socket)?;
    eprintln!("control socket {}", socket.display());
    let control_task = tokio::spawn(control::serve(control_listener, transforms.clone()));
    let refill = tokio::spawn(bridge.pool.clone().run_refill());
    let reaper = bridge
        .resident
        .clone()
        .map(|resident| tokio::spawn(resident.run_reaper()));

    eprintln!(
        "listening on http://{address} (mode {}, policy {})",
        policy.mode,
        args.policy.display()
    );
    let shutdown = {
        let reloader = Reloader::new(args.policy.clone(), policy.clone(), transforms.clone());
        async move {
            if let Err(error) = wait_for_shutdown(reloader).await {
                tracing::error!(%error, "signal handling failed; shutting down");
            }
        }
    };
    summarizer::serve(
        bridge,
        listener,
        policy.server.max_connections,
        Duration::from_millis(policy.server.shutdown_grace_ms),
        shutdown,
    )
    .await;
    refill.abort();
    if let Some(reaper) = reaper {
        reaper.abort();
    }
    control_task.abort();
    let _ = std::fs::remove_file(&socket);
    eprintln!("devin-bridge: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Waits for SIGTERM or SIGINT; on SIGHUP re-reads the policy and applies what can change
/// live (see `reload`).
pub(crate) async fn wait_for_shutdown(mut reloader: Reloader) -> anyhow::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    loop {
        tokio::select! {
            _ = terminate.recv() => { tracing::info!("SIGTERM: shutting down"); return Ok(()); }
            _ = interrupt.recv() => { tracing::info!("SIGINT: shutting down"); return Ok(()); }
            _ = hangup.recv() => reloader.reload().await,
        }
    }
}

/// `devin-bridge components ...`.
pub async fn components(command: ComponentsCommand) -> anyhow::Result<ExitCode> {
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
    let runtime = Runtime::new(crate::policy::RuntimeLimits::default().into())?;
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
