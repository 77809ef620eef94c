//! Golden fixtures: every case in `tests/fixtures/<transform>/` (format in
//! `tests/fixtures/README.md`), answered by the native library through [`Call::run_native`],
//! must produce exactly its `expect`; and each transform's fixtures must show what its
//! component is held to (every call, every error code, the shapes of its answers).
//!
//! One binary for all transforms; a module per transform holds the checks only it makes.
//! To add a serializer or safeguard case, write the file without `expect` and run that
//! crate's `bless` example, which fills in the missing expectations.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod envelope;
mod fixtures;
mod model_alias;
mod safeguard;
mod serializer;
mod sse;

use devin_bridge_calls::fixture::answer_json;
use devin_bridge_calls::{Call, TransformKind};

use fixtures::fixtures;

/// At least this many fixtures for these transforms (one for any other): a directory that
/// loses its cases fails here.
const MINIMUM: [(TransformKind, usize); 5] = [
    (TransformKind::Serializer, 25),
    (TransformKind::Envelope, 30),
    (TransformKind::Sse, 12),
    (TransformKind::ModelAlias, 12),
    (TransformKind::Safeguard, 12),
];

fn minimum(kind: TransformKind) -> usize {
    MINIMUM
        .iter()
        .find(|(listed, _)| *listed == kind)
        .map_or(1, |(_, minimum)| *minimum)
}

#[test]
fn every_fixture_of_every_transform_matches_the_native_library() {
    let mut mismatches = Vec::new();
    let mut total = 0;
    for kind in TransformKind::ALL {
        let cases = fixtures(kind);
        assert!(
            cases.len() >= minimum(kind),
            "only {} {kind} fixtures",
            cases.len()
        );
        for fixture in &cases {
            let actual = answer_json(&fixture.case.call.run_native());
            if actual != fixture.case.expect {
                mismatches.push(format!(
                    "{kind}/{} ({}):\n  expected {}\n  actual   {actual}",
                    fixture.case.file, fixture.case.name, fixture.case.expect
                ));
            }
            total += 1;
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {total} fixtures differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// The answer of a call that answers text (a rendering, a listing): the text.
fn text_of(call: &Call) -> String {
    match call.run_native() {
        Ok(devin_bridge_calls::Output::Text(text)) => text,
        other => panic!("{call:?} answered {other:?}, not text"),
    }
}
