//! Host names: normalisation and the allowlist.
//!
//! A name is compared only after [`normalize_host`]: IDNA (UTS 46) mapping to lower-case
//! punycode, one trailing dot removed, every label checked as a DNS label (`[a-z0-9-]`, 1..=63
//! bytes, no leading or trailing hyphen), the whole at most 253 bytes. Anything that is, or
//! could be taken for, an IP address (dotted, bracketed IPv6, a last label that is a number such
//! as `2130706433` or `0x7f`, which `inet_aton` would read as an address) is an IP literal and is
//! refused while an allowlist is in force, which is always.
//!
//! Consequences, by decision: `API.DEVIN.AI` and `api.devin.ai.` are the same name as
//! `api.devin.ai` (they normalise to it), so they are allowed when it is; `api.devin.ai..` is
//! invalid. `*.devin.ai` matches any name ending in `.devin.ai` at any depth, never `devin.ai`
//! itself and never `evildevin.ai`.

use std::net::IpAddr;

/// Longest input considered before IDNA processing.
const MAX_RAW_LEN: usize = 1024;
/// Longest normalised name (RFC 1035, without the trailing dot).
const MAX_NAME_LEN: usize = 253;
/// Longest label.
const MAX_LABEL_LEN: usize = 63;

/// Why a host name was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// An IP address literal (or a name that a resolver would read as one).
    #[error("IP address literal")]
    IpLiteral,
    /// Not a valid DNS host name.
    #[error("invalid host name")]
    Invalid,
}

impl HostError {
    /// Stable audit reason.
    pub fn reason(self) -> &'static str {
        match self {
            HostError::IpLiteral => "ip_literal",
            HostError::Invalid => "invalid_host",
        }
    }
}

/// Normalise a host name for comparison (see the module docs). Never panics.
pub fn normalize_host(raw: &str) -> Result<String, HostError> {
    if raw.is_empty() || raw.len() > MAX_RAW_LEN {
        return Err(HostError::Invalid);
    }
    if raw.starts_with('[') || raw.parse::<IpAddr>().is_ok() {
        return Err(HostError::IpLiteral);
    }
    let trimmed = raw.strip_suffix('.').unwrap_or(raw);
    if trimmed.is_empty() || trimmed.ends_with('.') {
        return Err(HostError::Invalid);
    }
    let ascii = idna::domain_to_ascii_cow(trimmed.as_bytes(), idna::AsciiDenyList::STD3)
        .map_err(|_| HostError::Invalid)?;
    let name: &str = &ascii;
    if name.is_empty() || name.len() > MAX_NAME_LEN || name.parse::<IpAddr>().is_ok() {
        return Err(if name.parse::<IpAddr>().is_ok() {
            HostError::IpLiteral
        } else {
            HostError::Invalid
        });
    }
    let mut last = "";
    for label in name.split('.') {
        let bytes = label.as_bytes();
        if bytes.is_empty() || bytes.len() > MAX_LABEL_LEN {
            return Err(HostError::Invalid);
        }
        if !bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        {
            return Err(HostError::Invalid);
        }
        if bytes.first() == Some(&b'-') || bytes.last() == Some(&b'-') {
            return Err(HostError::Invalid);
        }
        last = label;
    }
    if label_is_number(last) {
        return Err(HostError::IpLiteral);
    }
    Ok(name.to_owned())
}

/// WHATWG "ends in a number": decimal digits, or `0x` followed by hex digits.
fn label_is_number(label: &str) -> bool {
    if !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    match label.strip_prefix("0x") {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => false,
    }
}

/// One allowlist entry, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// The name itself.
    Exact(String),
    /// Any name ending in this suffix; stored with its leading dot (`.devin.ai`).
    Suffix(String),
}

/// Exact names and `*.suffix` patterns. Empty denies everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    patterns: Vec<Pattern>,
}

impl Allowlist {
    /// Parse entries; on error returns the offending entry and why.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, (String, &'static str)> {
        let mut patterns = Vec::with_capacity(entries.len());
        for entry in entries {
            let entry = entry.as_ref();
            let pattern = if let Some(suffix) = entry.strip_prefix("*.") {
                let name = normalize_host(suffix).map_err(|e| (entry.to_owned(), e.reason()))?;
                Pattern::Suffix(format!(".{name}"))
            } else {
                if entry.contains('*') {
                    return Err((entry.to_owned(), "wildcard only as a leading `*.`"));
                }
                Pattern::Exact(normalize_host(entry).map_err(|e| (entry.to_owned(), e.reason()))?)
            };
            patterns.push(pattern);
        }
        Ok(Self { patterns })
    }

    /// Does this already-normalised name match an entry?
    pub fn matches(&self, normalized: &str) -> bool {
        self.patterns.iter().any(|p| match p {
            Pattern::Exact(name) => name == normalized,
            Pattern::Suffix(suffix) => {
                normalized.len() > suffix.len() && normalized.ends_with(suffix.as_str())
            }
        })
    }

    /// No entry: every destination is denied.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The entries.
    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devin() -> Allowlist {
        Allowlist::parse(&[
            "*.devin.ai",
            "*.cognition.ai",
            "devin.ai",
            "cognition.ai",
            "server.codeium.com",
            "unleash.codeium.com",
        ])
        .unwrap()
    }

    #[test]
    fn normalisation() {
        assert_eq!(normalize_host("API.Devin.AI").unwrap(), "api.devin.ai");
        assert_eq!(normalize_host("api.devin.ai.").unwrap(), "api.devin.ai");
        assert_eq!(
            normalize_host("bücher.example").unwrap(),
            "xn--bcher-kva.example"
        );
        assert_eq!(
            normalize_host("api\u{3002}devin.ai").unwrap(),
            "api.devin.ai"
        );
        for bad in [
            "",
            ".",
            "api.devin.ai..",
            "a..b",
            "-a.b",
            "a-.b",
            "a_b.c",
            "a b.c",
            "a/b.c",
            "user@a.b",
            "a.b:443",
            "a%2eb.c",
            "a\u{0}.b",
        ] {
            assert_eq!(normalize_host(bad), Err(HostError::Invalid), "{bad:?}");
        }
        let long = format!("{}.ai", "a".repeat(64));
        assert_eq!(normalize_host(&long), Err(HostError::Invalid));
        let too_long = ["abcdefghij"; 30].join(".");
        assert_eq!(normalize_host(&too_long), Err(HostError::Invalid));
    }

    #[test]
    fn ip_literals() {
        for lit in [
            "127.0.0.1",
            "::1",
            "[::1]",
            "[::ffff:127.0.0.1]",
            "::ffff:169.254.169.254",
            "2130706433",
            "0x7f000001",
            "0x7f.0.0.1",
            "127.1",
            "10.0.0.1.",
            "\u{ff11}\u{ff12}\u{ff17}.0.0.1",
        ] {
            assert_eq!(normalize_host(lit), Err(HostError::IpLiteral), "{lit:?}");
        }
        assert!(normalize_host("a.1b").is_ok());
    }

    #[test]
    fn allowlist_matching() {
        let a = devin();
        for ok in [
            "devin.ai",
            "api.devin.ai",
            "a.b.devin.ai",
            "cognition.ai",
            "x.cognition.ai",
            "server.codeium.com",
            "unleash.codeium.com",
        ] {
            assert!(a.matches(ok), "{ok}");
        }
        for no in [
            "evildevin.ai",
            "devin.ai.evil.example",
            "codeium.com",
            "x.codeium.com",
            "api.anthropic.com",
            "claude.ai",
            "ai",
            "devin.aii",
        ] {
            assert!(!a.matches(no), "{no}");
        }
        assert!(Allowlist::default().is_empty());
        assert!(!Allowlist::default().matches("devin.ai"));
    }

    #[test]
    fn bad_patterns() {
        for bad in ["*", "*.", "a.*.b", "*a.b", "1.2.3.4", "*.1.2.3.4", "x..y"] {
            assert!(Allowlist::parse(&[bad]).is_err(), "{bad}");
        }
    }
}
