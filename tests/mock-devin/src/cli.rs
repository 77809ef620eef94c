//! What the command line's parts share: the version the agent reports, its exit statuses, and
//! the argument of the process `[mock:grandchild]` leaves behind. A leaf: it uses no other
//! module, so the modes that read these never loop back through `main`.

/// The CLI version `--version` reports (`initialize`'s `agentInfo` names the agent instead).
pub(crate) const AGENT_VERSION: &str = "3000.11.4";
/// The exit status of a command line the mock refuses (a flag the bridge must never pass).
pub(crate) const USAGE_EXIT: i32 = 64;
/// The exit status of a command line the CLI's argument parser refuses.
pub(crate) const ARGS_EXIT: i32 = 2;

/// `mock-devin --grandchild-sleep SECONDS`: what `[mock:grandchild]` leaves behind.
pub(crate) const GRANDCHILD_ARG: &str = "--grandchild-sleep";
