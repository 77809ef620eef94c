//! The records of the WIT `model-alias` interface.

use serde::{Deserialize, Serialize};
#[cfg(feature = "wasmtime")]
use wasmtime::component::{ComponentType, Lift, Lower};

/// A model reference resolved against the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(ComponentType, Lift, Lower),
    component(record)
)]
pub struct ResolvedModel {
    /// The family slug, verbatim from the catalog.
    pub family: String,
    /// The variant uid, verbatim from the catalog.
    #[cfg_attr(feature = "wasmtime", component(name = "model-uid"))]
    pub model_uid: String,
    /// The variant's display label (its uid when the catalog gives none).
    pub label: String,
    /// The uid normalised for ACP: ASCII lowercase, `.` and `_` become `-`.
    #[cfg_attr(feature = "wasmtime", component(name = "acp-id"))]
    pub acp_id: String,
}
