//! Summarizer mode: an Anthropic Messages endpoint answered by the tool-less `summarizer` ACP
//! agent. The host moves bytes, runs processes and enforces limits; every transform of the
//! request and the reply runs in a wasm component.
//!
//! The root only declares the modules and re-exports the API; the mode's state is
//! [`Bridge`] (`bridge`), which owns its parts and hands each stage the parts it uses, and no
//! module reaches back into the root.

mod admission;
mod auth;
mod body;
mod bridge;
mod calls;
mod catalog;
pub mod control;
mod conversation;
pub mod doctor;
mod failures;
mod http;
mod metrics;
pub mod policy;
mod pool;
mod prepare;
mod reload;
mod reply;
mod resends;
mod resident;
mod respond;
mod safeguard;
pub mod sandbox;
mod serialize;
mod sessions;
mod shown;
mod side_requests;
pub mod startup;
mod streamed;
mod turn;
mod window;

pub use auth::{read_key_file, ApiKey, KeyError};
pub use bridge::{AgentInfo, Bridge};
pub use calls::INLINE_INPUT_BYTES;
pub use conversation::{AGENT_HEADER, SESSION_HEADER};
pub use http::serve;
pub use resident::{Resident, Snapshot as ResidentSnapshot};
pub use streamed::COALESCE_BYTES;
