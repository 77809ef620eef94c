//! The client identity the bridge sends in `initialize.clientInfo`.
//!
//! The Devin service checks the ACP client's name when a prompt is sent, and answers every
//! prompt of a client it does not know with "Your Windsurf version is out of date". The
//! default is therefore the identity the Devin CLI is known to accept from its own editor
//! (`windsurf`, version `1.110.1`); an operator whose CLI wants another version sets it in the
//! policy. The identity is logged when an agent starts.

/// The client name the Devin service accepts.
pub const DEFAULT_CLIENT_NAME: &str = "windsurf";
/// The editor version known to pass the service's check.
pub const DEFAULT_CLIENT_VERSION: &str = "1.110.1";
/// Longest name or version accepted (characters).
const MAX_CHARS: usize = 64;

/// `clientInfo {name, version}` of `initialize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    pub name: String,
    pub version: String,
}

impl Default for ClientIdentity {
    fn default() -> Self {
        Self {
            name: DEFAULT_CLIENT_NAME.to_owned(),
            version: DEFAULT_CLIENT_VERSION.to_owned(),
        }
    }
}

/// A client name or version a policy may not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be 1 to {MAX_CHARS} printable ASCII characters without spaces")]
pub struct IdentityError {
    pub field: &'static str,
}

impl ClientIdentity {
    /// An identity from a policy's settings, each checked: non-empty, at most 64 printable
    /// ASCII characters, no spaces (it is sent verbatim and logged).
    pub fn new(name: &str, version: &str) -> Result<Self, IdentityError> {
        let check = |field: &'static str, value: &str| {
            let ok = !value.is_empty()
                && value.len() <= MAX_CHARS
                && value.bytes().all(|b| b.is_ascii_graphic());
            if ok {
                Ok(value.to_owned())
            } else {
                Err(IdentityError { field })
            }
        };
        Ok(Self {
            name: check("client_name", name)?,
            version: check("client_version", version)?,
        })
    }

    /// Whether this is the identity the service is known to accept.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl std::fmt::Display for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.name, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_identity_the_service_accepts() {
        let identity = ClientIdentity::default();
        assert_eq!(identity.name, "windsurf");
        assert_eq!(identity.version, "1.110.1");
        assert!(identity.is_default());
        assert_eq!(identity.to_string(), "windsurf/1.110.1");
    }

    #[test]
    fn names_and_versions_are_checked() {
        assert!(ClientIdentity::new("windsurf", "1.200.0").is_ok());
        assert_eq!(
            ClientIdentity::new("", "1").unwrap_err().field,
            "client_name"
        );
        assert_eq!(
            ClientIdentity::new("a b", "1").unwrap_err().field,
            "client_name"
        );
        assert_eq!(
            ClientIdentity::new("w", "1\n2").unwrap_err().field,
            "client_version"
        );
        assert!(ClientIdentity::new(&"x".repeat(65), "1").is_err());
        assert!(ClientIdentity::new("wïndsurf", "1").is_err());
    }
}
