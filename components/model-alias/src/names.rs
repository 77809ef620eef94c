//! Spelling rules for model names: a leaf module, which every other module may use.

/// The provider prefix every model reference must carry.
pub const PREFIX: &str = "devin-cli-agentic/";

/// The comparison form of a model name: ASCII lowercase, `.` and `_` become `-`.
///
/// `devin models list` writes `swe-1.6` where ACP writes `swe-1-6`, and users type either.
/// Only ASCII is folded: Unicode case folding would let look-alikes such as the Kelvin sign
/// (`K`, which lowercases to `k`) match a real model name.
pub(crate) fn normalize(name: &str) -> String {
    name.chars()
        .map(|ch| match ch {
            '.' | '_' => '-',
            other => other.to_ascii_lowercase(),
        })
        .collect()
}

/// Routing pairings that pick a model on the caller's behalf (`adaptive`, `fusion-*`) are
/// not models: the bridge must know which model serves a turn, so they are refused as input.
pub(crate) fn is_routing_pairing(normalized: &str) -> bool {
    normalized == "adaptive" || normalized == "fusion" || normalized.starts_with("fusion-")
}

/// Longest piece of caller input echoed back in an error message.
const ECHO_LIMIT: usize = 80;

/// Caller input as it appears in error messages: bounded, so a huge `model` field cannot
/// inflate the error body. (JSON escaping happens where the message is rendered.)
pub(crate) fn echo(input: &str) -> String {
    match input.char_indices().nth(ECHO_LIMIT) {
        Some((cut, _)) => format!("{}...", &input[..cut]),
        None => input.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_folds_case_and_separators() {
        assert_eq!(normalize("swe-1.6"), "swe-1-6");
        assert_eq!(normalize("SWE_1_6"), "swe-1-6");
        assert_eq!(normalize("swe-1-6"), "swe-1-6");
        assert_eq!(normalize("GLM-5.2"), "glm-5-2");
        assert_eq!(normalize(""), "");
    }

    #[test]
    fn normalize_folds_ascii_only() {
        // U+212A KELVIN SIGN lowercases to `k` under Unicode rules; it must stay distinct.
        assert_ne!(normalize("\u{212A}imi-k3"), "kimi-k3");
        assert_eq!(normalize("ÉMILE"), "Émile");
    }

    #[test]
    fn routing_pairings() {
        for name in [
            "adaptive",
            "fusion",
            "fusion-swe-1-7",
            "fusion-kimi-k3-glm-5-2",
        ] {
            assert!(is_routing_pairing(name), "{name}");
        }
        for name in ["adaptive-2", "swe-fusion", "fusions", "swe-1-7"] {
            assert!(!is_routing_pairing(name), "{name}");
        }
    }

    #[test]
    fn echo_bounds_long_input() {
        assert_eq!(echo("swe-1-7"), "swe-1-7");
        let long = "é".repeat(200);
        let echoed = echo(&long);
        assert_eq!(echoed.chars().count(), ECHO_LIMIT + 3);
        assert!(echoed.ends_with("..."));
        assert_eq!(echo(&"x".repeat(ECHO_LIMIT)), "x".repeat(ECHO_LIMIT));
    }
}
