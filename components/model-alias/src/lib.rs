//! Model references and the model catalog (`devin models list --format json`).
//!
//! Clients name models as `devin-cli-agentic/<id>`; `<id>` may be a variant uid, a family
//! slug or a family alias, spelled with `.`, `_` or `-` and in any ASCII case. Everything
//! here is a pure function of its arguments: the catalog is passed in as JSON text on every
//! call, so the transform holds no state and needs no clock or I/O.

// The table of the transforms' functions names each library by its crate name, this one too
// (the component crate's exports are made from it).
extern crate self as devin_bridge_model_alias;

mod catalog;
mod environment;
mod failures;
mod listing;
mod names;
mod resolve;

pub use devin_bridge_types::{Failure, ResolvedModel};

use catalog::{Catalog, Index};

pub use names::PREFIX;

/// Checks a `devin-cli-agentic/<id>` reference against the catalog and returns the ACP
/// model id of the variant it names.
///
/// The catalog is checked first, so a broken configuration (500) is reported whatever the
/// reference; then a reference without the exact, case-sensitive prefix is refused.
pub fn validate(reference: &str, catalog: &str) -> Result<String, Failure> {
    let catalog = Catalog::parse(catalog)?;
    Ok(resolve::reference(&Index::new(&catalog), reference)?
        .variant
        .acp_id())
}

/// Maps `BRIDGE_*_MODEL` settings to the variables Claude Code reads, validating each value.
///
/// Values keep their prefix (the client sends them back to us verbatim as `model`); the
/// output follows the order of the mapping table (primary, sonnet, opus, haiku, subagent)
/// and holds only the settings given. When any mapped model states its context window, a
/// last `CLAUDE_CODE_AUTO_COMPACT_WINDOW` carries the smallest: Claude Code does not know
/// these models, and without it assumes a window of a million tokens and compacts too late.
pub fn client_environment(
    settings: &[(String, String)],
    catalog: &str,
) -> Result<Vec<(String, String)>, Failure> {
    let catalog = Catalog::parse(catalog)?;
    environment::map(&Index::new(&catalog), settings)
}

/// Resolves a family slug, alias or variant uid (without the prefix) against the catalog.
pub fn resolve(requested: &str, catalog: &str) -> Result<ResolvedModel, Failure> {
    let catalog = Catalog::parse(catalog)?;
    let index = Index::new(&catalog);
    let target = resolve::resolve(&index, requested)?;
    Ok(target.resolved())
}

/// The `GET /v1/models` body for the catalog; `vision` says whether images reach the agent.
pub fn list_models(catalog: &str, vision: bool) -> Result<String, Failure> {
    let catalog = Catalog::parse(catalog)?;
    listing::render(&Index::new(&catalog), vision)
}

/// The context window of every model [`list_models`] lists whose catalog entry states one:
/// `(acp id, tokens)`, in catalog order.
pub fn context_windows(catalog: &str) -> Result<Vec<(String, u64)>, Failure> {
    let catalog = Catalog::parse(catalog)?;
    Ok(listing::windows(&Index::new(&catalog)))
}

#[cfg(test)]
mod tests;
