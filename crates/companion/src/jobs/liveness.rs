//! Whether the process that claims a running job still exists, and ending a job's processes:
//! the job store's names for the agent crate's process stamps and group ending
//! (`devin_bridge_agent::process::group`), which own the pid-reuse guard (start time and boot
//! id) and the SIGTERM, grace, SIGKILL escalation.

pub(crate) use devin_bridge_agent::process::group::{end_orphaned_group, terminate, ProcessStamp};
