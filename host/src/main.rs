//! `devin-bridge`: the command line of the trusted host.

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

mod builtin;
mod cli;
mod client_env;
mod policy;
mod report;
mod safeguard;

use devin_bridge_summarizer::policy::SummarizerPolicy;

#[derive(Debug, Parser)]
#[command(
    name = "devin-bridge",
    version,
    about = "Use a Devin account from other tools without giving anyone more reach than they need"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load a policy and serve it (summarizer: the Anthropic Messages endpoint).
    Serve(cli::ServeArgs),
    /// Check a summarizer policy's agent as `serve` runs it (CLI version, initialize, login,
    /// models, the dialect seen; `--prompt`: one real prompt) and print one line per check, or
    /// `--json` evidence; `--record FILE` writes the exchange as a redacted trace.
    Doctor(cli::DoctorArgs),
    /// Run an egress guard: a forward proxy that enforces an allowlist and audits every decision.
    Guard(devin_bridge_guard::GuardArgs),
    /// Check that this environment cannot reach Anthropic and leaks no credentials.
    VerifyIsolation(devin_bridge_guard::isolation::VerifyIsolationArgs),
    /// Inspect, check and hot-swap transform components.
    #[command(subcommand)]
    Components(cli::ComponentsCommand),
    /// Delegate tasks and reviews to the Devin CLI (the Claude Code plugin's helper).
    Companion(devin_bridge_companion::CompanionArgs),
    /// Serve Devin Outposts sessions from a fleet queue, and manage outposts.
    Outpost(devin_bridge_outpost::OutpostArgs),
    /// Print the shell `export` lines that point Claude Code at a bridge, with the operator's
    /// BRIDGE_*_MODEL settings checked against the catalog (`eval "$(devin-bridge client-env)"`).
    ClientEnv(client_env::ClientEnvArgs),
    /// Check the safeguard judge offline: `explain` judges one tool call against a context (a
    /// classifier context, a request body Claude Code sent, or the working directory) and
    /// prints the verdict, the rule and the `auto_mode.allow` entry that would let it run.
    #[command(subcommand)]
    Safeguard(safeguard::SafeguardCommand),
}

/// The async runtime a command needs. An outpost worker does little CPU work and many of them
/// may run per machine, so it gets two worker threads and a small blocking pool whatever the
/// core count (each thread costs memory). The keeper beside each worker's child runs on one
/// thread of its own (see `main`).
fn runtime_for(command: &Command) -> tokio::runtime::Builder {
    match command {
        Command::Outpost(_) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(2).max_blocking_threads(8);
            builder
        }
        _ => tokio::runtime::Builder::new_multi_thread(),
    }
}

/// Loads the policy `serve` runs and sets up identities: switches a root-started host to
/// `[server] user` and decides whether agents get their own uid. Runs before any thread exists.
fn serve_policy_and_identity(
    args: &cli::ServeArgs,
) -> anyhow::Result<(
    SummarizerPolicy,
    devin_bridge_agent::identity::AgentIdentity,
)> {
    let policy = policy::load_summarizer(&args.policy, "serve")?;
    let identity = devin_bridge_summarizer::startup::serve_identity(&policy)?;
    Ok((policy, identity))
}

/// The internal subcommands a worker starts from its own running image, dispatched before any
/// command line parsing: `keeper` (ends a worker's child group when the worker dies) and `gate`
/// (holds a worker's child until the keeper watches it). `None` for every other command line.
fn internal_subcommand(argv: &[std::ffi::OsString]) -> Option<std::process::ExitCode> {
    let usage = |usage: &str| {
        eprintln!("devin-bridge: {usage}");
        std::process::ExitCode::from(2)
    };
    // The keeper needs no command line parser, components or policy, only a log.
    if let Some(keeper) = devin_bridge_agent::process::keeper::KeeperArgs::from_command_line(argv) {
        cli::init_tracing();
        return Some(match keeper {
            Ok(args) => devin_bridge_agent::process::keeper::main(args),
            Err(text) => usage(text),
        });
    }
    // The gate writes nothing on success: its stdout and stderr are the program's, so it
    // starts no log.
    if let Some(gate) = devin_bridge_agent::process::gate::GateArgs::from_command_line(argv) {
        return Some(match gate {
            Ok(args) => devin_bridge_agent::process::gate::main(args),
            Err(text) => usage(text),
        });
    }
    None
}

fn main() -> std::process::ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = internal_subcommand(&argv) {
        return code;
    }
    builtin::install();
    let matches = Cli::command()
        .long_version(builtin::long_version())
        .get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    match &cli.command {
        // One-shot commands print their own report: routine log lines only when asked.
        Command::Doctor(args) => cli::init_tracing_one_shot(args.verbose),
        Command::ClientEnv(args) => cli::init_tracing_one_shot(args.verbose),
        Command::Safeguard(_) => cli::init_tracing_one_shot(0),
        _ => cli::init_tracing(),
    }
    // Identity changes (switching uid, keeping capabilities) act on the calling thread only
    // for capabilities, so they happen here, before the runtime starts any thread.
    // Doctor shows the identity notice as one of its checks instead of a line before them.
    let mut doctor_notice = None;
    let serving = match &cli.command {
        Command::Serve(args) => match serve_policy_and_identity(args) {
            Ok(serving) => Some(serving),
            Err(error) => {
                eprintln!("devin-bridge: {error:#}");
                return std::process::ExitCode::FAILURE;
            }
        },
        Command::Doctor(args) => {
            match policy::load_summarizer(&args.policy, "doctor").and_then(|policy| {
                let (identity, notice) =
                    devin_bridge_summarizer::startup::establish_identity(&policy)?;
                doctor_notice = notice;
                Ok((policy, identity))
            }) {
                Ok(serving) => Some(serving),
                Err(error) => {
                    eprintln!("devin-bridge doctor: {error:#}");
                    return std::process::ExitCode::FAILURE;
                }
            }
        }
        _ => None,
    };
    // Needs no async runtime, and must print nothing but its exports on stdout.
    if let Command::ClientEnv(args) = &cli.command {
        return client_env::run(args);
    }
    // Needs no async runtime either: one offline judgement.
    if let Command::Safeguard(command) = &cli.command {
        return safeguard::run(command);
    }
    let runtime = match runtime_for(&cli.command).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("devin-bridge: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => match serving {
                Some((policy, identity)) => {
                    devin_bridge_summarizer::startup::serve(
                        policy,
                        args.policy,
                        args.listen,
                        identity,
                    )
                    .await
                }
                None => Err(anyhow::anyhow!("no agent identity was established")),
            },
            Command::Doctor(args) => match serving {
                Some((policy, identity)) => {
                    cli::doctor(args, policy, identity, doctor_notice).await
                }
                None => Err(anyhow::anyhow!("no agent identity was established")),
            },
            Command::Guard(args) => devin_bridge_guard::run(args).await,
            Command::VerifyIsolation(args) => devin_bridge_guard::isolation::run(args).await,
            Command::Components(command) => cli::components(command).await,
            // Runs as the invoking user: no identity switch.
            Command::Companion(args) => devin_bridge_companion::main(args).await,
            // Runs as the invoking user: no identity switch.
            Command::Outpost(args) => devin_bridge_outpost::main(args).await,
            // Ran above, before the runtime started.
            Command::ClientEnv(_) | Command::Safeguard(_) => Ok(std::process::ExitCode::SUCCESS),
        }
    });
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("devin-bridge: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
