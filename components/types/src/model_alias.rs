//! The records of the WIT `model-alias` interface.

use serde::{Deserialize, Serialize};

/// A model reference resolved against the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedModel {
    /// The family slug, verbatim from the catalog.
    pub family: String,
    /// The variant uid, verbatim from the catalog.
    pub model_uid: String,
    /// The variant's display label (its uid when the catalog gives none).
    pub label: String,
    /// The uid normalised for ACP: ASCII lowercase, `.` and `_` become `-`.
    pub acp_id: String,
}
