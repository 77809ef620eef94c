//! The user's own rules applied to one call: the deny side (`auto_mode.hard_deny`, then
//! `soft_deny`, then the permission rules' `deny` and `ask`) and the allow side
//! (`auto_mode.allow`), within a bounded number of rule checks. Used for file tools
//! ([`crate::tools`]) and shell lines ([`crate::line`]) alike.

use crate::context::Context;
use crate::rules::Facts;
use crate::verdict::{show, Decision};

/// What restricted mode lets through, for explanations.
pub(crate) const ALL_ONLY_READS: &str = "only reads of the trusted directories run without asking";

/// Most rule checks one call may need (rules x the commands and paths it has); past it the
/// call is flagged. The user's rules and the call are both bounded in size, but their product
/// is not small enough to leave unbounded.
pub(crate) const MAX_RULE_CHECKS: usize = 1_000_000;

/// The first matching deny-side rule, in the order of the module doc (and the budget of rule
/// checks, which every call passes through here first).
pub(crate) fn deny_side(facts: &Facts<'_>, ctx: &Context) -> Option<Decision> {
    let rules = ctx.hard_deny.len()
        + ctx.soft_deny.len()
        + ctx.deny.len()
        + ctx.ask.len()
        + ctx.allow.len();
    let items = 1
        + facts.commands.len()
        + facts.read_files.len()
        + facts.read_dirs.len()
        + facts.writes.len();
    if rules.saturating_mul(items) > MAX_RULE_CHECKS {
        return Some(Decision::flag(format!(
            "checking {items} commands and paths against the user's {rules} rules is more than the judge does"
        )));
    }
    for entry in ctx.hard_deny.iter().chain(&ctx.soft_deny) {
        if entry
            .rule
            .as_ref()
            .is_some_and(|rule| rule.denies(facts, ctx))
        {
            return Some(
                Decision::flag(format!(
                    "matches the user's rule {} (`{}`)",
                    entry.path,
                    show(&entry.text)
                ))
                .cite(entry.path.clone()),
            );
        }
    }
    for (entries, verb) in [(&ctx.deny, "deny"), (&ctx.ask, "ask before")] {
        if let Some(entry) = entries.iter().find(|entry| {
            entry
                .rule
                .as_ref()
                .is_some_and(|rule| rule.denies(facts, ctx))
        }) {
            return Some(Decision::flag(format!(
                "the user's permission rules {verb} this (`{}`, {})",
                show(&entry.text),
                entry.path
            )));
        }
    }
    None
}

pub(crate) fn allow_side(facts: &Facts<'_>, ctx: &Context) -> Option<Decision> {
    let entry = ctx.allow.iter().find(|entry| {
        entry
            .rule
            .as_ref()
            .is_some_and(|rule| rule.allows_call(facts, ctx))
    })?;
    Some(
        Decision::pass(format!(
            "allowed by the user's rule {} (`{}`)",
            entry.path,
            show(&entry.text)
        ))
        .cite(entry.path.clone()),
    )
}
