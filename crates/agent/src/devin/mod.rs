//! Devin's dialect: everything the Devin CLI says or needs beyond plain ACP, read and written
//! in this one module, so that a change in the CLI is one change here. Every mode goes through
//! it; nothing else in the workspace parses a Devin-specific shape.
//!
//! - [`identity`]: the `clientInfo` the bridge sends in `initialize`. The Devin service checks
//!   it when a prompt is sent and refuses clients it does not know.
//! - [`errors`]: `cognition.ai/errorKind` and `cognition.ai/retryable` of JSON-RPC errors (and
//!   the refusal of an unknown client identity) as typed [`AcpError`](crate::acp::AcpError)s.
//! - [`login`]: headless sign-in (`authenticate` with the `devin-browser` method and the API
//!   key in `_meta`), never a browser flow.
//! - [`sessions`]: releasing a session the host no longer needs (`session/close` when
//!   advertised, else `session/delete`, else nothing).
//! - [`options`]: the session's config options: the model select, the `thought_level` select
//!   and effort expressed as a model variant (`swe-2-high`).
//! - [`stats`]: the model that really answered (`agent_stopped.stats.modelLabel`, or the
//!   `model` response dimension).
//! - [`observed`]: which of the dialect's facts a recorded exchange showed (for `doctor`).
//! - [`print`]: print mode (`devin -p`): its permission values and its error tail.
//!
//! Where the recorded behaviour of the CLI is uncertain, every recorded variant is accepted
//! and the one seen is logged.

pub mod errors;
pub mod identity;
pub mod login;
pub mod observed;
pub mod options;
pub mod print;
pub mod sessions;
pub mod stats;

pub use identity::ClientIdentity;
