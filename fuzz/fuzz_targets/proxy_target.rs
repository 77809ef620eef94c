#![no_main]
//! Proxy targets and host names: `CONNECT` authorities, absolute-form URLs, and host
//! normalisation (IDNA, trailing dot, DNS label rules, IP literals) with allowlist matching.
//! Normalisation is idempotent and yields a DNS name that is never an IP address; the split
//! parts come from the input; userinfo is always refused.

use std::net::IpAddr;

use devin_bridge_guard::fuzzing::{
    check_host, normalize_host, split_authority, split_url, Allowlist, HostError,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };

    if let Ok((host, port)) = split_authority(text) {
        assert!(port != 0);
        assert!(text.starts_with(&host) && !host.is_empty());
    }
    if let Ok((host, port, path)) = split_url(text) {
        assert!(port != 0);
        assert!(text.contains(&host));
        assert!(!path.contains('#'));
        assert!(path.is_empty() || path.starts_with('/') || path.starts_with('?'));
        assert!(!host.contains('@'));
    }

    match check_host(text) {
        Err("userinfo_in_url") => assert!(text.contains('@')),
        Ok(_) => assert!(!text.contains('@')),
        Err(_) => {}
    }

    match normalize_host(text) {
        Ok(name) => {
            assert_eq!(normalize_host(&name), Ok(name.clone()), "not idempotent");
            assert!(!name.is_empty() && name.len() <= 253);
            assert!(name.parse::<IpAddr>().is_err());
            for label in name.split('.') {
                assert!((1..=63).contains(&label.len()), "{name:?}");
                assert!(label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
                assert!(!label.starts_with('-') && !label.ends_with('-'));
            }
            let allow = Allowlist::parse(&["*.devin.ai", "cognition.ai"]).expect("allowlist");
            let expected = name.ends_with(".devin.ai") || name == "cognition.ai";
            assert_eq!(allow.matches(&name), expected, "{name:?}");
        }
        Err(HostError::IpLiteral) | Err(HostError::Invalid) => {}
    }
    if text.parse::<IpAddr>().is_ok() {
        assert_eq!(normalize_host(text), Err(HostError::IpLiteral));
    }
});
