//! What the envelope's answers stand for: a text reply and a push's shown text come back as
//! spans of the output the host holds already (so a text reply, which can be megabytes, does
//! not cross the boundary a second time), and are cut from it here.
//!
//! Invariant: a span that is not a span of the output (past its end, or off a character
//! boundary) is an interface error (the component is broken), never a guess at the text.
//!
//! Also the reply stream's `push` taken once per stream ([`Push`]): a turn pushes every chunk
//! of the agent's output through it, so the lookup and the type check are not repeated per
//! chunk.

use devin_bridge_types::{Failure, Parsed, ParsedReply, ShownPiece, TextSpan};
use wasmtime::component::{ResourceAny, TypedFunc};

use super::table::Checked;
use super::{CallStore, Instance};
use crate::TransformKind;

/// The WIT name of the reply stream's `push`.
pub(crate) const PUSH: &str = "[method]reply-stream.push";

/// The reply `parsed` stands for, its text copied out of `output`.
pub(crate) fn reply_of(parsed: ParsedReply, output: &str) -> wasmtime::Result<Parsed> {
    let span = text_span(&parsed);
    parsed
        .resolve(output)
        .ok_or_else(|| outside(span, output.len()))
}

/// The reply `parsed` stands for, its text cut from `output`'s own buffer (no copy).
pub(crate) fn reply_of_owned(parsed: ParsedReply, output: String) -> wasmtime::Result<Parsed> {
    let span = text_span(&parsed);
    let length = output.len();
    parsed
        .resolve_owned(output)
        .ok_or_else(|| outside(span, length))
}

fn text_span(parsed: &ParsedReply) -> Option<TextSpan> {
    match parsed {
        ParsedReply::Text(span) => Some(*span),
        ParsedReply::Tools(_) => None,
    }
}

/// A component that names text outside the output it was given is broken: its answer is an
/// error, never a guess.
fn outside(span: Option<TextSpan>, length: usize) -> wasmtime::Error {
    let (start, span_length) = span.map_or((0, 0), |span| (span.start, span.length));
    wasmtime::Error::msg(format!(
        "parse answered the text span of {span_length} bytes from byte {start}, which is \
         not a span of its {length}-byte output"
    ))
}

/// The text a push's `pieces` stand for, given the output pushed so far (this push's chunk
/// included); an interface error when a span is not a span of it.
pub(crate) fn shown_text(pieces: &[ShownPiece], output: &str) -> wasmtime::Result<String> {
    ShownPiece::resolve(pieces, output).ok_or_else(|| {
        wasmtime::Error::msg(format!(
            "a push answered a span outside the {} bytes pushed",
            output.len()
        ))
    })
}

/// What a push answers across the boundary.
type PushAnswer = Result<Vec<ShownPiece>, Failure>;

/// The stream's `push`, type-checked once. Valid for the instance (and store) it was taken
/// from. The chunk is lowered as the `String` it is (the same copy into the guest as a `&str`).
pub(crate) struct Push(TypedFunc<(ResourceAny, String), (PushAnswer,)>);

impl Push {
    /// Takes `push` from `instance`, an envelope instance.
    pub(crate) fn of(instance: &Instance, store: &mut CallStore) -> wasmtime::Result<Self> {
        if instance.kind != TransformKind::Envelope {
            return Err(wasmtime::Error::msg(format!(
                "a reply stream needs an envelope instance, not a {} one",
                instance.kind
            )));
        }
        instance.function(store, PUSH).map(Push)
    }

    /// Pushes `chunk` into the stream `handle`.
    pub(crate) fn call(
        &self,
        store: &mut CallStore,
        handle: ResourceAny,
        chunk: String,
    ) -> wasmtime::Result<PushAnswer> {
        let (answer,) = self.0.call(&mut *store, (handle, chunk))?;
        Ok(answer.checked(TransformKind::Envelope))
    }
}
