//! The `GET /v1/models` body.

use serde::Serialize;

use crate::catalog::{Index, VariantRef};
use crate::failures;
use crate::names::PREFIX;
use crate::resolve::resolve;
use devin_bridge_types::Failure;

/// Transforms have no clock, and the catalog carries no dates; clients only display this
/// field, so a fixed timestamp keeps the answer a pure function of the catalog.
const CREATED_AT: &str = "2025-01-01T00:00:00Z";

#[derive(Serialize)]
struct ModelList<'a> {
    data: Vec<ModelCard<'a>>,
    has_more: bool,
    first_id: Option<String>,
    last_id: Option<String>,
}

#[derive(Serialize)]
struct ModelCard<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: String,
    display_name: &'a str,
    created_at: &'static str,
    capabilities: Capabilities,
    /// The catalog's `max_context_tokens`; absent when the catalog states none.
    #[serde(skip_serializing_if = "Option::is_none")]
    context_window: Option<u64>,
    /// The catalog's `max_output_tokens`; absent when the catalog states none.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u64>,
}

/// What the bridge offers, whatever the model: the client runs the tools, images reach the
/// agent only when it takes image prompts, and the summarizer agent does not expose reasoning.
#[derive(Serialize, Clone, Copy)]
struct Capabilities {
    tool_calling: bool,
    vision: bool,
    reasoning: bool,
}

/// One card per variant, in catalog order, with the variant's context window and output limit
/// when the catalog states them (clients size their conversations by `context_window`), listed only when its id validates back to that
/// very variant. That drops routing pairings and variants hidden by a normalized-name
/// collision, so a client never picks an id we would refuse, and it makes ids unique:
/// resolution maps an id to at most one variant.
pub(crate) fn render(index: &Index<'_>, vision: bool) -> Result<String, Failure> {
    let capabilities = Capabilities {
        tool_calling: true,
        vision,
        reasoning: false,
    };
    let data: Vec<ModelCard<'_>> = listed(index)
        .map(|(acp_id, at)| ModelCard {
            kind: "model",
            id: format!("{PREFIX}{acp_id}"),
            display_name: at.variant.label(),
            created_at: CREATED_AT,
            capabilities,
            context_window: at.variant.max_context_tokens,
            max_output_tokens: at.variant.max_output_tokens,
        })
        .collect();
    let list = ModelList {
        first_id: data.first().map(|card| card.id.clone()),
        last_id: data.last().map(|card| card.id.clone()),
        has_more: false,
        data,
    };
    // serde_json cannot fail on these types (string keys only, infallible impls); the error
    // path exists so that this function stays total.
    serde_json::to_string(&list).map_err(failures::internal)
}

/// The context window of every listed variant that states one: `(acp id, tokens)`, in the
/// listing's order.
pub(crate) fn windows(index: &Index<'_>) -> Vec<(String, u64)> {
    listed(index)
        .filter_map(|(acp_id, at)| Some((acp_id, at.variant.max_context_tokens?)))
        .collect()
}

/// The variants the listing shows, with their ACP ids: those whose id validates back to that
/// very variant.
fn listed<'i, 'a>(index: &'i Index<'a>) -> impl Iterator<Item = (String, &'i VariantRef<'a>)> {
    index.variants().iter().filter_map(move |at| {
        let acp_id = at.variant.acp_id();
        let resolved = resolve(index, &acp_id).ok()?;
        (resolved == *at).then_some((acp_id, at))
    })
}
