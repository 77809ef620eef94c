//! A turn's reply stream: the envelope component's `reply-stream` resource, in a store and an
//! instance of its own that live for one turn.
//!
//! Invariants:
//! - The store is made when the turn opens its stream and dropped with it: nothing of one
//!   turn's stream survives into another, and the component version that opened the stream
//!   (an `Arc` of the loaded component, taken once) serves every call of the turn, so a
//!   component swap never affects a turn in flight.
//! - The store has the memory cap every call's store has (the limits in force when the turn
//!   opened), and the call deadline is re-armed before each call: a push, not the turn, is
//!   bounded in time (a turn lasts as long as the agent writes).
//! - Once a call traps (deadline, memory cap, a guest panic), the instance is never called
//!   again: every later call answers a trap that names the first error.
//! - An open stream holds one slot of the engine's instance pool until it is dropped, so the
//!   pool (`[limits] max_instances`) must cover the turns that may be open at once plus the
//!   ordinary calls running beside them.
//!
//! The host keeps its own copy of the output pushed (the component answers a text reply as a
//! span of it, as the one-shot `parse` does).

use std::sync::Arc;

use devin_bridge_types::{Failure, Parsed, StreamEnd};
use wasmtime::component::ResourceAny;
use wasmtime::Store;

use crate::bindings::{envelope, EnvelopeWorld, Instance};
use crate::runtime::{arm_deadline, CallState, Runtime};
use crate::{EngineError, Loaded, TransformKind};

const KIND: TransformKind = TransformKind::Envelope;

/// One turn's streaming parse. See the module documentation.
pub struct ReplyStream {
    /// Kept so the version that opened the stream stays loaded for the turn.
    _loaded: Arc<Loaded>,
    runtime: Runtime,
    store: Store<CallState>,
    instance: Instance,
    handle: Option<ResourceAny>,
    /// Every chunk pushed, in order (the end's text span is a span of it).
    output: String,
    /// The first engine error, as text: the instance is not called again after it.
    broken: Option<String>,
}

/// A finished stream: the shown text the pushes had not released, and `parse`'s answer for the
/// whole output with the narration verdict of a text reply.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamFinish {
    pub tail: String,
    pub reply: Result<Parsed, Failure>,
    /// `narrates-unexecuted-action` of a text reply's text; false otherwise.
    pub narrates: bool,
}

impl ReplyStream {
    /// Opens a stream on a fresh instance of `loaded` (which must be the envelope component).
    pub(crate) fn open(
        loaded: Arc<Loaded>,
        runtime: &Runtime,
        tools: &str,
        id_seed: &str,
        max_calls: u32,
    ) -> Result<Self, EngineError> {
        let (mut store, instance) = loaded.open::<EnvelopeWorld>(runtime)?;
        arm_deadline(&mut store);
        let handle = envelope::stream_open(&instance, &mut store, tools, id_seed, max_calls)
            .map_err(|error| runtime.classify(KIND, &store, error))?;
        Ok(Self {
            _loaded: loaded,
            runtime: runtime.clone(),
            store,
            instance,
            handle: Some(handle),
            output: String::new(),
            broken: None,
        })
    }

    /// Pushes the next chunk of the agent's output: the shown text it made certain (often
    /// empty), or the reply's certain failure (the same on every later push).
    pub fn push(&mut self, chunk: &str) -> Result<Result<String, Failure>, EngineError> {
        let handle = self.handle()?;
        arm_deadline(&mut self.store);
        let answer = envelope::stream_push(&self.instance, &mut self.store, handle, chunk);
        let answer = self.checked(answer)?;
        self.output.push_str(chunk);
        Ok(answer)
    }

    /// The output pushed so far.
    pub fn output(&self) -> &str {
        &self.output
    }

    /// Ends the stream: `parse`'s answer for everything pushed, the text not released yet and
    /// the narration verdict. The resource is dropped and the store with it.
    pub fn finish(mut self) -> Result<StreamFinish, EngineError> {
        let handle = self.handle()?;
        arm_deadline(&mut self.store);
        let end = envelope::stream_finish(&self.instance, &mut self.store, handle);
        let end = self.checked(end)?;
        let narrates = envelope::stream_narrates(&self.instance, &mut self.store, handle);
        let narrates = self.checked(narrates)?;
        self.close();
        let output = std::mem::take(&mut self.output);
        Ok(match end {
            Ok(StreamEnd { tail, reply }) => StreamFinish {
                tail,
                reply: Ok(envelope::reply_of_owned(reply, output)
                    .map_err(|error| self.runtime.classify(KIND, &self.store, error))?),
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
        if let Some(error) = &self.broken {
            return Err(EngineError::Trap {
                transform: KIND,
                message: format!("the reply stream failed earlier: {error}"),
            });
        }
        self.handle.ok_or_else(|| EngineError::Interface {
            transform: KIND,
            message: "the reply stream is closed".to_owned(),
        })
    }

    /// A call's answer, or its classified error (and the stream broken from then on).
    fn checked<T>(&mut self, answer: wasmtime::Result<T>) -> Result<T, EngineError> {
        answer.map_err(|error| {
            let error = self.runtime.classify(KIND, &self.store, error);
            self.broken = Some(error.to_string());
            self.handle = None;
            error
        })
    }

    /// Runs the resource's destructor (with a deadline of its own); a failure to drop changes
    /// nothing for the caller, the store goes with the stream anyway.
    fn close(&mut self) {
        if let Some(handle) = self.handle.take() {
            arm_deadline(&mut self.store);
            if let Err(error) = envelope::stream_close(&mut self.store, handle) {
                tracing::debug!(error = %error, "the reply stream's destructor failed");
            }
        }
    }
}

impl Drop for ReplyStream {
    fn drop(&mut self) {
        self.close();
    }
}
