//! Which URLs the worker sends its token (or trusts a binary) to.
//!
//! `https` everywhere; plain `http` only to a loopback host, which is how the test rig and a
//! local reverse proxy run. Anything else is refused at start, before a token leaves.

use hyper::Uri;

/// Why a configured URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BaseUrlError {
    #[error("{what} {url:?} is not a valid absolute URL")]
    Malformed { what: &'static str, url: String },
    #[error("{what} {url:?} must use https (plain http is allowed only to a loopback host)")]
    Insecure { what: &'static str, url: String },
    #[error("{what} {url:?} must not carry a query, a fragment or credentials")]
    Decorated { what: &'static str, url: String },
}

/// A validated base URL without a trailing slash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BaseUrl(String);

impl BaseUrl {
    /// Validates `url` (`what` names it in errors).
    pub(crate) fn parse(what: &'static str, url: &str) -> Result<Self, BaseUrlError> {
        let trimmed = url.trim().trim_end_matches('/');
        let malformed = || BaseUrlError::Malformed {
            what,
            url: url.to_owned(),
        };
        if trimmed.contains(['?', '#', '@']) {
            return Err(BaseUrlError::Decorated {
                what,
                url: url.to_owned(),
            });
        }
        let uri: Uri = trimmed.parse().map_err(|_| malformed())?;
        let host = uri.host().ok_or_else(malformed)?;
        match uri.scheme_str() {
            Some("https") => {}
            Some("http") if is_loopback_host(host) => {}
            Some("http") => {
                return Err(BaseUrlError::Insecure {
                    what,
                    url: url.to_owned(),
                })
            }
            _ => return Err(malformed()),
        }
        Ok(Self(trimmed.to_owned()))
    }

    /// `base` + `path` (which starts with `/`).
    pub(crate) fn join(&self, path: &str) -> String {
        format!("{}{path}", self.0)
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// `localhost` or a loopback address (brackets around IPv6 allowed).
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.eq_ignore_ascii_case("localhost") {
        return true;
    }
    bare.parse::<std::net::IpAddr>()
        .map(|ip| ip.is_loopback())
        .unwrap_or(false)
}

/// Percent-encodes a query value.
pub(crate) fn query_value(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_anywhere_and_http_only_to_loopback() {
        assert!(BaseUrl::parse("api", "https://api.devin.ai/").is_ok());
        assert!(BaseUrl::parse("api", "http://127.0.0.1:8080").is_ok());
        assert!(BaseUrl::parse("api", "http://[::1]:8080").is_ok());
        assert!(BaseUrl::parse("api", "http://localhost:1").is_ok());
        for insecure in [
            "http://api.devin.ai",
            "http://10.0.0.1",
            "http://127.0.0.1.nip.io",
        ] {
            assert!(
                matches!(
                    BaseUrl::parse("api", insecure),
                    Err(BaseUrlError::Insecure { .. })
                ),
                "{insecure}"
            );
        }
        for bad in [
            "ftp://x",
            "api.devin.ai",
            "",
            "https://user:pw@api.devin.ai",
            "https://a?b=c",
        ] {
            assert!(BaseUrl::parse("api", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn trailing_slashes_do_not_double_up() {
        let base = BaseUrl::parse("api", "https://api.devin.ai//").expect("valid");
        assert_eq!(base.join("/opbeta"), "https://api.devin.ai/opbeta");
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(query_value("djE6MQ=="), "djE6MQ%3D%3D");
        assert_eq!(query_value("a+b/c"), "a%2Bb%2Fc");
    }
}
