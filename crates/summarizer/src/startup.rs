//! `devin-bridge serve`: start the summarizer's endpoint from a loaded policy: identities,
//! components, agent check, listener, control socket, SIGHUP reloads and a graceful stop.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};

use devin_bridge_agent::identity::{self, AgentIdentity, IdentityError, IdentityRequest};
use devin_bridge_engine::Transforms;
use devin_bridge_policy::ModePolicy;

use crate::bridge::Bridge;
use crate::control;
use crate::policy::SummarizerPolicy;
use crate::reload::Reloader;

/// The control socket a policy names, else the per-user default for the address the bridge
/// really listens on: `listen` when given (`serve --listen`), else the policy's own. Two
/// bridges started from one policy with different `--listen` thus get different sockets.
pub fn control_socket_path(policy: &SummarizerPolicy, listen: Option<&str>) -> PathBuf {
    policy
        .control
        .socket
        .as_ref()
        .map(|socket| policy.resolve(socket))
        .unwrap_or_else(|| control::default_socket_path(listen.unwrap_or(&policy.server.listen)))
}

/// Sets up identities for `serve`: switches a root-started host to `[server] user` and
/// decides whether agents get their own uid. Call before any thread exists.
pub fn serve_identity(policy: &SummarizerPolicy) -> Result<AgentIdentity, IdentityError> {
    let (identity, notice) = establish_identity(policy)?;
    if let Some(notice) = notice {
        eprintln!("devin-bridge: {notice}");
    }
    Ok(identity)
}

/// [`serve_identity`] without printing: the agents' identity and, when they share the host's,
/// the notice that says so (`doctor` makes it one of its checks).
pub fn establish_identity(
    policy: &SummarizerPolicy,
) -> Result<(AgentIdentity, Option<String>), IdentityError> {
    identity::establish(IdentityRequest {
        host_user: policy.server.user.as_deref(),
        agent_user: policy.agent.user.as_deref(),
        offline: policy.agent.offline,
    })
}

/// `devin-bridge serve`: load the policy's components, check the agent, then serve the
/// Anthropic Messages endpoint until SIGTERM (SIGHUP re-reads the policy file at
/// `policy_path`; see `reload`). `listen` overrides the policy's listen address.
pub async fn serve(
    policy: SummarizerPolicy,
    policy_path: PathBuf,
    listen: Option<String>,
    identity: AgentIdentity,
) -> anyhow::Result<ExitCode> {
    devin_bridge_policy::log::apply_policy_filter(policy.log.filter_or_default())?;
    let transforms = {
        let engine = policy.engine_config();
        tokio::task::spawn_blocking(move || Transforms::load(&engine))
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
    let listen = listen.unwrap_or_else(|| policy.server.listen.clone());
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let address = listener.local_addr()?;

    let socket = control_socket_path(&policy, Some(&listen));
    let control_listener = control::bind(&socket)?;
    eprintln!("control socket {}", socket.display());
    let control_task = tokio::spawn(control::serve(control_listener, transforms.clone()));
    let refill = tokio::spawn(bridge.pool().clone().run_refill());
    let reaper = bridge
        .resident()
        .cloned()
        .map(|resident| tokio::spawn(resident.run_reaper()));

    eprintln!(
        "listening on http://{address} (mode {}, policy {})",
        policy.mode,
        policy_path.display()
    );
    let shutdown = {
        let reloader = Reloader::new(policy_path.clone(), policy.clone(), transforms.clone());
        async move {
            if let Err(error) = wait_for_shutdown(reloader).await {
                tracing::error!(%error, "signal handling failed; shutting down");
            }
        }
    };
    crate::serve(
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
async fn wait_for_shutdown(mut reloader: Reloader) -> anyhow::Result<()> {
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
