use super::*;
use serde_json::json;

const VALID: &str = r#"{"verdict":"request_changes","summary":"Two problems.","findings":[{"severity":"high","file":"src/lib.rs","line":12,"title":"Unchecked index","body":"`v[i]` may panic."},{"severity":"info","file":"README.md","line":null,"title":"Typo","body":"teh"}]}"#;

fn ok(output: &str) -> String {
    parse_review(output).unwrap_or_else(|failure| panic!("{output:?} failed: {failure}"))
}

/// The failure of `output`, checked to be a non-repairable 502 with `code`.
fn rejected(output: &str, code: &str) -> Failure {
    let failure = parse_review(output).expect_err(output);
    assert_eq!(failure.code, code, "{output:?}: {}", failure.message);
    assert_eq!(failure.status, 502, "{output:?}");
    assert!(!failure.repairable, "{output:?}");
    failure
}

/// The `review_invalid` message of `output`, which must contain `says`.
fn invalid(output: &str, says: &str) -> String {
    let failure = rejected(output, "review_invalid");
    assert!(
        failure.message.contains(says),
        "{output:?}: {}",
        failure.message
    );
    failure.message
}

fn as_value(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON")
}

fn review_with(finding: Value) -> String {
    json!({"verdict": "approve", "summary": "s", "findings": [finding]}).to_string()
}

fn finding() -> Value {
    json!({"severity": "low", "file": "a.rs", "line": 3, "title": "t", "body": "b"})
}

fn finding_with(key: &str, value: Value) -> String {
    let mut finding = finding();
    finding[key] = value;
    review_with(finding)
}

fn finding_without(key: &str) -> String {
    let mut finding = finding();
    finding.as_object_mut().expect("object").remove(key);
    review_with(finding)
}

mod extraction {
    use super::*;

    #[test]
    fn a_bare_valid_object_comes_back_unchanged() {
        assert_eq!(ok(VALID), VALID);
    }

    #[test]
    fn prose_before_and_after_the_object_is_ignored() {
        let output = format!("Here is my review.\n\n{VALID}\n\nThanks!");
        assert_eq!(ok(&output), VALID);
    }

    #[test]
    fn an_object_inside_a_json_fence_is_found() {
        let output = format!("Review:\n```json\n{VALID}\n```\n");
        assert_eq!(ok(&output), VALID);
    }

    #[test]
    fn braces_in_prose_that_start_no_json_are_skipped() {
        let output = format!("Use `fn f() {{ x }}` and {{not json}} then {{\"a\" x}}: {VALID}");
        assert_eq!(ok(&output), VALID);
        assert_eq!(
            first_json_object("a { b {\"k\": 1} c"),
            Some("{\"k\": 1}"),
            "an unclosed brace does not hide a later object"
        );
    }

    #[test]
    fn braces_and_quotes_inside_strings_are_content() {
        let output = r#"{"verdict":"approve","summary":"keep } and { and \" and \\ and \"}\"","findings":[]}"#;
        assert_eq!(ok(output), output);
        assert_eq!(first_json_object(output), Some(output));
    }

    #[test]
    fn the_first_object_wins_even_when_it_is_not_a_review() {
        let output = format!("Config: {{\"debug\": true}}\n{VALID}");
        invalid(&output, "verdict is required");
    }

    #[test]
    fn no_object_is_review_missing() {
        for output in [
            "",
            "LGTM",
            "{ not json }",
            "[1, 2, 3]",
            "\"{\\\"verdict\\\":1}\"",
            "{\"verdict\": \"approve\"",
            "{\"a\": 1e400}",
        ] {
            let failure = rejected(output, "review_missing");
            assert_eq!(failure.message, "the review reply contains no JSON object");
        }
    }

    #[test]
    fn an_object_nested_too_deeply_is_not_complete() {
        let deep = "{\"a\":".repeat(MAX_SCAN_DEPTH + 1) + "1" + &"}".repeat(MAX_SCAN_DEPTH + 1);
        assert_ne!(first_json_object(&deep), Some(deep.as_str()));
        let fits = "{\"a\":".repeat(MAX_SCAN_DEPTH) + "1" + &"}".repeat(MAX_SCAN_DEPTH);
        assert_eq!(first_json_object(&fits), Some(fits.as_str()));
    }

    #[test]
    fn multibyte_text_before_the_object_is_skipped_on_char_boundaries() {
        let output = format!("Prüfung {{ßé}} ✓ {VALID} ü");
        assert_eq!(ok(&output), VALID);
    }
}

mod validation {
    use super::*;

    #[test]
    fn the_verdict_must_be_approve_or_request_changes() {
        invalid(
            r#"{"verdict":"lgtm","summary":"s","findings":[]}"#,
            "verdict must be one of \"approve\", \"request_changes\"",
        );
        invalid(
            r#"{"verdict":"Approve","summary":"s","findings":[]}"#,
            "verdict must be",
        );
        invalid(
            r#"{"verdict":true,"summary":"s","findings":[]}"#,
            "verdict must be",
        );
        invalid(r#"{"summary":"s","findings":[]}"#, "verdict is required");
    }

    #[test]
    fn the_summary_must_be_a_bounded_string() {
        invalid(
            r#"{"verdict":"approve","summary":1,"findings":[]}"#,
            "summary must be a string of at most 8192 characters",
        );
        invalid(
            r#"{"verdict":"approve","findings":[]}"#,
            "summary is required",
        );
        let at_limit = "é".repeat(MAX_SUMMARY_CHARS);
        let output = json!({"verdict": "approve", "summary": at_limit, "findings": []}).to_string();
        assert_eq!(
            as_value(&ok(&output)),
            as_value(&output),
            "the limit counts characters, not bytes"
        );
        let over = "a".repeat(MAX_SUMMARY_CHARS + 1);
        invalid(
            &json!({"verdict": "approve", "summary": over, "findings": []}).to_string(),
            "summary must be a string of at most 8192 characters",
        );
    }

    #[test]
    fn findings_must_be_an_array_of_at_most_200_objects() {
        invalid(
            r#"{"verdict":"approve","summary":"s","findings":{}}"#,
            "findings must be an array",
        );
        invalid(
            r#"{"verdict":"approve","summary":"s"}"#,
            "findings is required",
        );
        let many = |count: usize| {
            json!({"verdict": "approve", "summary": "s", "findings": vec![finding(); count]})
                .to_string()
        };
        let at_limit = many(MAX_FINDINGS);
        let accepted = as_value(&ok(&at_limit));
        assert_eq!(accepted, as_value(&at_limit));
        assert_eq!(
            accepted["findings"].as_array().map(Vec::len),
            Some(MAX_FINDINGS)
        );
        invalid(
            &many(MAX_FINDINGS + 1),
            "findings must hold at most 200 items (it holds 201)",
        );
        invalid(
            &json!({"verdict": "approve", "summary": "s", "findings": [finding(), finding(), "x"]})
                .to_string(),
            "findings[2] must be an object",
        );
    }

    #[test]
    fn the_severity_must_be_one_of_five() {
        for severity in ["critical", "high", "medium", "low", "info"] {
            ok(&finding_with("severity", json!(severity)));
        }
        invalid(
            &finding_with("severity", json!("blocker")),
            "findings[0].severity must be one of \"critical\", \"high\", \"medium\", \"low\", \"info\"",
        );
        invalid(
            &finding_without("severity"),
            "findings[0].severity is required",
        );
    }

    #[test]
    fn the_line_must_be_a_positive_integer_or_null() {
        for line in [json!(1), json!(null), json!(u64::MAX)] {
            ok(&finding_with("line", line));
        }
        for line in [
            json!(0),
            json!(-3),
            json!(2.5),
            json!(1.0),
            json!("12"),
            json!(1e30),
        ] {
            invalid(
                &finding_with("line", line.clone()),
                "findings[0].line must be an integer >= 1 or null",
            );
        }
        invalid(&finding_without("line"), "findings[0].line is required");
    }

    #[test]
    fn file_title_and_body_are_bounded_strings() {
        for key in ["file", "title", "body"] {
            ok(&finding_with(key, json!("x".repeat(MAX_FIELD_CHARS))));
            invalid(
                &finding_with(key, json!("x".repeat(MAX_FIELD_CHARS + 1))),
                &format!("findings[0].{key} must be a string of at most 4096 characters"),
            );
            invalid(
                &finding_with(key, json!(null)),
                &format!("findings[0].{key} must be a string"),
            );
            invalid(
                &finding_without(key),
                &format!("findings[0].{key} is required"),
            );
        }
    }

    #[test]
    fn the_first_bad_field_in_order_is_reported() {
        let output = json!({
            "verdict": "approve",
            "summary": "s",
            "findings": [finding(), {"severity": "x", "line": 0}]
        })
        .to_string();
        invalid(&output, "findings[1].severity");
        invalid(r#"{"verdict":"x","summary":1,"findings":1}"#, "verdict");
    }

    #[test]
    fn a_repeated_key_is_refused() {
        invalid(
            r#"{"verdict":"approve","verdict":"request_changes","summary":"s","findings":[]}"#,
            "repeats a key",
        );
        invalid(
            &review_with(json!(null)).replace(
                "null",
                r#"{"severity":"low","file":"a","line":1,"title":"t","title":"u","body":"b"}"#,
            ),
            "repeats a key",
        );
    }

    #[test]
    fn messages_never_quote_the_agents_text() {
        let secret = "SECRET-agent-text";
        for output in [
            format!(r#"{{"verdict":"{secret}","summary":"s","findings":[]}}"#),
            finding_with("severity", json!(secret)),
            finding_with("line", json!(secret)),
            format!(
                r#"{{"verdict":"approve","{secret}":1,"{secret}":2,"summary":"s","findings":[]}}"#
            ),
        ] {
            let failure = rejected(&output, "review_invalid");
            assert!(!failure.message.contains(secret), "{}", failure.message);
        }
    }

    #[test]
    fn a_text_over_one_mebibyte_is_too_large() {
        let padding = " ".repeat(MAX_TEXT_BYTES + 1 - VALID.len());
        let over = format!("{VALID}{padding}");
        assert_eq!(over.len(), MAX_TEXT_BYTES + 1);
        invalid(&over, "too large");
        let at_limit = &over[..MAX_TEXT_BYTES];
        assert_eq!(ok(at_limit), VALID);
    }
}

mod canonical_output {
    use super::*;

    #[test]
    fn unknown_fields_are_dropped_and_known_ones_ordered() {
        let output = r#"{"findings":[{"body":"b","extra":[1],"title":"t","line":7,"file":"f","severity":"medium"}],"note":{"x":1},"summary":"s","verdict":"approve"}"#;
        assert_eq!(
            ok(output),
            r#"{"verdict":"approve","summary":"s","findings":[{"severity":"medium","file":"f","line":7,"title":"t","body":"b"}]}"#
        );
    }

    #[test]
    fn whitespace_and_escapes_are_normalised() {
        let output = "{ \"verdict\" : \"approve\",\n  \"summary\": \"tab\\there \\u00e9 \\/ \\u0001\",\n  \"findings\": [ ] }";
        assert_eq!(
            ok(output),
            "{\"verdict\":\"approve\",\"summary\":\"tab\\there é / \\u0001\",\"findings\":[]}"
        );
    }
}

/// Generated reviews: whatever the formatting, extra fields and surrounding prose, the output
/// is canonical (it validates to itself) and holds the generated values.
mod property {
    use super::*;

    /// xorshift64*, so a failure reproduces.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len())]
        }
    }

    const PIECES: &[&str] = &[
        "a",
        "Z",
        " ",
        "{",
        "}",
        "[",
        "]",
        "\"",
        "\\",
        "\n",
        "\t",
        "\u{1}",
        "\u{7f}",
        "é",
        "✓",
        "\u{2028}",
        "\u{1F600}",
        "```",
        "</tool>",
        ":",
        ",",
        "null",
    ];

    fn text(rng: &mut Rng, max: usize) -> String {
        (0..rng.below(max + 1)).map(|_| *rng.pick(PIECES)).collect()
    }

    fn review(rng: &mut Rng) -> Value {
        let findings: Vec<Value> = (0..rng.below(5))
            .map(|_| {
                let mut finding = json!({
                    "severity": *rng.pick(&SEVERITIES),
                    "file": text(rng, 6),
                    "line": if rng.below(3) == 0 { Value::Null } else { json!(1 + rng.below(100_000)) },
                    "title": text(rng, 6),
                    "body": text(rng, 12),
                });
                if rng.below(2) == 0 {
                    finding["extra"] = json!({"nested": [text(rng, 3)]});
                }
                finding
            })
            .collect();
        let mut review = json!({
            "verdict": *rng.pick(&VERDICTS),
            "summary": text(rng, 20),
            "findings": findings,
        });
        if rng.below(2) == 0 {
            review["confidence"] = json!(rng.below(100));
        }
        review
    }

    /// Prose that holds no complete JSON object (it never closes a brace it opens).
    fn prose(rng: &mut Rng) -> String {
        text(rng, 10).replace('}', ")").replace('"', "'")
    }

    #[test]
    fn generated_reviews_come_out_canonical_and_validate_to_themselves() {
        let mut rng = Rng(0x5eed_cafe_f00d_0001);
        for round in 0..2000 {
            let value = review(&mut rng);
            let body = if rng.below(2) == 0 {
                serde_json::to_string_pretty(&value).expect("serializable")
            } else {
                value.to_string()
            };
            let output = match rng.below(3) {
                0 => body.clone(),
                1 => format!(
                    "{}\n```json\n{body}\n```\n{}",
                    prose(&mut rng),
                    text(&mut rng, 6)
                ),
                _ => format!("{} {body} {}", prose(&mut rng), text(&mut rng, 6)),
            };
            let canonical =
                parse_review(&output).unwrap_or_else(|f| panic!("round {round}: {f}\n{output}"));
            assert_eq!(
                parse_review(&canonical).as_deref(),
                Ok(canonical.as_str()),
                "round {round}: not a fixed point"
            );
            let parsed: Value = serde_json::from_str(&canonical).expect("canonical is JSON");
            let keys: Vec<&String> = parsed.as_object().expect("object").keys().collect();
            assert_eq!(keys.len(), 3, "round {round}: {canonical}");
            assert_eq!(parsed["verdict"], value["verdict"]);
            assert_eq!(parsed["summary"], value["summary"]);
            let findings = parsed["findings"].as_array().expect("array");
            assert_eq!(
                findings.len(),
                value["findings"].as_array().map_or(0, Vec::len)
            );
            for (got, want) in findings
                .iter()
                .zip(value["findings"].as_array().into_iter().flatten())
            {
                for key in ["severity", "file", "line", "title", "body"] {
                    assert_eq!(got[key], want[key], "round {round}: {key}");
                }
                assert!(got.get("extra").is_none(), "round {round}: extra kept");
            }
        }
    }

    #[test]
    fn mutated_texts_never_panic_and_fail_only_with_the_review_codes() {
        let mut rng = Rng(0x0bad_5eed_0002);
        for _ in 0..3000 {
            let mut output = review(&mut rng).to_string();
            for _ in 0..rng.below(4) {
                let at = rng.below(output.len() + 1);
                let piece = PIECES[rng.below(PIECES.len())];
                if output.is_char_boundary(at) {
                    output.insert_str(at, piece);
                }
            }
            match parse_review(&output) {
                Ok(canonical) => assert_eq!(parse_review(&canonical), Ok(canonical.clone())),
                Err(failure) => assert!(
                    ["review_missing", "review_invalid"].contains(&failure.code.as_str()),
                    "{failure}"
                ),
            }
        }
    }
}

mod bounds {
    use super::*;

    /// Texts built to make the scan re-read as much as possible: every attempt fails. Each is
    /// answered (no object: `review_missing`; the scan's budget spent: `review_invalid`).
    #[test]
    fn hostile_megabyte_texts_are_answered() {
        let near_limit = |unit: &str| unit.repeat((MAX_TEXT_BYTES - 512) / unit.len());
        for output in [
            near_limit("{"),
            near_limit("{\"a\":"),
            near_limit("{\"a\":["),
            "{\"a\":[".repeat(MAX_SCAN_DEPTH) + &near_limit("1,"),
            near_limit("{\"\\\"{"),
            near_limit("\"{\":"),
        ] {
            let label = &output[..8];
            let started = std::time::Instant::now();
            match parse_review(&output) {
                Err(failure) if failure.code == "review_missing" => {}
                Err(failure) if failure.code == "review_invalid" => {
                    assert!(
                        failure.message.contains("too much unfinished JSON"),
                        "{label}: {failure}"
                    );
                }
                other => panic!("{label}: unexpected {other:?}"),
            }
            eprintln!("{label:?}: {:?}", started.elapsed());
        }
    }

    #[test]
    fn the_scan_budget_is_spent_only_by_unfinished_objects() {
        let unfinished = "{\"a\":".repeat(MAX_SCAN_DEPTH + 1);
        let many = unfinished.repeat(MAX_TEXT_BYTES / 2 / unfinished.len());
        let failure = parse_review(&format!("{many} {VALID}")).expect_err("budget");
        assert_eq!(failure.code, "review_invalid");
        assert!(
            failure.message.contains("too much unfinished JSON"),
            "{failure}"
        );
        // A large but finished object costs one value per value, well within the budget.
        let numbers = vec![1; 400_000];
        let big = json!({"verdict": "approve", "summary": "s", "findings": [], "extra": numbers});
        assert!(ok(&big.to_string()).starts_with("{\"verdict\":\"approve\""));
    }
}
