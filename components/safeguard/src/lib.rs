//! The safeguard transform: judges each tool call of a reply before the client runs it.
//!
//! Claude Code's auto mode asks, with every request, whether each `tool_use` of the reply
//! may run without asking. A `not_flagged` call runs at once; a `flagged` one is blocked and
//! the model is told the explanation. This judge is deterministic: no model, no I/O, a pure
//! function of the calls and the request's `classifier_context`.
//!
//! Invariants:
//! - A call is `not_flagged` only when the judge positively proves it harmless: a read inside
//!   the trusted directories, an edit there, a harmless client-state tool, a shell line made
//!   only of commands in the closed safe set ([`programs`]), or a call an `auto_mode.allow`
//!   rule of the user names (cited). Every field of a known tool is judged (`fields`), and
//!   every argument a program of the safe set takes or hands on is on its program's closed list
//!   or checked as the path it may be (`handed`). Everything else is `flagged` with one
//!   sentence saying what and why (at most 200 characters, call values escaped and shortened).
//! - The answer has exactly one verdict per call, in the calls' order, with the call's id; an
//!   empty call list is `Available([])` whatever the context.
//! - A context the judge cannot read (over [`MAX_CONTEXT_BYTES`], not JSON, not an object, a
//!   known field of the wrong type) makes the whole answer `Unavailable`, never `not_flagged`.
//! - The judge sees text, not the filesystem: paths and globs are resolved lexically (a
//!   symlink inside a trusted directory is followed by the tool, not by the judge), and running
//!   the project's own scripts and tests runs code the agent may have edited, as with Claude
//!   Code's own classifier; but a run of a program after an earlier call of the conversation
//!   wrote a file that decides what it runs (a build script, a hook, a manifest's scripts;
//!   [`decisive`]) is flagged.
//! - Lines are parsed as the context's shell reads them (zsh or sh, `shell::Dialect`); a
//!   construct the two read differently is refused where the shell is not zsh.
//! - Every step is linear in its input or bounded: a command line over 16 KiB, more than 256
//!   commands or 8 working directories, a path over 4096 bytes, 128 components or with a name
//!   over 255 bytes, and a call needing more than a million rule checks are flagged; a rule
//!   specifier over 512 bytes is not a rule. Wrappers are taken off in a loop, brace patterns
//!   expand to at most 64 alternatives. Nothing recurses.
//!
//! `docs/safeguard.md` is the user-facing description; it must stay true of this code.

// The table of the transforms' functions names each library by its crate name, this one too
// (the component crate's exports are made from it).
extern crate self as devin_bridge_safeguard;

mod bounds;
mod context;
mod decisive;
mod fields;
mod fileops;
mod filters;
mod git;
mod handed;
mod history;
mod installed;
mod line;
mod options;
mod pathname;
mod paths;
mod programs;
mod rule;
mod rules;
mod scope;
mod shell;
mod tools;
mod user_rules;
mod verdict;
mod wrappers;

use devin_bridge_types::{CallVerdict, SafeguardStatus, ToolCall, ToolVerdict};

/// Largest `classifier_context` read, in bytes; a larger one makes the answer `Unavailable`.
pub const MAX_CONTEXT_BYTES: usize = context::MAX_CONTEXT_BYTES;

/// Longest `Bash` command judged, in bytes; a longer one is flagged.
pub const MAX_COMMAND_BYTES: usize = line::MAX_COMMAND_BYTES;

/// Most earlier calls of the conversation the judge reads; with more, every run of a program
/// that reads a file deciding what it runs is flagged.
pub const MAX_EARLIER_CALLS: usize = history::MAX_EARLIER_CALLS;

/// Most bytes of the earlier calls' inputs the judge reads, in total; with more, as with
/// [`MAX_EARLIER_CALLS`].
pub const MAX_EARLIER_BYTES: usize = history::MAX_EARLIER_BYTES;

/// One verdict per call, in order, against the request's `classifier_context` (JSON text), for
/// a conversation without earlier calls.
pub fn judge(calls: &[ToolCall], classifier_context: &str) -> SafeguardStatus {
    judge_in_conversation(calls, classifier_context, &[])
}

/// One verdict per call, in order, against the request's `classifier_context` (JSON text),
/// after the conversation's `earlier_calls` (oldest first): a run of a program that reads a
/// file one of them, or a call before it in `calls`, wrote and that decides what the program
/// runs is flagged ([`decisive`]).
pub fn judge_in_conversation(
    calls: &[ToolCall],
    classifier_context: &str,
    earlier_calls: &[ToolCall],
) -> SafeguardStatus {
    if calls.is_empty() {
        return SafeguardStatus::Available(Vec::new());
    }
    let mut ctx = match context::parse(classifier_context) {
        Ok(ctx) => ctx,
        Err(reason) => return SafeguardStatus::Unavailable(reason),
    };
    ctx.written = history::index(earlier_calls, &ctx);
    let mut verdicts = Vec::with_capacity(calls.len());
    for call in calls {
        verdicts.push(ToolVerdict {
            id: call.id.clone(),
            verdict: verdict_for(call, &ctx),
        });
        // A later call of the same reply runs after this one.
        let mut written = std::mem::take(&mut ctx.written);
        history::record(&mut written, call, &ctx);
        ctx.written = written;
    }
    SafeguardStatus::Available(verdicts)
}

fn verdict_for(call: &ToolCall, ctx: &context::Context) -> CallVerdict {
    tools::judge_call(call, ctx).into_verdict()
}

#[cfg(test)]
mod tests;
