//! Devin's dialect: everything the Devin CLI says or needs beyond plain ACP, read and written
//! in this one module, so that a change in the CLI is one change here. Every mode goes through
//! it; nothing else in the workspace parses a Devin-specific shape.
//!
//! - [`identity`]: the `clientInfo` the bridge sends in `initialize`. The Devin service checks
//!   it when a prompt is sent and refuses clients it does not know.
//! - [`errors`]: `cognition.ai/errorKind`, `cognition.ai/retryable` and
//!   `cognition.ai/retryAfterSeconds` of JSON-RPC errors (and the texts of the refusal of an
//!   unknown client identity, of an unknown model and of a logged-out CLI) as typed
//!   [`AcpError`](crate::acp::AcpError)s.
//! - [`login`]: headless sign-in (`authenticate` with the `devin-browser` method and the API
//!   key in `_meta`) after either logged-out answer, never a browser flow.
//! - [`stopped`]: `_cognition.ai/agent_stopped`, whose cause decides a turn's outcome
//!   (a quota, a logged-out CLI, a content filter, a truncated output, a turn limit).
//! - [`notices`]: the CLI's own chatter (display-only message chunks, compaction notices, its
//!   log output), kept out of replies.
//! - [`usage`]: a turn's token counts (the turn's sums when reported, cached reads taken out of
//!   the input).
//! - [`tools`]: a tool call's name (`cognition.ai/inferenceToolName`, else
//!   `cognition.ai/toolName`).
//! - [`sessions`]: releasing a session the host no longer needs (`session/close` when
//!   advertised, else `session/delete`, else nothing).
//! - [`options`]: the session's config options: the model select, the `thought_level` select
//!   and effort expressed as a model variant (`swe-2-high`).
//! - [`account`]: the agent's own account of a turn (the facts above, gathered per turn by
//!   both ACP clients).
//! - [`stats`]: the model that really answered (`agent_stopped.stats.modelLabel`, or the
//!   `model` response dimension, found by its `uid`), and its display label compared with ids.
//! - [`observed`]: which of the dialect's facts a recorded exchange showed (for `doctor`).
//! - [`print`]: print mode (`devin -p`): its permission values and its error tail.
//!
//! Where the recorded behaviour of the CLI is uncertain, every recorded variant is accepted
//! and the one seen is logged.
//!
//! Never sent: `session/set_model` and `session/stop`. The real CLI does not answer either (a
//! client that waited would hang); a model is set with `session/set_config_option` or
//! `--model`, and a turn is stopped with the `session/cancel` notification.

pub mod account;
pub mod errors;
pub mod identity;
pub mod login;
pub mod notices;
pub mod observed;
pub mod options;
pub mod print;
pub mod sessions;
pub mod stats;
pub mod stopped;
pub mod tools;
pub mod usage;

pub use identity::ClientIdentity;
