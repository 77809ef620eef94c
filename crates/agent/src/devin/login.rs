//! Signing an agent in without a person.
//!
//! The Devin CLI advertises one auth method, `devin-browser`. Headless, it takes the account's
//! API key in the method's `_meta`: `authenticate {methodId: "devin-browser", _meta: {api_key}}`.
//! A CLI that is not signed in says so in one of two ways, by version (see [`LoggedOut`]): it
//! refuses `session/new` with `-32000` "ACP host has not authenticated" (older CLIs), or it
//! accepts the session and refuses `session/prompt` with `-32603` "Authentication failed: ...
//! Run `/login` to log in." (newer ones). Either way the bridge authenticates once per agent
//! process, and only with a key the policy lets reach the agent (`WINDSURF_API_KEY` in the
//! agent's environment), and asks once more; a second refusal is final. Without a key the
//! method would open a browser, which nobody would complete: it is never called then, and the
//! caller gets a "not logged in" failure that says how to log the agent's home in.
//!
//! How the key reaches the CLI: the bridge passes `WINDSURF_API_KEY` to the agent only when the
//! mode's policy lets it through (the summarizer's `[agent] pass_env`; the companion passes it
//! when it is set), so the CLI sees it in its environment too. The real CLI reads
//! `WINDSURF_API_KEY` from its environment and **prefers it over its stored credentials**: a
//! stale key that reaches the agent wins over a good `devin auth login`. Let the key through
//! only when it is the one to use; an agent home that is logged in needs none.

use std::ffi::OsStr;

use agent_client_protocol_schema::v1;
use serde_json::{json, Value};

use crate::process::Spec;

/// The one auth method the Devin CLI advertises.
pub const LOGIN_METHOD: &str = "devin-browser";
/// The environment variable that carries the account's API key to the agent.
pub const API_KEY_VARIABLE: &str = "WINDSURF_API_KEY";

/// An API key on its way into one `authenticate` request. It never prints.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// The API key `spec` gives its agent, when it gives a non-empty one.
pub fn api_key(spec: &Spec) -> Option<ApiKey> {
    spec.env
        .iter()
        .find(|(name, _)| name == OsStr::new(API_KEY_VARIABLE))
        .and_then(|(_, value)| value.to_str())
        .filter(|value| !value.is_empty())
        .map(|value| ApiKey(value.to_owned()))
}

/// Which of the CLI's logged-out answers an agent gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoggedOut {
    /// `session/new` refused (`-32000`, older CLIs).
    AtSessionNew,
    /// `session/new` accepted, the prompt refused (`-32603` "Authentication failed", or a turn
    /// that ended with the `auth_required` cause: newer CLIs).
    AtPrompt,
}

impl LoggedOut {
    /// A short name for logs: `session_new` or `prompt`.
    pub fn label(self) -> &'static str {
        match self {
            LoggedOut::AtSessionNew => "session_new",
            LoggedOut::AtPrompt => "prompt",
        }
    }
}

/// Says in a log line which logged-out answer the agent gave.
pub fn log_variant(variant: LoggedOut, pid: i32) {
    tracing::info!(
        pid,
        refused = variant.label(),
        "the agent says it is not signed in"
    );
}

/// Whether the agent advertised the headless-capable login method.
pub fn offers_login(initialized: &v1::InitializeResponse) -> bool {
    initialized.auth_methods.iter().any(|method| match method {
        v1::AuthMethod::Agent(agent) => &*agent.id.0 == LOGIN_METHOD,
        _ => false,
    })
}

/// The `authenticate` params for a not-logged-in agent, or `None` when it cannot be signed
/// in headless (no key reached it, or it offers no `devin-browser` method). Logs the choice,
/// never the key.
pub fn sign_in_params(
    initialized: Option<&v1::InitializeResponse>,
    key: Option<&ApiKey>,
    pid: i32,
) -> Option<Value> {
    let offered = initialized.is_some_and(offers_login);
    match key {
        Some(ApiKey(key)) if offered => {
            tracing::info!(
                method = LOGIN_METHOD,
                pid,
                "the agent is not logged in; authenticating once with the API key"
            );
            Some(json!({ "methodId": LOGIN_METHOD, "_meta": { "api_key": key } }))
        }
        Some(_) => {
            tracing::warn!(pid, "the agent is not logged in and offers no `devin-browser` method; its API key cannot be used");
            None
        }
        None => {
            tracing::warn!(
                pid,
                "the agent is not logged in and no {API_KEY_VARIABLE} reaches it"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::time::Duration;

    fn spec(env: &[(&str, &str)]) -> Spec {
        Spec {
            program: "/bin/true".into(),
            args: Vec::new(),
            cwd: "/".into(),
            env: env
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            stderr_tail_bytes: 0,
            kill_grace: Duration::ZERO,
            identity: None,
        }
    }

    fn initialized(methods: &[&str]) -> v1::InitializeResponse {
        serde_json::from_value(json!({
            "protocolVersion": 1,
            "authMethods": methods.iter().map(|id| json!({"id": id, "name": id})).collect::<Vec<_>>(),
        }))
        .expect("initialize answer")
    }

    #[test]
    fn the_key_comes_from_the_agents_environment_only_when_non_empty() {
        assert_eq!(api_key(&spec(&[])), None);
        assert_eq!(api_key(&spec(&[(API_KEY_VARIABLE, "")])), None);
        assert_eq!(
            api_key(&spec(&[("OTHER", "k"), (API_KEY_VARIABLE, "k1")])),
            Some(ApiKey("k1".into()))
        );
        assert_eq!(
            format!("{:?}", ApiKey("secret".into())),
            "ApiKey(<redacted>)"
        );
    }

    #[test]
    fn sign_in_uses_devin_browser_with_the_key_in_meta() {
        let key = ApiKey("k1".into());
        let params =
            sign_in_params(Some(&initialized(&["devin-browser"])), Some(&key), 1).expect("params");
        assert_eq!(
            params,
            json!({"methodId": "devin-browser", "_meta": {"api_key": "k1"}})
        );
    }

    #[test]
    fn no_key_or_no_method_means_no_sign_in_and_never_a_browser() {
        assert_eq!(
            sign_in_params(Some(&initialized(&["devin-browser"])), None, 1),
            None
        );
        let key = ApiKey("k1".into());
        assert_eq!(
            sign_in_params(Some(&initialized(&["api-key", "oauth"])), Some(&key), 1),
            None
        );
        assert_eq!(sign_in_params(None, Some(&key), 1), None);
    }
}
