//! The records of the safeguard verdicts: what the `safeguard` interface answers for a reply's
//! tool calls, and what the `sse` interface renders as the reply's `safeguard_results`.
//!
//! The serde encoding is the golden fixtures' (like every type of this crate), not the
//! Anthropic wire shape: the SSE component writes that one (`{"type": "dangerous_tool_use",
//! "status": ...}`).

use serde::{Deserialize, Serialize};
#[cfg(feature = "wasmtime")]
use wasmtime::component::{ComponentType, Lift, Lower};

/// How the judge decided one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(variant)
)]
#[serde(rename_all = "snake_case")]
pub enum SafeguardOutcome {
    /// The call is blocked: the client does not run it, and the model is told why.
    #[cfg_attr(feature = "wasmtime", component(name = "flagged"))]
    Flagged,
    /// The call was positively proven harmless: the client runs it without asking.
    #[cfg_attr(feature = "wasmtime", component(name = "not-flagged"))]
    NotFlagged,
}

/// A call the judge evaluated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct Evaluation {
    pub outcome: SafeguardOutcome,
    /// One sentence a person understands; never contains the call's input verbatim beyond
    /// what names the problem (a path, a program name).
    pub explanation: String,
    /// The user's own rule that decided the call, as a path into the classifier context
    /// (`auto_mode.allow.2`, `auto_mode.soft_deny.0`); none when the judge's own rules did.
    #[cfg_attr(feature = "wasmtime", component(name = "cited-rule"))]
    pub cited_rule: Option<String>,
}

/// The verdict on one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(variant)
)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum CallVerdict {
    #[cfg_attr(feature = "wasmtime", component(name = "evaluated"))]
    Evaluated(Evaluation),
    /// Not judged (the client decides by itself).
    #[cfg_attr(feature = "wasmtime", component(name = "skipped"))]
    Skipped,
    /// Could not be judged; the reason is for the client's log.
    #[cfg_attr(feature = "wasmtime", component(name = "unavailable"))]
    Unavailable(String),
}

/// The verdict on the call with this `tool_use` id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct ToolVerdict {
    pub id: String,
    pub verdict: CallVerdict,
}

/// The answer to a request's `dangerous_tool_use` safeguard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(variant)
)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum SafeguardStatus {
    /// One verdict per call of the reply, in the reply's order (none for a text reply).
    #[cfg_attr(feature = "wasmtime", component(name = "available"))]
    Available(Vec<ToolVerdict>),
    /// This bridge does not judge: the client classifies by itself.
    #[cfg_attr(feature = "wasmtime", component(name = "unsupported"))]
    Unsupported,
    /// The judge could not run (for example, a malformed classifier context); the reason is
    /// for the client's log. The client falls back to its own check or asks.
    #[cfg_attr(feature = "wasmtime", component(name = "unavailable"))]
    Unavailable(String),
}
