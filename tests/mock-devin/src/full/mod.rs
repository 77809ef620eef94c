//! What only the full agent (`mock-devin acp`, the stand-in for `devin acp` that companion mode
//! drives) has: its model catalog, its marker dialect, `config.json` and its permission rules,
//! and the session database. The reading loop and the turn loop are the summarizer's too
//! ([`crate::server`], [`crate::turn`]); the rules and markers are documented in the crate's
//! README.

pub(crate) mod catalog;
pub(crate) mod markers;
pub(crate) mod permissions;
pub(crate) mod store;
