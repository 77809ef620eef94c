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
//!   one, since a relative path or `~` would then write inside it.

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

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

/// A multiply-rotate hash, eight bytes at a time: the set of calls already read hashes whole
/// inputs, which needs no resistance to chosen collisions (a collision costs a comparison,
/// and a request is read once, by its own judge) and is hot.
#[derive(Default)]
struct Quick(u64);

impl Hasher for Quick {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut hash = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            hash = (hash.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for byte in chunks.remainder() {
            hash = (hash.rotate_left(5) ^ u64::from(*byte)).wrapping_mul(K);
        }
        self.0 = hash;
    }
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
    let parse_all = [&ctx.cwd, &ctx.home]
        .into_iter()
        .flatten()
        .any(|dir| decisive::names_a_decisive_file(&dir.to_ascii_lowercase()));
    // A call repeated verbatim writes what it wrote before: read once.
    let mut seen: HashSet<(&str, &str), BuildHasherDefault<Quick>> =
        HashSet::with_capacity_and_hasher(earlier.len(), BuildHasherDefault::default());
    for call in earlier {
        if !seen.insert((call.name.as_str(), call.input.as_str())) {
            continue;
        }
        if call.name == "Bash" {
            if let Some(command) = input(call).and_then(|input| input.command) {
                if !command.is_ascii() {
                    // Flagged, so blocked; and the judge reads no write of it.
                    continue;
                }
                let plain = decisive::plain(&command);
                if !parse_all && !decisive::names_a_decisive_file(&plain) {
                    written.defer(&command, plain);
                    continue;
                }
            }
        }
        record(&mut written, call, ctx);
    }
    written
}

fn input(call: &ToolCall) -> Option<Input<'_>> {
    serde_json::from_str::<Input<'_>>(&call.input).ok()
}

/// Adds what `call` wrote to `written`.
pub(crate) fn record(written: &mut Written, call: &ToolCall, ctx: &Context) {
    if !matches!(
        call.name.as_str(),
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "Bash"
    ) {
        return;
    }
    let Some(input) = input(call) else {
        return;
    };
    let text = match call.name.as_str() {
        "NotebookEdit" => input.notebook_path,
        "Bash" => {
            for path in input
                .command
                .map(|command| line::writes(&command, ctx))
                .unwrap_or_default()
            {
                written.record(&call.name, &path);
            }
            return;
        }
        _ => input.file_path,
    };
    if let Some(text) = text {
        let path = paths::resolve_tool_path(&text, ctx).unwrap_or_else(|_| text.into_owned());
        written.record(&call.name, &path);
    }
}
