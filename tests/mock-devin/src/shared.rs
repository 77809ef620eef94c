//! What the reading loop and the turn threads share.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::log::Log;
use crate::profile::Profile;
use crate::rpc;

/// How long `[mock:late-close]` keeps the process alive after stdin ends.
pub(crate) const LATE_CLOSE: Duration = Duration::from_secs(60);

/// What the reading loop and the turn threads share.
pub(crate) struct Shared {
    pub out: rpc::Output,
    pub log: Log,
    pub profile: Profile,
    /// Set when a hanging turn starts: stdin EOF no longer ends the process.
    pub hanging: AtomicBool,
    /// Set by `[mock:late-close]`: stdin EOF ends the process only after [`LATE_CLOSE`].
    pub late_close: AtomicBool,
}
