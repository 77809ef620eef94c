//! Remembered answers of the model-alias component's `validate`.
//!
//! Every turn validates its request's model against the catalog, and a conversation names the
//! same model on every turn: `validate` is a pure function of the model reference and the
//! catalog, so the answer of the component in force, for the catalog in force, is kept. A
//! different component (a swap or a reload) or a different catalog (the live catalog
//! refreshed) starts over, and so does a full memo: it stays small whatever clients send.

use std::collections::HashMap;
use std::sync::Mutex;

use devin_bridge_types::Failure;

/// Answers kept at most (model references are few; a client that invents many just empties
/// the memo more often).
const MAX_ANSWERS: usize = 64;

/// The validation answers of one component for one catalog.
#[derive(Default)]
pub(crate) struct ValidationMemo {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The sha256 of the component that gave the answers.
    component: String,
    catalog: String,
    answers: HashMap<String, Result<String, Failure>>,
}

impl ValidationMemo {
    /// The answer kept for `reference`, when `component` gave it for `catalog`.
    pub(crate) fn get(
        &self,
        component: &str,
        catalog: &str,
        reference: &str,
    ) -> Option<Result<String, Failure>> {
        let state = self.lock();
        (state.component == component && state.catalog == catalog)
            .then(|| state.answers.get(reference).cloned())
            .flatten()
    }

    /// Keeps `answer`, which `component` gave for `reference` and `catalog`.
    pub(crate) fn put(
        &self,
        component: &str,
        catalog: &str,
        reference: String,
        answer: Result<String, Failure>,
    ) {
        let mut state = self.lock();
        if state.component != component
            || state.catalog != catalog
            || state.answers.len() >= MAX_ANSWERS
        {
            state.component = component.to_owned();
            state.catalog = catalog.to_owned();
            state.answers.clear();
        }
        state.answers.insert(reference, answer);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> Failure {
        Failure {
            code: "unknown_model".into(),
            message: "no such model".into(),
            status: 400,
            repairable: false,
        }
    }

    #[test]
    fn answers_are_kept_per_component_and_catalog() {
        let memo = ValidationMemo::default();
        assert_eq!(memo.get("c1", "cat", "swe"), None);
        memo.put("c1", "cat", "swe".into(), Ok("swe-1-7".into()));
        memo.put("c1", "cat", "gpt".into(), Err(refused()));
        assert_eq!(memo.get("c1", "cat", "swe"), Some(Ok("swe-1-7".into())));
        assert_eq!(memo.get("c1", "cat", "gpt"), Some(Err(refused())));
        // Another component or another catalog knows nothing yet.
        assert_eq!(memo.get("c2", "cat", "swe"), None);
        assert_eq!(memo.get("c1", "cat2", "swe"), None);
        // And an answer for them replaces what the old ones said.
        memo.put("c2", "cat", "swe".into(), Err(refused()));
        assert_eq!(memo.get("c1", "cat", "swe"), None);
        assert_eq!(memo.get("c2", "cat", "swe"), Some(Err(refused())));
    }

    #[test]
    fn a_full_memo_starts_over() {
        let memo = ValidationMemo::default();
        for n in 0..MAX_ANSWERS {
            memo.put("c", "cat", format!("m{n}"), Ok(String::new()));
        }
        assert!(memo.get("c", "cat", "m0").is_some());
        memo.put("c", "cat", "one more".into(), Ok(String::new()));
        assert_eq!(memo.get("c", "cat", "m0"), None);
        assert!(memo.get("c", "cat", "one more").is_some());
    }
}
