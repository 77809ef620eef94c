//! `safeguard_results`: the judge's verdicts in the shape Claude Code's auto mode reads, in the
//! final `message_delta`'s delta of a stream or at the top level of a JSON body.
//!
//! ```text
//! [{"type": "dangerous_tool_use",
//!   "status": {"type": "available", "tool_uses": {"<tool_use id>": <verdict>, ...}}}]
//! ```
//! `status` may instead be `{"type": "unsupported"}` or `{"type": "unavailable", "reason": …}`.
//! A verdict is `{"type": "evaluated", "outcome": "flagged" | "not_flagged", "explanation": …,
//! "cited_rule": {"type": "classifier_context", "path": …}}` (no `cited_rule` when none
//! decided it), `{"type": "skipped"}` or `{"type": "unavailable", "reason": …}`. The verdicts
//! keep the order the judge gave them (the reply's order); an id given twice keeps its first
//! verdict, so the object never holds a key twice.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, SerializeStruct, Serializer};

use devin_bridge_types::{CallVerdict, SafeguardOutcome, SafeguardStatus, ToolVerdict};

/// The whole `safeguard_results` value: a one-element array.
pub(crate) struct Results<'a>(pub(crate) &'a SafeguardStatus);

impl Serialize for Results<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut results = serializer.serialize_seq(Some(1))?;
        results.serialize_element(&Entry(self.0))?;
        results.end()
    }
}

/// The one entry: the `dangerous_tool_use` safeguard's status.
struct Entry<'a>(&'a SafeguardStatus);

impl Serialize for Entry<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut entry = serializer.serialize_struct("Safeguard", 2)?;
        entry.serialize_field("type", "dangerous_tool_use")?;
        entry.serialize_field("status", &Status(self.0))?;
        entry.end()
    }
}

struct Status<'a>(&'a SafeguardStatus);

impl Serialize for Status<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            SafeguardStatus::Available(verdicts) => {
                let mut status = serializer.serialize_struct("Status", 2)?;
                status.serialize_field("type", "available")?;
                status.serialize_field("tool_uses", &ToolUses(verdicts))?;
                status.end()
            }
            SafeguardStatus::Unsupported => {
                let mut status = serializer.serialize_struct("Status", 1)?;
                status.serialize_field("type", "unsupported")?;
                status.end()
            }
            SafeguardStatus::Unavailable(reason) => unavailable(serializer, reason),
        }
    }
}

fn unavailable<S: Serializer>(serializer: S, reason: &str) -> Result<S::Ok, S::Error> {
    let mut status = serializer.serialize_struct("Unavailable", 2)?;
    status.serialize_field("type", "unavailable")?;
    status.serialize_field("reason", reason)?;
    status.end()
}

struct ToolUses<'a>(&'a [ToolVerdict]);

impl Serialize for ToolUses<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (index, verdict) in self.0.iter().enumerate() {
            let repeated = self.0[..index].iter().any(|seen| seen.id == verdict.id);
            if !repeated {
                map.serialize_entry(&verdict.id, &Verdict(&verdict.verdict))?;
            }
        }
        map.end()
    }
}

struct Verdict<'a>(&'a CallVerdict);

impl Serialize for Verdict<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            CallVerdict::Evaluated(evaluation) => {
                let fields = 3 + usize::from(evaluation.cited_rule.is_some());
                let mut verdict = serializer.serialize_struct("Evaluated", fields)?;
                verdict.serialize_field("type", "evaluated")?;
                verdict.serialize_field(
                    "outcome",
                    match evaluation.outcome {
                        SafeguardOutcome::Flagged => "flagged",
                        SafeguardOutcome::NotFlagged => "not_flagged",
                    },
                )?;
                verdict.serialize_field("explanation", &evaluation.explanation)?;
                if let Some(path) = &evaluation.cited_rule {
                    verdict.serialize_field("cited_rule", &CitedRule(path))?;
                }
                verdict.end()
            }
            CallVerdict::Skipped => {
                let mut verdict = serializer.serialize_struct("Skipped", 1)?;
                verdict.serialize_field("type", "skipped")?;
                verdict.end()
            }
            CallVerdict::Unavailable(reason) => unavailable(serializer, reason),
        }
    }
}

struct CitedRule<'a>(&'a str);

impl Serialize for CitedRule<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut rule = serializer.serialize_struct("CitedRule", 2)?;
        rule.serialize_field("type", "classifier_context")?;
        rule.serialize_field("path", self.0)?;
        rule.end()
    }
}
