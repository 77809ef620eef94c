//! `BRIDGE_*_MODEL` settings -> the model variables Claude Code reads.

use crate::catalog::Index;
use crate::failures;
use devin_bridge_types::Failure;

/// Bridge setting -> client variable, in output order.
const SETTINGS: [(&str, &str); 5] = [
    ("BRIDGE_PRIMARY_MODEL", "ANTHROPIC_MODEL"),
    ("BRIDGE_SONNET_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL"),
    ("BRIDGE_OPUS_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL"),
    ("BRIDGE_HAIKU_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"),
    ("BRIDGE_SUBAGENT_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"),
];

/// Claude Code's auto-compact window (in tokens). Set, it decides the window ahead of the
/// model's own (which Claude Code does not know for these models, so it assumes a million).
pub(crate) const WINDOW_VARIABLE: &str = "CLAUDE_CODE_AUTO_COMPACT_WINDOW";

/// Validates every setting and maps it. The first problem, in input order, is reported;
/// a setting given twice is refused rather than letting one silently win.
pub(crate) fn map(
    index: &Index<'_>,
    settings: &[(String, String)],
) -> Result<Vec<(String, String)>, Failure> {
    let mut values: [Option<&str>; SETTINGS.len()] = [None; SETTINGS.len()];
    let mut window: Option<u64> = None;
    for (name, value) in settings {
        let slot = SETTINGS
            .iter()
            .position(|(setting, _)| setting == name)
            .and_then(|position| values.get_mut(position))
            .ok_or_else(|| {
                failures::unknown_setting(name, &SETTINGS.map(|(setting, _)| setting))
            })?;
        if slot.is_some() {
            return Err(failures::duplicate_setting(name));
        }
        if value.trim().is_empty() {
            return Err(failures::empty_setting(name));
        }
        let target = crate::resolve::reference(index, value)
            .map_err(|failure| failures::in_setting(name, failure))?;
        // The smallest window of the models in use: compacting early is safe, late is not.
        if let Some(tokens) = target.variant.max_context_tokens {
            window = Some(window.map_or(tokens, |smallest: u64| smallest.min(tokens)));
        }
        *slot = Some(value);
    }
    let mut out: Vec<(String, String)> = SETTINGS
        .iter()
        .zip(values)
        .filter_map(|((_, variable), value)| Some(((*variable).to_owned(), value?.to_owned())))
        .collect();
    if let Some(tokens) = window {
        out.push((WINDOW_VARIABLE.to_owned(), tokens.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    const CATALOG: &str = r#"{"families":[
        {"slug":"swe-1-7","variants":[{"model_uid":"swe-1-7"},{"model_uid":"swe-1-7-lightning"}]},
        {"slug":"swe-1-6","aliases":["swe-1.6"],"variants":[{"model_uid":"swe-1-6"}]}]}"#;

    fn run(settings: &[(&str, &str)]) -> Result<Vec<(String, String)>, Failure> {
        let catalog = Catalog::parse(CATALOG)?;
        let settings: Vec<(String, String)> = settings
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        map(&Index::new(&catalog), &settings)
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn maps_in_table_order_keeping_values() {
        let out = run(&[
            (
                "BRIDGE_SUBAGENT_MODEL",
                "devin-cli-agentic/swe-1-7-lightning",
            ),
            ("BRIDGE_PRIMARY_MODEL", "devin-cli-agentic/swe-1-7"),
            ("BRIDGE_HAIKU_MODEL", "devin-cli-agentic/SWE_1_6"),
            ("BRIDGE_OPUS_MODEL", "devin-cli-agentic/swe-1.6"),
            ("BRIDGE_SONNET_MODEL", "devin-cli-agentic/swe-1-6"),
        ])
        .expect("valid");
        assert_eq!(
            out,
            pairs(&[
                ("ANTHROPIC_MODEL", "devin-cli-agentic/swe-1-7"),
                (
                    "ANTHROPIC_DEFAULT_SONNET_MODEL",
                    "devin-cli-agentic/swe-1-6"
                ),
                ("ANTHROPIC_DEFAULT_OPUS_MODEL", "devin-cli-agentic/swe-1.6"),
                ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "devin-cli-agentic/SWE_1_6"),
                (
                    "CLAUDE_CODE_SUBAGENT_MODEL",
                    "devin-cli-agentic/swe-1-7-lightning"
                ),
            ])
        );
    }

    #[test]
    fn the_smallest_stated_window_of_the_mapped_models_is_the_auto_compact_window() {
        const WINDOWS: &str = r#"{"families":[
            {"slug":"big","variants":[{"model_uid":"big","max_context_tokens":262144}]},
            {"slug":"small","variants":[{"model_uid":"small","max_context_tokens":200000}]},
            {"slug":"silent","variants":[{"model_uid":"silent","max_context_tokens":"lots"}]}]}"#;
        let catalog = Catalog::parse(WINDOWS).expect("catalog");
        let index = Index::new(&catalog);
        let settings = |list: &[(&str, &str)]| -> Vec<(String, String)> { pairs(list) };
        let out = map(
            &index,
            &settings(&[
                ("BRIDGE_PRIMARY_MODEL", "devin-cli-agentic/big"),
                ("BRIDGE_HAIKU_MODEL", "devin-cli-agentic/small"),
                ("BRIDGE_SUBAGENT_MODEL", "devin-cli-agentic/silent"),
            ]),
        )
        .expect("valid");
        assert_eq!(
            out.last(),
            Some(&(WINDOW_VARIABLE.to_owned(), "200000".to_owned()))
        );
        let out = map(
            &index,
            &settings(&[("BRIDGE_PRIMARY_MODEL", "devin-cli-agentic/big")]),
        )
        .expect("valid");
        assert_eq!(
            out.last(),
            Some(&(WINDOW_VARIABLE.to_owned(), "262144".to_owned()))
        );
        // No stated window: no variable.
        let out = map(
            &index,
            &settings(&[("BRIDGE_PRIMARY_MODEL", "devin-cli-agentic/silent")]),
        )
        .expect("valid");
        assert_eq!(out.len(), 1, "{out:?}");
    }

    #[test]
    fn only_given_settings_and_none_is_fine() {
        assert_eq!(run(&[]).unwrap(), pairs(&[]));
        assert_eq!(
            run(&[("BRIDGE_SONNET_MODEL", "devin-cli-agentic/swe-1-6")]).unwrap(),
            pairs(&[(
                "ANTHROPIC_DEFAULT_SONNET_MODEL",
                "devin-cli-agentic/swe-1-6"
            )])
        );
    }

    #[test]
    fn errors() {
        let cases: [(&[(&str, &str)], &str); 7] = [
            (
                &[("BRIDGE_FAST_MODEL", "devin-cli-agentic/swe-1-7")],
                "unknown_model_setting",
            ),
            (
                &[("bridge_primary_model", "devin-cli-agentic/swe-1-7")],
                "unknown_model_setting",
            ),
            (&[("BRIDGE_PRIMARY_MODEL", "")], "empty_model_setting"),
            (&[("BRIDGE_PRIMARY_MODEL", "  ")], "empty_model_setting"),
            (
                &[("BRIDGE_PRIMARY_MODEL", "swe-1-7")],
                "missing_model_prefix",
            ),
            (
                &[("BRIDGE_PRIMARY_MODEL", "devin-cli-agentic/nope")],
                "unknown_model",
            ),
            (
                &[
                    ("BRIDGE_PRIMARY_MODEL", "devin-cli-agentic/swe-1-7"),
                    ("BRIDGE_PRIMARY_MODEL", "devin-cli-agentic/swe-1-6"),
                ],
                "duplicate_model_setting",
            ),
        ];
        for (settings, code) in cases {
            let failure = run(settings).expect_err(code);
            assert_eq!(failure.code, code, "{settings:?}");
            assert_eq!(failure.status, 400);
        }
    }

    #[test]
    fn value_failures_name_the_setting() {
        let failure = run(&[("BRIDGE_OPUS_MODEL", "devin-cli-agentic/adaptive")]).unwrap_err();
        assert_eq!(failure.code, "unsupported_model");
        assert!(
            failure.message.starts_with("`BRIDGE_OPUS_MODEL`: "),
            "{}",
            failure.message
        );
    }
}
