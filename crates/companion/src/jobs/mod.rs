//! Job records and their store: atomic private files, one lock per record, liveness of the
//! processes that claim running jobs, and the sweep of leftover run directories.

pub mod clock;
pub mod liveness;
pub mod lock;
pub mod record;
pub mod store;
pub mod sweep;

pub use liveness::ProcessStamp;
pub use lock::{LockError, RecordLock, LOCK_WAIT};
pub use record::{
    is_valid_job_id, new_job_id, title_of, Acceptance, AcceptanceSource, AcceptanceState, Delivery,
    JobRecord, JobStatus, Role, RunMode,
};
pub use store::{JobStore, StoreError};

#[cfg(test)]
mod tests;
