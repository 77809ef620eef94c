//! Releasing a session the host no longer needs.
//!
//! The Devin CLI stores every session under the agent's home and prunes none of them. It
//! advertises `sessionCapabilities: {list, delete, additionalDirectories}` and no `close`; other
//! ACP agents advertise `close`. A session is released with `session/close` when the agent
//! advertises it, else with `session/delete`, else not at all.

use agent_client_protocol_schema::v1;
use serde_json::{json, Value};

/// How an agent lets the host release a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// `session/close` (frees the agent's memory of it).
    Close,
    /// `session/delete` (the Devin CLI: removes it from the agent's store).
    Delete,
    /// Neither is advertised: the session is left alone.
    Keep,
}

impl Release {
    /// What `initialized` advertises.
    pub fn of(initialized: &v1::InitializeResponse) -> Self {
        let value = serde_json::to_value(&initialized.agent_capabilities).unwrap_or(Value::Null);
        let advertised = |name: &str| {
            value
                .pointer(&format!("/sessionCapabilities/{name}"))
                .is_some_and(|capability| !capability.is_null())
        };
        if advertised("close") {
            Release::Close
        } else if advertised("delete") {
            Release::Delete
        } else {
            Release::Keep
        }
    }

    /// The request that releases `session`, if any.
    pub fn request(self, session: &str) -> Option<(&'static str, Value)> {
        let params = json!({ "sessionId": session });
        match self {
            Release::Close => Some(("session/close", params)),
            Release::Delete => Some(("session/delete", params)),
            Release::Keep => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn initialized(capabilities: Value) -> v1::InitializeResponse {
        serde_json::from_value(json!({
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": true, "sessionCapabilities": capabilities},
        }))
        .expect("initialize answer")
    }

    #[test]
    fn close_when_advertised_else_delete_else_nothing() {
        assert_eq!(
            Release::of(&initialized(json!({"close": {}}))),
            Release::Close
        );
        assert_eq!(
            Release::of(&initialized(json!({"close": {}, "delete": {}}))),
            Release::Close
        );
        // What the Devin CLI advertises.
        assert_eq!(
            Release::of(&initialized(
                json!({"list": {}, "delete": {}, "additionalDirectories": {}})
            )),
            Release::Delete
        );
        assert_eq!(
            Release::of(&initialized(json!({"list": {}}))),
            Release::Keep
        );
        assert_eq!(Release::of(&initialized(json!({}))), Release::Keep);
    }

    #[test]
    fn the_request_names_the_session() {
        assert_eq!(
            Release::Delete.request("s1"),
            Some(("session/delete", json!({"sessionId": "s1"})))
        );
        assert_eq!(Release::Keep.request("s1"), None);
    }
}
