//! The context window of the model a request names, and the refusal of a request that does
//! not fit in it.
//!
//! The windows come from the catalog in force, as the model-alias component's
//! `context-windows` answers them (the catalog's `max_context_tokens` of each model
//! `/v1/models` lists, by ACP id): the host reads no catalog itself. A
//! request's size is the serializer's estimate of everything it sends the agent
//! (`input_tokens`, the same number `count_tokens` answers). A request over its model's window
//! is refused before any agent starts, with the status and wording (`prompt is too long: N
//! tokens > M maximum`) that make Claude Code compact the conversation and retry. A model whose
//! catalog entry states no window is never refused here.
//!
//! The table is rebuilt only when the catalog text changes (a live catalog refresh, a
//! reload); between changes a lookup costs one string comparison and one hash lookup.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use devin_bridge_engine::{EngineError, TransformCalls};
use devin_bridge_types::Failure;

use super::failures::HostFailure;

/// Context windows by ACP model id, for one catalog.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Windows(HashMap<String, u32>);

impl Windows {
    /// The windows `context-windows` answered, by ACP id. A zero window is no window (nothing
    /// fits in it, so it can only be a catalog's mistake); a window beyond `u32` is `u32::MAX`.
    pub(crate) fn from_pairs(pairs: Vec<(String, u64)>) -> Self {
        Self(
            pairs
                .into_iter()
                .filter(|(_, tokens)| *tokens > 0)
                .map(|(id, tokens)| (id, u32::try_from(tokens).unwrap_or(u32::MAX)))
                .collect(),
        )
    }

    /// The window of the model `validate` resolved to `acp_id`, if the catalog states one.
    pub(crate) fn of(&self, acp_id: &str) -> Option<u32> {
        self.0.get(acp_id).copied()
    }
}

/// The window table of the catalog in force, rebuilt when the catalog changes.
#[derive(Default)]
pub(crate) struct ModelWindows {
    cached: Mutex<Option<(String, Arc<Windows>)>>,
}

impl ModelWindows {
    /// The windows of `catalog`, asked of the model-alias component on a change. A catalog the
    /// component refuses gives no windows: nothing is refused for want of one (`validate`
    /// refuses the request on its own).
    pub(crate) fn of_catalog<T: TransformCalls + ?Sized>(
        &self,
        transforms: &T,
        catalog: &str,
    ) -> Result<Arc<Windows>, EngineError> {
        if let Some((text, windows)) = self.lock().as_ref() {
            if text == catalog {
                return Ok(windows.clone());
            }
        }
        let windows = Arc::new(match transforms.context_windows(catalog.to_owned())? {
            Ok(pairs) => Windows::from_pairs(pairs),
            Err(_) => Windows::default(),
        });
        *self.lock() = Some((catalog.to_owned(), windows.clone()));
        Ok(windows)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(String, Arc<Windows>)>> {
        self.cached
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `validate` of the request's `model` against `catalog`, then its input estimate against the
/// model's window: the checks a request passes before an agent is asked. Answers the ACP
/// model id the model resolved to.
pub(crate) fn admit<T: TransformCalls + ?Sized>(
    transforms: &T,
    windows: &ModelWindows,
    model: String,
    catalog: String,
    input_tokens: u32,
) -> Result<Result<String, Failure>, EngineError> {
    let acp_id = match transforms.validate_model(model, catalog.clone())? {
        Ok(acp_id) => acp_id,
        Err(failure) => return Ok(Err(failure)),
    };
    let window = windows.of_catalog(transforms, &catalog)?.of(&acp_id);
    Ok(match window {
        Some(window) if input_tokens > window => Err(too_long(input_tokens, window)),
        _ => Ok(acp_id),
    })
}

/// The refusal of a prompt over its window, in the wording clients react to by compacting.
pub(crate) fn too_long(input_tokens: u32, window: u32) -> Failure {
    HostFailure::PromptTooLong.with(format!(
        "prompt is too long: {input_tokens} tokens > {window} maximum"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answered_windows_are_kept_by_acp_id_without_zeros() {
        let windows = Windows::from_pairs(vec![
            ("swe-1-7".to_owned(), 256_000),
            ("zero".to_owned(), 0),
            ("huge".to_owned(), u64::MAX),
        ]);
        assert_eq!(windows.of("swe-1-7"), Some(256000));
        assert_eq!(windows.of("glm-5-2"), None, "no window stated");
        assert_eq!(windows.of("zero"), None, "a zero window is no window");
        assert_eq!(windows.of("huge"), Some(u32::MAX), "saturates");
    }

    #[test]
    fn the_refusal_is_a_400_in_the_wording_clients_compact_on() {
        let failure = too_long(300_001, 256_000);
        assert_eq!(failure.status, 400);
        assert_eq!(failure.code, "prompt_too_long");
        assert!(!failure.repairable);
        assert_eq!(
            failure.message,
            "prompt is too long: 300001 tokens > 256000 maximum"
        );
        assert_eq!(
            devin_bridge_types::error_type(failure.status),
            "invalid_request_error"
        );
    }
}
