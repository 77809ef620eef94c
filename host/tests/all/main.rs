//! Every integration test of the `devin-bridge` binary and the crates behind it, in one test
//! binary (one link of the host instead of one per file); each module is one area.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod anthropic_sdk;
mod claude_code_e2e;
mod client_env;
mod companion_cli;
mod companion_plugin_e2e;
mod component_status;
mod compose;
mod deploy_manifests;
mod devin_cli;
mod differential;
mod doctor;
mod effort;
mod engine;
mod hot_swap;
mod identity;
mod images;
mod installed_tarball;
mod live_catalog;
mod outpost_admin;
mod outpost_keeper;
mod outpost_network;
mod outpost_polling;
mod outpost_worker;
mod preinitialised;
mod prose_replies;
mod resends;
mod resident;
mod safeguard_explain;
mod side_requests;
mod sighup;
mod sign_in;
mod streaming;
mod summarizer;
mod swap_under_load;
mod tool_calls_and_usage;
mod traces;
mod worker_gate;
