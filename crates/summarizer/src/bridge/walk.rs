//! A Messages request's walk through the stages, the one place that holds the whole bridge:
//! the request joins its turn (a resend) or starts it in a task of its own, and the turn hands
//! each stage the parts it uses, in order: `prepare` (the sessions and the codec),
//! `side_requests` (whether the bridge answers it, and the metrics), the admission's turn
//! slot, `turn` (the turn settings, the metrics and the placement, which the turn owns from
//! then on), `safeguard` (its mode and the transforms), and `respond` (the responder), which
//! renders the answer for every request that shares the turn.

use std::sync::Arc;

use devin_bridge_engine::Prompt;
use devin_bridge_types::{estimate_tokens, Failure, Reply, Usage};
use hyper::Response;
use tracing::Instrument;

use super::Bridge;
use crate::body::ResponseBody;
use crate::conversation::Conversation;
use crate::prepare::{prepare, Prepared};
use crate::resends::{Answer, Finished, Joined, Publisher};
use crate::shown::Shown;
use crate::streamed::message_of;
use crate::{safeguard, side_requests, turn};

impl Bridge {
    /// The answer to a `/v1/messages` request that `joined` its turn; `conversation` is what
    /// its headers said (read once, at the edge).
    pub(crate) async fn answer(
        self: &Arc<Self>,
        joined: Joined,
        body: String,
        conversation: Conversation,
    ) -> Response<ResponseBody> {
        let waiter = match joined {
            Joined::Finished(finished) => {
                self.metrics.count_message("resend");
                self.metrics.count_resend("finished");
                tracing::info!(
                    "a resend of a turn that just finished: answered again without an agent turn"
                );
                return self.responder.finished(&finished).await;
            }
            Joined::Running(waiter) => {
                self.metrics.count_message("resend");
                self.metrics.count_resend("running");
                tracing::info!("a resend of a running turn: it waits for that turn's answer");
                waiter
            }
            Joined::Leader(publisher, waiter) => {
                self.spawn_turn(body, conversation, publisher);
                waiter
            }
        };
        self.responder.respond(waiter).await
    }

    /// Runs the turn in a task of its own that outlives the request: it ends with its answer,
    /// or when no request has waited for it for the grace period (which drops the turn and
    /// kills its agent).
    fn spawn_turn(
        self: &Arc<Self>,
        body: String,
        conversation: Conversation,
        publisher: Publisher,
    ) {
        let bridge = self.clone();
        let alive = self.resends.task();
        tokio::spawn(
            async move {
                let _alive = alive;
                let finished = tokio::select! {
                    finished = bridge.drive(body, conversation, &publisher) => Some(finished),
                    () = publisher.abandoned() => None,
                    () = bridge.resends.closed() => None,
                };
                match finished {
                    Some(finished) => bridge.resends.finish(publisher, finished),
                    None => {
                        bridge.resends.forget(&publisher);
                        tracing::info!(
                            status = 499,
                            "client went away during the turn; agent killed"
                        );
                    }
                }
            }
            .instrument(tracing::Span::current()),
        );
    }

    /// The turn itself: serialize, answer a side request the bridge knows at once (no slot, no
    /// agent), else wait for a slot, run, judge the reply's calls.
    async fn drive(
        &self,
        body: String,
        conversation: Conversation,
        publisher: &Publisher,
    ) -> Finished {
        let codec = &self.turns.codec;
        let prepared = match prepare(&self.sessions, codec, body, conversation.key).await {
            Ok(prepared) => prepared,
            Err(failure) => return failed(failure),
        };
        self.metrics
            .count_message(message_kind(&prepared.prompt, conversation.subagent));
        let local =
            side_requests::local_reply(self.local_side_requests, &self.metrics, &prepared.prompt);
        if let Some(reply) = local {
            return answered_locally(prepared, reply);
        }
        let permit = match self.admission.turn_slot().await {
            Ok(permit) => permit,
            Err(failure) => return failed(failure),
        };
        let Prepared {
            prompt,
            model_id,
            images,
            head,
            placement,
        } = prepared;
        tracing::info!(id = %head.id, model = %head.model, stream = prompt.stream, input_tokens = prompt.input_tokens, "turn accepted");
        // Unless the policy turns streaming off, the turn's output is parsed as it arrives and
        // its certain text streams to streaming clients. A JSON request is parsed the same way
        // (its text goes to no one before the end), so both forms answer the same message, a
        // repair included.
        let shown = self.turns.stream_text.then(Shown::new);
        let published = shown.clone().filter(|_| prompt.stream);
        publisher.started(head.clone(), prompt.stream, published);
        let outcome = {
            let _running = self.admission.running();
            let shown = shown.as_ref();
            turn::run(
                &self.turns,
                &self.metrics,
                &prompt,
                &model_id,
                &images,
                placement,
                shown,
            )
            .await
        };
        drop(permit);
        let outcome = match outcome {
            Ok((reply, usage)) => Ok(self.judged(&prompt, reply, usage).await),
            Err(failure) => Err(failure),
        };
        Finished {
            head: Some(head),
            stream: prompt.stream,
            outcome,
        }
    }

    /// An accepted reply as the client gets it: with streaming on, the message a stream
    /// accumulates (one text block, then the calls; a JSON answer included, so both agree),
    /// and the safeguard's answer on its calls.
    async fn judged(&self, prompt: &Prompt, reply: Reply, usage: Usage) -> Answer {
        let reply = if self.turns.stream_text {
            message_of(reply)
        } else {
            reply
        };
        let safeguard = safeguard::answer(
            self.turns.safeguard_mode,
            &self.turns.codec.transforms,
            &self.metrics,
            prompt.classifier_context.as_deref(),
            &prompt.earlier_calls,
            &reply,
        )
        .await;
        Answer {
            reply,
            usage,
            safeguard,
        }
    }
}

/// A turn that failed before it started: no head.
fn failed(failure: Failure) -> Finished {
    Finished {
        head: None,
        stream: false,
        outcome: Err(failure),
    }
}

/// What a Messages request is counted as: a side request (no tools), a subagent's turn or a
/// main turn.
fn message_kind(prompt: &Prompt, subagent: bool) -> &'static str {
    if prompt.tools.trim() == "[]" {
        "side_request"
    } else if subagent {
        "subagent_turn"
    } else {
        "main_turn"
    }
}

/// A side request the bridge answered itself: no agent, no slot.
fn answered_locally(prepared: Prepared, reply: Reply) -> Finished {
    let Prepared {
        prompt,
        head,
        placement,
        ..
    } = prepared;
    // No agent answers: the placement goes unused. A side request's is never a conversation's
    // session (the resident transport gives a request without tools an ephemeral one, which
    // holds no session until its turn runs), so dropping it forgets nothing and leaves nothing
    // behind.
    drop(placement);
    let usage = match &reply {
        Reply::Text(text) => Usage::estimated(prompt.input_tokens, estimate_tokens(text)),
        Reply::Tools(_) => Usage::estimated(prompt.input_tokens, 1),
    };
    Finished {
        head: Some(head),
        stream: prompt.stream,
        outcome: Ok(Answer {
            reply,
            usage,
            safeguard: None,
        }),
    }
}
