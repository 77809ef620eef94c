//! Signing an agent in without a person: when `session/new` answers that the account is not
//! authenticated, the bridge authenticates once with an API-key method the agent advertises,
//! and only when the key reaches the agent through its environment; then it asks once more.
//! A browser or terminal flow is never started: a bridge has nobody to complete it.

use agent_client_protocol_schema::v1;

use crate::process::Spec;

/// The environment variable that lets the agent authenticate without a browser.
pub const API_KEY_VARIABLE: &str = "WINDSURF_API_KEY";

/// Whether `spec` gives its agent a non-empty API key.
pub fn has_api_key(spec: &Spec) -> bool {
    spec.env
        .iter()
        .any(|(name, value)| name == API_KEY_VARIABLE && !value.is_empty())
}

/// The agent's own API-key authentication method, if it advertises one (never a browser or
/// terminal method, whatever else its id says).
fn api_key_method(initialized: &v1::InitializeResponse) -> Option<String> {
    initialized
        .auth_methods
        .iter()
        .filter_map(|method| match method {
            v1::AuthMethod::Agent(agent) => Some(agent.id.0.to_string()),
            _ => None,
        })
        .find(|id| {
            let id = id.to_ascii_lowercase();
            (id.contains("api-key") || id.contains("api_key") || id.contains("apikey"))
                && !id.contains("browser")
        })
}

/// The method to sign in with after an agent answered that its account is not authenticated:
/// only when its key reached it (`api_key`) and it offers an API-key method. Logs the attempt.
pub(crate) fn sign_in_method(
    initialized: Option<&v1::InitializeResponse>,
    api_key: bool,
    pid: i32,
) -> Option<String> {
    let method = initialized.filter(|_| api_key).and_then(api_key_method)?;
    tracing::info!(%method, pid, "the agent needs authentication; authenticating with its API key method once");
    Some(method)
}
