//! The text a streamed turn has made certain so far, shared by every request that shares the
//! turn (the one that started it and resends joined to it).
//!
//! Invariants: the text only grows (what was shown stays shown, a repair included), and every
//! request that joins reads it from the start, so a joined resend gets the whole stream so far,
//! then the rest. The text is bounded by the agent's output cap (it is a prefix-preserving
//! selection of the turn's output, plus at most one separator before a repair's text).

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

/// The message text of a turn, as far as it is certain.
pub(crate) struct Shown {
    text: Mutex<String>,
    /// The text's length in bytes, for waiters to wake on.
    length: watch::Sender<usize>,
}

impl std::fmt::Debug for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shown").field("len", &self.len()).finish()
    }
}

impl Shown {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            text: Mutex::new(String::new()),
            length: watch::Sender::new(0),
        })
    }

    /// Appends `piece` (nothing happens for an empty one).
    pub(crate) fn append(&self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        let length = {
            let mut text = self.text.lock().unwrap_or_else(PoisonError::into_inner);
            text.push_str(piece);
            text.len()
        };
        self.length.send_replace(length);
    }

    pub(crate) fn len(&self) -> usize {
        *self.length.borrow()
    }

    /// The text from byte `from` on (empty when `from` is not below the length or not on a
    /// character boundary: a caller passes only lengths it read, which are boundaries).
    pub(crate) fn since(&self, from: usize) -> String {
        let text = self.text.lock().unwrap_or_else(PoisonError::into_inner);
        text.get(from..).unwrap_or_default().to_owned()
    }

    /// The whole text so far.
    pub(crate) fn text(&self) -> String {
        self.since(0)
    }

    /// Wakes on every change of the length.
    pub(crate) fn subscribe(&self) -> watch::Receiver<usize> {
        self.length.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_reader_gets_everything_from_the_start_then_the_rest() {
        let shown = Shown::new();
        shown.append("Hello, ");
        shown.append("");
        let late = shown.subscribe();
        assert_eq!(shown.since(0), "Hello, ");
        let read = shown.len();
        shown.append("wörld");
        assert!(late.has_changed().unwrap_or(false));
        assert_eq!(shown.since(read), "wörld");
        assert_eq!(shown.text(), "Hello, wörld");
        assert_eq!(shown.since(100), "");
    }
}
