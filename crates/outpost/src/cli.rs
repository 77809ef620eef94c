//! `devin-bridge outpost ...`: the command line of outpost mode.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `devin-bridge outpost`.
#[derive(Debug, Args)]
pub struct OutpostArgs {
    #[command(subcommand)]
    pub command: OutpostCommand,
}

/// The outpost subcommands.
#[derive(Debug, Subcommand)]
pub enum OutpostCommand {
    /// Serve sessions from an outpost's queue: claim, fetch and verify devin-remote, run it
    /// with a clean environment, release. Run it from the directory sessions should work in.
    Start(StartArgs),
    /// Create an outpost (needs a token with the orchestrator scope); prints its id.
    Create(CreateArgs),
    /// Delete an outpost (needs a token with the orchestrator scope).
    Delete(DeleteArgs),
    /// List the account's outposts with their queue depth and active claims.
    List(ListArgs),
}

/// How to reach the fleet API (shared by every subcommand).
#[derive(Debug, Clone, Default, Args)]
pub struct ConnectionArgs {
    /// An outpost policy (`mode = "outpost"`); default: the built-in one.
    #[arg(long, env = "DEVIN_BRIDGE_POLICY")]
    pub policy: Option<PathBuf>,
    /// Fleet API token [env: DEVIN_OUTPOSTS_TOKEN]. Prefer the variable or the policy's
    /// `token_file`: other local users can read a process's arguments.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Devin API base URL [env: DEVIN_API_URL] (default https://api.devin.ai).
    #[arg(long, value_name = "URL")]
    pub api_url: Option<String>,
}

/// `outpost start`.
#[derive(Debug, Clone, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Only claim sessions of this outpost (name or id). Default: the account's only outpost;
    /// with several, asks which one when stdin is a terminal, else stops with their ids.
    #[arg(long, value_name = "NAME|ID")]
    pub outpost: Option<String>,
    /// Claim and serve this one session, then exit.
    #[arg(long, alias = "session-id", value_name = "ID")]
    pub session: Option<String>,
    /// Stable worker identity for claims and recovery [env: DEVIN_WORKER_ACCEPTOR_ID].
    /// Default: an id generated once and kept in the worker's data directory. Never share one
    /// between machines.
    #[arg(long, value_name = "ID")]
    pub acceptor_id: Option<String>,
    /// Exit after serving one session instead of returning to the queue.
    #[arg(long)]
    pub once: bool,
    /// Where devin-remote binaries are cached [env: DEVIN_WORKER_CACHE_DIR]
    /// (default ~/.devin/worker/cache).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Where devin-remote binaries are published [env: DEVIN_WORKER_STATIC_BASE_URL].
    #[arg(long, value_name = "URL")]
    pub static_base_url: Option<String>,
    /// Gateway URL when a claim answer has none [env: DEVIN_OUTPOST_GATEWAY_URL].
    #[arg(long, value_name = "URL")]
    pub gateway_url: Option<String>,
    /// devin-remote commit for sessions that pin none [env: DEVIN_WORKER_REMOTE_SHA];
    /// default: the latest published.
    #[arg(long, value_name = "SHA")]
    pub remote_binary_sha: Option<String>,
    /// A fixed PTY bridge port [env: DEVIN_PTY_BRIDGE_PORT]. This worker runs no PTY bridge of
    /// its own: the value is validated and logged only.
    #[arg(long, value_name = "PORT")]
    pub pty_bridge_port: Option<u16>,
    /// Seconds without a watch event after which the queue is listed again; also how often
    /// running sessions' entries are read (default 5).
    #[arg(long, value_name = "N")]
    pub poll_interval_secs: Option<u64>,
}

/// `outpost create`.
#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Unique outpost name in the account (e.g. `rhel`, `gpu-h200`).
    pub name: String,
    /// The machines' platform: linux, macos or windows.
    #[arg(long)]
    pub platform: String,
    /// A description shown in the web app.
    #[arg(long, default_value = "")]
    pub description: String,
}

/// `outpost delete`.
#[derive(Debug, Clone, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// The outpost id (`outpost_env-...`).
    pub outpost_id: String,
}

/// `outpost list`.
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// One JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}
