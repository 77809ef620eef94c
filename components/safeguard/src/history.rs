//! The conversation's earlier tool calls, read for what they wrote: the index
//! ([`crate::decisive::Written`]) the judge looks runs up in.
//!
//! Invariants:
//! - The index is built once per request, from at most [`MAX_EARLIER_CALLS`] calls whose
//!   inputs total at most [`MAX_EARLIER_BYTES`]; a longer history is not read at all and the
//!   index is marked as overflowing, which flags every run of a program that reads a decisive
//!   file (fail closed: the judge cannot tell what was written).
//! - A call's writes are what the judge resolves of it: the `file_path` of `Write`, `Edit` and
//!   `MultiEdit`, the `notebook_path` of `NotebookEdit`, and the files a `Bash` line writes
//!   ([`crate::line::writes`]). Paths are resolved against the current context (its working
//!   and home directories); a path the judge cannot resolve is recorded as written (its names
//!   still count). Every other tool writes nothing the judge can see.
//! - Earlier calls are never judged: their outcome is not known here (a flagged call was
//!   blocked in auto mode, a call the user approved ran), so every write counts.

use devin_bridge_types::ToolCall;
use serde_json::Value;

use crate::context::Context;
use crate::decisive::Written;
use crate::line;
use crate::paths;

/// Most earlier calls read.
pub(crate) const MAX_EARLIER_CALLS: usize = 1000;

/// Most bytes of earlier calls' inputs read, in total.
pub(crate) const MAX_EARLIER_BYTES: usize = 2 * 1024 * 1024;

/// The index of what `earlier` (the conversation's calls, oldest first) wrote.
pub(crate) fn index(earlier: &[ToolCall], ctx: &Context) -> Written {
    let mut written = Written::default();
    if earlier.len() > MAX_EARLIER_CALLS {
        written.set_overflow(format!(
            "the conversation has {} earlier tool calls, more than the {MAX_EARLIER_CALLS} the judge reads",
            earlier.len()
        ));
        return written;
    }
    let bytes: usize = earlier.iter().map(|call| call.input.len()).sum();
    if bytes > MAX_EARLIER_BYTES {
        written.set_overflow(format!(
            "the conversation's earlier tool calls are {bytes} bytes, more than the {MAX_EARLIER_BYTES} the judge reads"
        ));
        return written;
    }
    for call in earlier {
        record(&mut written, call, ctx);
    }
    written
}

/// Adds what `call` wrote to `written`.
pub(crate) fn record(written: &mut Written, call: &ToolCall, ctx: &Context) {
    let key = match call.name.as_str() {
        "Write" | "Edit" | "MultiEdit" => "file_path",
        "NotebookEdit" => "notebook_path",
        "Bash" => "command",
        _ => return,
    };
    let Ok(Value::Object(input)) = serde_json::from_str::<Value>(&call.input) else {
        return;
    };
    let Some(text) = input.get(key).and_then(Value::as_str) else {
        return;
    };
    if key == "command" {
        for path in line::writes(text, ctx) {
            written.record(&call.name, &path);
        }
    } else {
        let path = paths::resolve_tool_path(text, ctx).unwrap_or_else(|_| text.to_owned());
        written.record(&call.name, &path);
    }
}
