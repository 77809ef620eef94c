//! The safeguard's fixtures show every kind of answer, so a swap candidate is held to each.

use devin_bridge_calls::TransformKind;
use devin_bridge_types::{CallVerdict, SafeguardOutcome, SafeguardStatus};

use crate::fixtures::fixtures;

#[test]
fn safeguard_fixtures_cover_flags_passes_citations_and_unavailable() {
    let mut flagged = 0;
    let mut passed = 0;
    let mut cited = 0;
    let mut unavailable = 0;
    for fixture in fixtures(TransformKind::Safeguard) {
        let status: SafeguardStatus =
            serde_json::from_value(fixture.case.expect["ok"].clone()).expect("a status");
        match status {
            SafeguardStatus::Available(verdicts) => {
                for verdict in verdicts {
                    if let CallVerdict::Evaluated(evaluation) = verdict.verdict {
                        match evaluation.outcome {
                            SafeguardOutcome::Flagged => flagged += 1,
                            SafeguardOutcome::NotFlagged => passed += 1,
                        }
                        cited += usize::from(evaluation.cited_rule.is_some());
                    }
                }
            }
            SafeguardStatus::Unavailable(_) => unavailable += 1,
            SafeguardStatus::Unsupported => {}
        }
    }
    assert!(flagged >= 8, "{flagged} flagged calls");
    assert!(passed >= 5, "{passed} passed calls");
    assert!(cited >= 2, "{cited} citations");
    assert!(unavailable >= 2, "{unavailable} unavailable answers");
}
