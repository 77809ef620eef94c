//! Outpost mode: `devin-bridge outpost`, a worker that serves Devin Outposts sessions from a
//! fleet queue (list + watch, listed again whenever the watch is quiet for a poll interval;
//! claim, fetch and verify `devin-remote`, run it with a clean environment in its own process
//! group, follow the session, release), plus the `create`, `delete` and `list` commands for
//! outposts. See `docs/outpost.md`.

mod acceptor;
mod backoff;
mod binaries;
mod choose;
mod cli;
mod fleet;
mod framing;
mod network;
mod policy;
mod queue;
mod remote;
mod session;
mod settings;
mod worker;

pub use cli::OutpostArgs;
pub use policy::OutpostPolicy;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use sha2::Digest;

use self::binaries::BinaryCache;
use self::cli::{ConnectionArgs, OutpostCommand, StartArgs};
use self::fleet::{http_client, FleetClient, Outpost, OutpostId, PublicFetcher};
use self::framing::ComponentFramer;
use self::network::Namespace;
use self::queue::Reflector;
use self::session::{SessionContext, SessionOutcome};
use self::settings::{load_policy, Overrides, WorkerSettings};
use self::worker::Worker;

/// Entry point of `devin-bridge outpost`.
pub async fn main(args: OutpostArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        OutpostCommand::Start(args) => start(args).await,
        OutpostCommand::Create(args) => {
            let client = admin_client(&args.connection)?;
            if !fleet::types::PLATFORMS.contains(&args.platform.as_str()) {
                bail!(
                    "--platform must be one of {}, not {:?}",
                    fleet::types::PLATFORMS.join(", "),
                    args.platform
                );
            }
            let outpost = client
                .create_outpost(&args.name, &args.platform, &args.description)
                .await
                .context("cannot create the outpost")?;
            println!("{}", outpost.metadata.outpost_id);
            Ok(ExitCode::SUCCESS)
        }
        OutpostCommand::Delete(args) => {
            let client = admin_client(&args.connection)?;
            let id: OutpostId = args
                .outpost_id
                .parse()
                .map_err(|error| anyhow::anyhow!("{:?}: {error}", args.outpost_id))?;
            client
                .delete_outpost(&id)
                .await
                .with_context(|| format!("cannot delete outpost {id}"))?;
            println!("deleted {id}");
            Ok(ExitCode::SUCCESS)
        }
        OutpostCommand::List(args) => {
            let client = admin_client(&args.connection)?;
            let outposts = client.outposts().await.context("cannot list outposts")?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&outposts)?);
            } else {
                print_outposts(&outposts);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_outposts(outposts: &[Outpost]) {
    println!(
        "{:<32} {:<20} {:<9} {:>7} {:>7}  DESCRIPTION",
        "ID", "NAME", "PLATFORM", "QUEUED", "CLAIMED"
    );
    for outpost in outposts {
        println!(
            "{:<32} {:<20} {:<9} {:>7} {:>7}  {}",
            outpost.metadata.outpost_id,
            outpost.spec.name,
            outpost.spec.platform.as_deref().unwrap_or("default"),
            outpost.status.queue_depth,
            outpost.status.active_claims,
            outpost.spec.description.as_deref().unwrap_or("")
        );
    }
}

fn overrides(args: &StartArgs) -> Overrides {
    Overrides {
        outpost: args.outpost.clone(),
        session: args.session.clone(),
        acceptor_id: args.acceptor_id.clone(),
        token: args.connection.token.clone(),
        once: args.once,
        api_url: args.connection.api_url.clone(),
        cache_dir: args.cache_dir.clone(),
        static_base_url: args.static_base_url.clone(),
        gateway_url: args.gateway_url.clone(),
        remote_binary_sha: args.remote_binary_sha.clone(),
        pty_bridge_port: args.pty_bridge_port,
        poll_interval_secs: args.poll_interval_secs,
    }
}

fn resolve_settings(
    connection: &ConnectionArgs,
    flags: Overrides,
) -> anyhow::Result<(crate::policy::OutpostPolicy, WorkerSettings)> {
    let policy = load_policy(connection.policy.as_deref())?;
    devin_bridge_policy::log::apply_policy_filter(policy.log.filter_or_default())?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let settings = WorkerSettings::resolve(&policy, &flags, |name| std::env::var(name).ok(), &cwd)?;
    Ok((policy, settings))
}

fn fleet_client(settings: &WorkerSettings) -> anyhow::Result<FleetClient> {
    let http = http_client().context("cannot set up TLS")?;
    Ok(FleetClient::new(
        http,
        settings.api.clone(),
        settings.token.clone(),
        settings.request_timeout,
        settings.max_response_bytes,
    ))
}

fn admin_client(connection: &ConnectionArgs) -> anyhow::Result<FleetClient> {
    let flags = Overrides {
        token: connection.token.clone(),
        api_url: connection.api_url.clone(),
        ..Overrides::default()
    };
    let (_, settings) = resolve_settings(connection, flags)?;
    fleet_client(&settings)
}

/// `devin-bridge outpost start`.
async fn start(args: StartArgs) -> anyhow::Result<ExitCode> {
    let (policy, settings) = resolve_settings(&args.connection, overrides(&args))?;
    if args.connection.token.is_some() {
        tracing::warn!("the token was given with --token: other local users can read it from the process list; prefer DEVIN_OUTPOSTS_TOKEN or token_file");
    }
    if let Some(port) = settings.pty_bridge_port {
        tracing::info!(port, "a PTY bridge port was set; this worker runs no PTY bridge of its own, so it is not used");
    }
    acceptor::private_dir(&settings.data_dir)?;
    std::fs::create_dir_all(&settings.work_dir)
        .with_context(|| format!("work directory {}", settings.work_dir.display()))?;
    let acceptor = match &settings.acceptor_id {
        Some(id) => id.clone(),
        None => acceptor::persisted_acceptor(&settings.data_dir)?,
    };
    let client = Arc::new(fleet_client(&settings)?);
    let fetcher = PublicFetcher::new(http_client()?, settings.request_timeout);
    let binaries = Arc::new(BinaryCache::open(
        settings.cache_dir.clone(),
        settings.static_base.clone(),
        settings.binary_suffix.clone(),
        fetcher,
    )?);
    let namespace_prefix = format!(
        "dbo-{}-",
        &hex::encode(sha2::Sha256::digest(acceptor.as_str().as_bytes()))[..8]
    );
    Namespace::delete_stale(&namespace_prefix).await;
    tracing::info!(acceptor_id = %acceptor, api = %settings.api.as_str(), work_dir = %settings.work_dir.display(), max_sessions = settings.max_sessions, "outpost worker starting");
    let settings = Arc::new(settings);
    let context = Arc::new(SessionContext {
        settings: settings.clone(),
        client: client.clone(),
        binaries,
        acceptor,
        namespace_prefix,
    });

    if let Some(session) = settings.session.clone() {
        let outcome = worker::serve_one(context, session.clone()).await?;
        tracing::info!(session = %session, ?outcome, api_requests = client.requests_sent(), "done");
        return Ok(match outcome {
            SessionOutcome::Completed
            | SessionOutcome::Ended
            | SessionOutcome::Stopped
            | SessionOutcome::ExitedUnconfirmed => ExitCode::SUCCESS,
            SessionOutcome::NotStarted(reason) | SessionOutcome::NotStartedHere(reason) => {
                eprintln!("devin-bridge: session {session} not served: {reason}");
                ExitCode::FAILURE
            }
            SessionOutcome::Crashed(_) | SessionOutcome::ClaimLost => ExitCode::FAILURE,
        });
    }

    let outpost =
        choose::resolve_outpost(&client, settings.outpost.as_deref(), &settings.platform).await?;
    tracing::info!(outpost = %outpost, "serving the outpost's queue");
    let framer = {
        let policy = policy.clone();
        let max_event_bytes = settings.max_event_bytes;
        tokio::task::spawn_blocking(move || ComponentFramer::load(&policy, max_event_bytes))
            .await
            .context("the sse component loader failed")??
    };
    let (events_tx, events_rx) = tokio::sync::mpsc::channel(1024);
    let reflector = Reflector {
        client: client.clone(),
        framer: Arc::new(framer),
        outpost: Some(outpost),
        idle_timeout: settings.watch_idle_timeout,
        poll_interval: settings.poll_interval,
    };
    let reflector = tokio::spawn(reflector.run(events_tx));
    let summary = Worker::new(context).run(events_rx, reflector).await?;
    tracing::info!(
        served = summary.served,
        completed = summary.completed,
        failed = summary.failed,
        api_requests = client.requests_sent(),
        "outpost worker stopped"
    );
    Ok(ExitCode::SUCCESS)
}
