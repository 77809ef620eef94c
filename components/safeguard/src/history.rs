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
//! - A `Bash` line whose text names no decisive file is not parsed here but kept for a script
//!   run to look into ([`Written::defer`]); unless the working or home directory itself names
//!   one, since a relative path or `~` would then write inside it. A line with a character
//!   that is not ASCII writes nothing the judge reads (it is flagged, so it was blocked).

use std::borrow::Cow;

use devin_bridge_types::ToolCall;
use serde::Deserialize;

use crate::context::Context;
use crate::decisive::{self, Written};
use crate::line;
use crate::paths;

/// The members of a call's input read here; the others are skipped unread (borrowed from the
/// input's text unless they hold escapes).
#[derive(Deserialize)]
struct Input<'a> {
    #[serde(borrow)]
    command: Option<Cow<'a, str>>,
    #[serde(borrow)]
    file_path: Option<Cow<'a, str>>,
    #[serde(borrow)]
    notebook_path: Option<Cow<'a, str>>,
}

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
    let mut reader = Reader::new(ctx);
    for call in earlier {
        reader.record(&mut written, call);
    }
    written
}

/// Adds what `call` (of the reply, once judged) wrote to `written`.
pub(crate) fn record(written: &mut Written, call: &ToolCall, ctx: &Context) {
    Reader::new(ctx).record(written, call);
}

/// Reads calls for what they wrote, with one text buffer for every line.
struct Reader<'c> {
    ctx: &'c Context,
    /// The working or home directory names a decisive file: every line is parsed.
    parse_all: bool,
    plain: String,
}

impl<'c> Reader<'c> {
    fn new(ctx: &'c Context) -> Self {
        let parse_all = [&ctx.cwd, &ctx.home]
            .into_iter()
            .flatten()
            .any(|dir| decisive::names_a_decisive_file(&dir.to_ascii_lowercase()));
        Self {
            ctx,
            parse_all,
            plain: String::new(),
        }
    }

    fn record(&mut self, written: &mut Written, call: &ToolCall) {
        let tool = match call.name.as_str() {
            "Write" => "Write",
            "Edit" => "Edit",
            "MultiEdit" => "MultiEdit",
            "NotebookEdit" => "NotebookEdit",
            "Bash" => "Bash",
            _ => return,
        };
        let Ok(input) = serde_json::from_str::<Input<'_>>(&call.input) else {
            return;
        };
        let text = match tool {
            "NotebookEdit" => input.notebook_path,
            "Bash" => {
                if let Some(command) = input.command {
                    self.record_line(written, command);
                }
                return;
            }
            _ => input.file_path,
        };
        if let Some(text) = text {
            let path =
                paths::resolve_tool_path(&text, self.ctx).unwrap_or_else(|_| text.into_owned());
            written.record(tool, &path);
        }
    }

    fn record_line(&mut self, written: &mut Written, command: Cow<'_, str>) {
        if !command.is_ascii() {
            return;
        }
        decisive::plain_into(&mut self.plain, &command);
        if !self.parse_all && !decisive::names_a_decisive_file(&self.plain) {
            written.defer(command.into_owned());
            return;
        }
        for path in line::writes(&command, self.ctx) {
            written.record("Bash", &path);
        }
    }
}
