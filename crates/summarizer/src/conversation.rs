//! The conversation a request belongs to, read from its headers once, at the edge: the
//! conversation key the resident sessions and the resends are found by, and whether the
//! request named a subagent. Nothing after the edge reads these headers again.
//!
//! Invariants:
//! - A key is the session header, and the agent id when it has one, each part 1 to
//!   [`MAX_KEY_LEN`] visible ASCII characters; a request without a valid session header has no
//!   key, and an invalid agent id is ignored (the parent's key: the history check still keeps
//!   the two apart, at the cost of a fork).
//! - No pair of parts spells another pair's key, nor a parent's (the separator holds a space,
//!   which no part may contain): a subagent and its parent never share (rebuild, replay or
//!   fork) each other's session.
//! - A request is a subagent's when it carries the agent header at all, valid or not (what the
//!   turn is counted as).

use std::ops::Deref;

/// The request header that names a Claude Code conversation.
pub const SESSION_HEADER: &str = "x-claude-code-session-id";

/// The request header that names a subagent within a Claude Code conversation. A subagent
/// (the `Agent` tool) sends its parent's session header with its own agent id.
pub const AGENT_HEADER: &str = "x-claude-code-agent-id";

/// Longest key part accepted (a longer header is ignored, as if absent).
const MAX_KEY_LEN: usize = 128;

/// The separator between a session and an agent id in a key (holds spaces, which no part may
/// contain).
const AGENT_SEPARATOR: &str = " /agent ";

/// A valid conversation key (see the module's invariants). It reads as the text the sessions
/// and resends are keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ConversationKey(String);

impl ConversationKey {
    /// The key's text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The key of a subagent's parent conversation; none for a main conversation's key.
    pub(crate) fn parent(&self) -> Option<&str> {
        self.0.split_once(AGENT_SEPARATOR).map(|(parent, _)| parent)
    }
}

impl Deref for ConversationKey {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// What a request's headers say of its conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Conversation {
    /// The conversation key, when the request has a valid session header.
    pub(crate) key: Option<ConversationKey>,
    /// The request carries the agent header (valid or not): a subagent's turn.
    pub(crate) subagent: bool,
}

impl Conversation {
    /// Reads the request's conversation from its headers.
    pub(crate) fn of(headers: &hyper::HeaderMap) -> Self {
        Self {
            key: key_of(headers),
            subagent: headers.contains_key(AGENT_HEADER),
        }
    }

    /// The key's text, when the request has one.
    pub(crate) fn key_str(&self) -> Option<&str> {
        self.key.as_ref().map(ConversationKey::as_str)
    }
}

/// The conversation key of a request's headers (see the module's invariants).
fn key_of(headers: &hyper::HeaderMap) -> Option<ConversationKey> {
    let session = key_part(headers.get(SESSION_HEADER))?;
    Some(ConversationKey(match key_part(headers.get(AGENT_HEADER)) {
        Some(agent) => format!("{session}{AGENT_SEPARATOR}{agent}"),
        None => session,
    }))
}

/// One part of a conversation key: 1 to 128 visible ASCII characters, else none.
fn key_part(value: Option<&hyper::header::HeaderValue>) -> Option<String> {
    let text = value?.to_str().ok()?.trim();
    let valid = !text.is_empty()
        && text.len() <= MAX_KEY_LEN
        && text.bytes().all(|byte| byte.is_ascii_graphic());
    valid.then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &[u8])]) -> hyper::HeaderMap {
        let mut map = hyper::HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_bytes(value).expect("header"));
        }
        map
    }

    fn key(pairs: &[(&'static str, &[u8])]) -> Option<String> {
        Conversation::of(&headers(pairs))
            .key_str()
            .map(str::to_owned)
    }

    #[test]
    fn conversation_keys_are_short_visible_ascii_or_none() {
        let session = |text: &str| key(&[(SESSION_HEADER, text.as_bytes())]);
        assert_eq!(session("0f6c-uuid").as_deref(), Some("0f6c-uuid"));
        assert_eq!(session("  padded  ").as_deref(), Some("padded"));
        assert_eq!(
            session(&"x".repeat(MAX_KEY_LEN)).map(|k| k.len()),
            Some(MAX_KEY_LEN)
        );
        assert_eq!(session(&"x".repeat(MAX_KEY_LEN + 1)), None);
        assert_eq!(session(""), None);
        assert_eq!(session("two words"), None);
        assert_eq!(key(&[]), None);
        assert_eq!(key(&[(SESSION_HEADER, b"caf\xc3\xa9")]), None);
    }

    #[test]
    fn a_subagent_has_its_own_key_within_its_parents_session() {
        let parent = key(&[(SESSION_HEADER, b"s-1")]).expect("key");
        let child = key(&[
            (SESSION_HEADER, b"s-1"),
            (AGENT_HEADER, b"a3b342e5054e01ced"),
        ])
        .expect("key");
        let sibling =
            key(&[(SESSION_HEADER, b"s-1"), (AGENT_HEADER, b"b00000000000000")]).expect("key");
        assert_eq!(parent, "s-1");
        assert_ne!(child, parent);
        assert_ne!(child, sibling);
        // An agent id alone names no conversation; an invalid one is ignored.
        assert_eq!(key(&[(AGENT_HEADER, b"a-1")]), None);
        assert_eq!(
            key(&[(SESSION_HEADER, b"s-1"), (AGENT_HEADER, b"two words")]),
            Some(parent)
        );
    }

    #[test]
    fn any_agent_header_makes_a_subagent_request_whatever_its_key() {
        let of = |pairs: &[(&'static str, &[u8])]| Conversation::of(&headers(pairs)).subagent;
        assert!(of(&[(SESSION_HEADER, b"s-1"), (AGENT_HEADER, b"a-1")]));
        assert!(of(&[
            (SESSION_HEADER, b"s-1"),
            (AGENT_HEADER, b"two words")
        ]));
        assert!(of(&[(AGENT_HEADER, b"a-1")]));
        assert!(!of(&[(SESSION_HEADER, b"s-1")]));
        assert!(!of(&[]));
    }
}
