//! A turn's reply stream: the envelope component's `reply-stream` resource, in the store of
//! the turn it serves (see [`crate::Turn`]).
//!
//! Invariants:
//! - The stream lives in its turn's store and is dropped with it at the latest: nothing of one
//!   turn's stream survives into another, and the envelope version the turn opened with
//!   serves every call of the stream, so a component swap never affects a turn in flight.
//! - Each push is a call of the turn: the deadline is re-armed before it and the memory cap is
//!   the envelope instance's (a push, not the turn, is bounded in time: a turn lasts as long
//!   as the agent writes). Once a call of the turn traps, every later call answers a trap
//!   that names the first error.
//! - A push answers the text it released as spans of the output (and separators); the host
//!   keeps its own copy of the output and cuts the text from it, so released text crosses the
//!   boundary once, in the chunk. A span that is not a span of the output is an interface
//!   error (the component is broken), never text.

use std::sync::Arc;

use devin_bridge_types::{Failure, Parsed, ShownPiece, StreamEnd};
use wasmtime::component::ResourceAny;

use crate::bindings::functions::{reply_stream_finish, reply_stream_narrates, reply_stream_open};
use crate::bindings::reply::{reply_of_owned, Push};
use crate::{EngineError, TransformKind, Turn};

const KIND: TransformKind = TransformKind::Envelope;

/// One attempt's streaming parse. See the module documentation.
pub struct ReplyStream {
    turn: Arc<Turn>,
    handle: Option<ResourceAny>,
    /// The resource's `push`, taken from the turn's envelope instance when the stream opened.
    push: Push,
    /// Every chunk pushed, in order (the pushes' spans and the end's text span are spans of it).
    output: String,
}

/// A finished stream: the shown text the pushes had not released, and `parse`'s answer for the
/// whole output with the narration verdict of a text reply.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamFinish {
    pub tail: String,
    pub reply: Result<Parsed, Failure>,
    /// `narrates-unexecuted-action` of a text reply's text when it was asked for; false
    /// otherwise.
    pub narrates: bool,
}

impl ReplyStream {
    /// Opens a stream in `turn`'s store.
    fn open(
        turn: Arc<Turn>,
        tools: &str,
        id_seed: &str,
        max_calls: u32,
    ) -> Result<Self, EngineError> {
        let (handle, push) = turn.run(KIND, |instance, store| {
            let handle = reply_stream_open(instance, store, tools, id_seed, max_calls)?;
            Ok((handle, Push::of(instance, store)?))
        })?;
        Ok(Self {
            turn,
            handle: Some(handle),
            push,
            output: String::new(),
        })
    }

    /// Pushes the next chunk of the agent's output: the shown text it made certain (often
    /// none), as pieces to read with [`ReplyStream::text`], or the reply's certain failure (the
    /// same on every later push). The chunk is taken by value: it is lowered into the component
    /// as it is, after the stream's own copy of the output took its bytes.
    pub fn push(&mut self, chunk: String) -> Result<Result<Vec<ShownPiece>, Failure>, EngineError> {
        let handle = self.handle()?;
        self.output.push_str(&chunk);
        let push = &self.push;
        let answer = self
            .turn
            .run(KIND, |_, store| push.call(store, handle, chunk))?;
        let Ok(pieces) = answer else {
            return Ok(answer);
        };
        // The pieces are spans of the output, this chunk included.
        if let Some(bad) = pieces.iter().find(|piece| match piece {
            ShownPiece::Separator => false,
            ShownPiece::Output(span) => span.of(&self.output).is_none(),
        }) {
            self.handle = None;
            return Err(EngineError::Interface {
                transform: KIND,
                message: format!(
                    "a push answered {bad:?}, not a span of the {} bytes pushed",
                    self.output.len()
                ),
            });
        }
        Ok(Ok(pieces))
    }

    /// The text of one piece a push answered (a separator, or its span of the output).
    pub fn text<'a>(&'a self, piece: &ShownPiece) -> &'a str {
        match piece {
            ShownPiece::Separator => devin_bridge_types::TEXT_BLOCK_SEPARATOR,
            ShownPiece::Output(span) => span.of(&self.output).unwrap_or_default(),
        }
    }

    /// The output pushed so far.
    pub fn output(&self) -> &str {
        &self.output
    }

    /// Ends the stream: `parse`'s answer for everything pushed, the text not released yet and,
    /// when `judge_narration` (a turn that offers tools: only then can narration ask for a
    /// repair), the narration verdict (false otherwise). The resource is dropped.
    pub fn finish(mut self, judge_narration: bool) -> Result<StreamFinish, EngineError> {
        let handle = self.handle()?;
        let end = self.turn.run(KIND, |instance, store| {
            reply_stream_finish(instance, store, handle)
        })?;
        let narrates = if judge_narration {
            self.turn.run(KIND, |instance, store| {
                reply_stream_narrates(instance, store, handle)
            })?
        } else {
            false
        };
        self.close();
        let output = std::mem::take(&mut self.output);
        Ok(match end {
            Ok(StreamEnd { tail, reply }) => StreamFinish {
                tail,
                reply: Ok(reply_of_owned(reply, output).map_err(|error| {
                    EngineError::Interface {
                        transform: KIND,
                        message: error.to_string(),
                    }
                })?),
                narrates,
            },
            Err(failure) => StreamFinish {
                tail: String::new(),
                reply: Err(failure),
                narrates: false,
            },
        })
    }

    fn handle(&self) -> Result<ResourceAny, EngineError> {
        self.handle.ok_or_else(|| EngineError::Interface {
            transform: KIND,
            message: "the reply stream is closed".to_owned(),
        })
    }

    /// Runs the resource's destructor; a failure to drop changes nothing for the caller (the
    /// store goes with the turn anyway).
    fn close(&mut self) {
        if let Some(handle) = self.handle.take() {
            self.turn.quietly(|store| handle.resource_drop(store));
        }
    }
}

impl Turn {
    /// Opens a reply stream for one of the turn's attempts, in the turn's store (see
    /// [`ReplyStream`]).
    pub fn reply_stream(
        self: &Arc<Self>,
        tools: &str,
        id_seed: &str,
        max_calls: u32,
    ) -> Result<ReplyStream, EngineError> {
        ReplyStream::open(self.clone(), tools, id_seed, max_calls)
    }
}

impl Drop for ReplyStream {
    fn drop(&mut self) {
        self.close();
    }
}
