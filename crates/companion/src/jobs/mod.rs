//! Job records and their store: atomic private files, one lock per record, liveness of the
//! processes that claim running jobs, and the sweep of leftover run directories.

pub(crate) mod clock;
pub(crate) mod liveness;
pub(crate) mod lock;
pub(crate) mod record;
pub(crate) mod store;
pub(crate) mod sweep;

pub(crate) use liveness::ProcessStamp;
pub(crate) use record::{is_valid_job_id, Acceptance, AcceptanceSource, AcceptanceState, Delivery};
// Re-exported at the crate's root.
pub use record::{JobRecord, JobStatus, Role, RunMode};
pub use store::JobStore;
pub(crate) use store::StoreError;

#[cfg(test)]
mod tests;
