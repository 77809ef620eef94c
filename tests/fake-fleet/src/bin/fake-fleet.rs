//! `fake-fleet`: the fake fleet as a standalone server, for tests and benchmarks in another
//! process. Prints `{"api_url":..,"static_base_url":..,"gateway_url":..}` as one line on
//! stdout, then serves (the `/_control/` API included) until SIGINT or SIGTERM.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use devin_bridge_fake_fleet::{FakeFleet, FleetConfig};

#[derive(Parser)]
#[command(about = "An offline double of the Devin Outposts fleet API")]
struct Args {
    /// Where to listen (loopback only: the control API has no auth).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    #[arg(long)]
    machine_token: String,
    #[arg(long)]
    orchestrator_token: String,
    #[arg(long, default_value_t = 30)]
    claim_ttl_secs: u64,
    #[arg(long, default_value_t = 300)]
    stream_max_secs: u64,
    #[arg(long, default_value_t = 0)]
    session_status_lag_ms: u64,
    #[arg(long)]
    omit_gateway_url: bool,
    /// Send `: keepalive` on idle watch streams this often.
    #[arg(long)]
    keepalive_ms: Option<u64>,
    /// Do not repeat the last row of a list page as the first of the next.
    #[arg(long)]
    no_repeat_page_boundary_row: bool,
    #[arg(long, default_value_t = 0)]
    download_delay_ms: u64,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    if !args.listen.ip().is_loopback() {
        eprintln!("fake-fleet: --listen must be a loopback address");
        std::process::exit(2);
    }
    let config = FleetConfig {
        machine_token: args.machine_token,
        orchestrator_token: args.orchestrator_token,
        claim_ttl: Duration::from_secs(args.claim_ttl_secs),
        stream_max: Duration::from_secs(args.stream_max_secs),
        session_status_lag: Duration::from_millis(args.session_status_lag_ms),
        omit_gateway_url: args.omit_gateway_url,
        keepalive: args.keepalive_ms.map(Duration::from_millis),
        repeat_page_boundary_row: !args.no_repeat_page_boundary_row,
        download_delay: Duration::from_millis(args.download_delay_ms),
    };
    let fleet = FakeFleet::start_on(config, args.listen).await?;
    let line = serde_json::json!({
        "api_url": fleet.api_url(),
        "static_base_url": fleet.static_base_url(),
        "gateway_url": fleet.gateway_url(),
    });
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()?;
    drop(stdout);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    fleet.shutdown().await;
    Ok(())
}
