//! A streamed turn's output: the agent's chunks pushed into a reply stream of the envelope
//! component as they arrive, and the text they make certain appended to the turn's
//! [`Shown`] text; and how a streaming response coalesces that text into `text_delta`s.
//!
//! Invariants:
//! - One reply stream per attempt (the first, then the single repair), opened when the attempt
//!   starts and dropped when it ends: its store never outlives the attempt.
//! - A repair's text continues the text already shown: [`TEXT_BLOCK_SEPARATOR`] goes between
//!   them, once, when both are non-empty (the separator is appended just before the repair's
//!   first certain text, never ahead of it).
//! - A push that fails in the engine (a trap, the deadline, the memory cap) is the turn's
//!   failure; a reply the stream finds certain to fail takes no more pushes (its end gives
//!   `parse`'s failure, and the repair decides).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use devin_bridge_agent::acp::ChunkSink;
use devin_bridge_engine::TransformCalls as _;
use devin_bridge_types::{Failure, Recovery, Reply, ReplyBlock, ToolCall, TEXT_BLOCK_SEPARATOR};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::calls::engine_failure;
use super::shown::Shown;
use devin_bridge_engine::{Prompt, Transforms};

/// How an attempt's output ended.
pub(crate) enum Fed {
    /// `parse` accepted it: its calls (none for a text reply), the shown text the stream still
    /// held back, and the narration verdict of a text reply (false when not judged).
    Accepted {
        calls: Vec<ToolCall>,
        tail: String,
        narrates: bool,
    },
    /// `parse` refused it.
    Rejected(Failure),
}

/// What an attempt's reply is checked against besides its tools.
pub(crate) struct Limits {
    /// The most envelopes the reply may hold.
    pub(crate) max_calls: u32,
    /// Whether a text reply's narration is judged (only a request that offers tools can be
    /// answered by a call the text narrates).
    pub(crate) judge_narration: bool,
}

/// Where an attempt's agent turns send their chunks. Each agent turn of the attempt gets a
/// channel of its own ([`Chunks::sink`]): the first, and the replay when a resident session's
/// process died under the turn (or a per-turn agent is restarted with `--model`). The feed
/// reads them in order and starts the reply stream over for each later one, so a dead turn's
/// words are never parsed together with its replay's.
#[derive(Clone)]
pub(crate) struct Chunks(UnboundedSender<UnboundedReceiver<String>>);

impl Chunks {
    /// The turns' channels, and where the feed reads them.
    pub(crate) fn new() -> (Self, UnboundedReceiver<UnboundedReceiver<String>>) {
        let (turns, feed) = tokio::sync::mpsc::unbounded_channel();
        (Self(turns), feed)
    }

    /// The sink of the next agent turn of the attempt.
    pub(crate) fn sink(&self) -> ChunkSink {
        let (sink, chunks) = tokio::sync::mpsc::unbounded_channel();
        // The feed went away only when the attempt is over: the chunks then go nowhere.
        let _ = self.0.send(chunks);
        sink
    }
}

/// What a replayed agent turn shows: the dead turn's words are on screen already (shown text
/// is never taken back), so the replay's text is shown only past them. While the replay
/// repeats them, nothing is shown; once it goes on past them, the rest is; if it says
/// something else, a paragraph break and then the replay's own text (from its start) are.
struct Resumed {
    /// What the dead turn showed.
    already: String,
    /// What the replay has made certain so far, while it repeats `already`.
    seen: String,
    /// The replay went past `already` or left it: its text is shown as it comes.
    through: bool,
}

impl Resumed {
    fn after(already: String) -> Self {
        Self {
            through: already.is_empty(),
            already,
            seen: String::new(),
        }
    }

    /// The part of the replay's next certain `text` to show.
    fn show<'a>(&mut self, text: &'a str) -> Cow<'a, str> {
        if self.through {
            return Cow::Borrowed(text);
        }
        self.seen.push_str(text);
        if self.already.starts_with(self.seen.as_str()) {
            return Cow::Borrowed("");
        }
        self.through = true;
        let seen = std::mem::take(&mut self.seen);
        match seen.strip_prefix(self.already.as_str()) {
            Some(past) => Cow::Owned(past.to_owned()),
            None => Cow::Owned(format!("{TEXT_BLOCK_SEPARATOR}{seen}")),
        }
    }
}

/// Pushes every chunk of the attempt's agent turns (until the attempt drops its [`Chunks`])
/// into a reply stream opened for this attempt, appending what becomes certain to `shown`. A
/// later agent turn (a replay) starts a new reply stream; what the earlier one showed stays
/// shown (see [`Resumed`]). Each repair the envelope parser made goes to `count_recovery`.
pub(crate) async fn feed(
    transforms: &Transforms,
    prompt: &Prompt,
    limits: Limits,
    mut turns: UnboundedReceiver<UnboundedReceiver<String>>,
    shown: &Arc<Shown>,
    count_recovery: impl Fn(Recovery),
) -> Result<Fed, Failure> {
    let open = || {
        transforms
            .reply_stream(&prompt.tools, &prompt.id_seed, limits.max_calls)
            .map_err(|error| engine_failure(&error))
    };
    let mut stream = open()?;
    // The separator before a repair's text, owed until its first certain text.
    let mut separator_owed = shown.len() > 0;
    let mut broken: Option<Failure> = None;
    let mut refused = false;
    // What this attempt showed, and how a replay's text is shown after it.
    let mut released = String::new();
    let mut resumed: Option<Resumed> = None;
    let mut show = |text: &str, resumed: &mut Option<Resumed>, released: &mut String| {
        let text = match resumed {
            Some(resumed) => resumed.show(text),
            None => Cow::Borrowed(text),
        };
        if text.is_empty() {
            return;
        }
        if std::mem::take(&mut separator_owed) {
            shown.append(TEXT_BLOCK_SEPARATOR);
        }
        shown.append(&text);
        released.push_str(&text);
    };
    let mut first_turn = true;
    while let Some(mut chunks) = turns.recv().await {
        if !std::mem::take(&mut first_turn) {
            tracing::info!(
                shown_bytes = released.len(),
                "the agent turn was replayed: its reply stream starts over"
            );
            stream = open()?;
            (broken, refused) = (None, false);
            resumed = Some(Resumed::after(released.clone()));
        }
        while let Some(mut chunk) = chunks.recv().await {
            if broken.is_some() || refused {
                // Drained, not pushed: the agent's turn still runs to its end.
                continue;
            }
            // Every chunk already waiting goes in the same push: one boundary crossing instead
            // of one per chunk when the agent writes faster than the stream is fed (the stream
            // answers the same however the output is cut).
            while let Ok(more) = chunks.try_recv() {
                chunk.push_str(&more);
            }
            match stream.push(chunk) {
                Ok(Ok(pieces)) => {
                    for piece in &pieces {
                        // Cut from the stream's copy of the output: the only copy of the text.
                        show(stream.text(piece), &mut resumed, &mut released);
                    }
                }
                Ok(Err(_certain)) => refused = true,
                Err(error) => broken = Some(engine_failure(&error)),
            }
        }
    }
    if let Some(failure) = broken {
        return Err(failure);
    }
    let end = stream
        .finish(limits.judge_narration)
        .map_err(|error| engine_failure(&error))?;
    match end.reply {
        Ok(parsed) => {
            for recovery in &parsed.recoveries {
                count_recovery(*recovery);
            }
            if !parsed.recoveries.is_empty() {
                tracing::info!(recoveries = ?parsed.recoveries, "the envelope parser repaired the agent's envelopes");
            }
            let tail = match resumed.as_mut() {
                Some(resumed) => resumed.show(&end.tail).into_owned(),
                None => end.tail,
            };
            let tail = if separator_owed && !tail.is_empty() {
                format!("{TEXT_BLOCK_SEPARATOR}{tail}")
            } else {
                tail
            };
            Ok(Fed::Accepted {
                calls: parsed.reply.calls().cloned().collect(),
                tail,
                narrates: end.narrates,
            })
        }
        Err(failure) => Ok(Fed::Rejected(failure)),
    }
}

/// The message a streamed reply is (see [`Reply::streamed_message`]).
pub(crate) fn message(text: String, calls: Vec<ToolCall>) -> Reply {
    Reply::streamed_message(text, calls)
}

/// The message form of a finished reply (its shown text as one block, then its calls): what a
/// client accumulates from the stream, so a JSON answer is the same message.
pub(crate) fn message_of(reply: Reply) -> Reply {
    match reply {
        Reply::Text(text) => Reply::Text(text),
        Reply::Tools(blocks) => {
            let text = Reply::shown_text_of_blocks(&blocks).into_owned();
            let calls = blocks
                .into_iter()
                .filter_map(|block| match block {
                    ReplyBlock::Call(call) => Some(call),
                    ReplyBlock::Text(_) => None,
                })
                .collect();
            message(text, calls)
        }
    }
}

/// Text is sent once this many bytes wait, without waiting for [`COALESCE_WAIT`].
pub const COALESCE_BYTES: usize = 512;
/// Text waits at most this long after its first byte arrived before it is sent.
pub(crate) const COALESCE_WAIT: Duration = Duration::from_millis(40);

/// When the text waiting to be sent goes out: once [`COALESCE_BYTES`] wait, or
/// [`COALESCE_WAIT`] after the first of them arrived. A slow trickle is then one event per
/// 40 ms at most (not one per byte), a fast agent one event per 512 bytes or 40 ms (not one
/// per chunk), and no text waits long enough for a reader to notice.
#[derive(Debug, Default)]
pub(crate) struct Coalescer {
    pending: String,
    since: Option<tokio::time::Instant>,
}

impl Coalescer {
    /// Adds text that became certain.
    pub(crate) fn add(&mut self, text: &str, now: tokio::time::Instant) {
        if text.is_empty() {
            return;
        }
        if self.pending.is_empty() {
            self.since = Some(now);
        }
        self.pending.push_str(text);
    }

    /// When the pending text is due (`None`: nothing pending).
    pub(crate) fn due(&self) -> Option<tokio::time::Instant> {
        let since = self.since?;
        if self.pending.len() >= COALESCE_BYTES {
            return Some(since);
        }
        Some(since + COALESCE_WAIT)
    }

    /// Takes the pending text.
    pub(crate) fn take(&mut self) -> String {
        self.since = None;
        std::mem::take(&mut self.pending)
    }

    /// Bytes waiting.
    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "Bash".into(),
            input: "{}".into(),
        }
    }

    /// What a replay shows after a dead turn showed `already`, its text arriving in `pieces`.
    fn replayed(already: &str, pieces: &[&str]) -> String {
        let mut resumed = Resumed::after(already.to_owned());
        pieces.iter().map(|piece| resumed.show(piece)).collect()
    }

    #[test]
    fn a_replay_shows_only_what_goes_past_the_dead_turns_words() {
        // The same answer again: only its part past what was on screen.
        assert_eq!(
            replayed(
                "The change is do",
                &["The ", "change is done.", " Tests pass."]
            ),
            "ne. Tests pass."
        );
        // Exactly what was shown, and no more: nothing.
        assert_eq!(replayed("Done.", &["Do", "ne."]), "");
        // Something else: a paragraph break, then the replay's own text from its start.
        assert_eq!(
            replayed("I will look", &["I'll ", "check it."]),
            "\n\nI'll check it."
        );
        // Nothing was shown before: everything, as it comes.
        assert_eq!(replayed("", &["Hello", " there"]), "Hello there");
    }

    #[test]
    fn the_message_form_is_one_text_block_then_the_calls() {
        let reply = Reply::Tools(vec![
            ReplyBlock::Text("Let me look.".into()),
            ReplyBlock::Call(call("a")),
            ReplyBlock::Text("Then this.".into()),
            ReplyBlock::Call(call("b")),
        ]);
        assert_eq!(
            message_of(reply),
            Reply::Tools(vec![
                ReplyBlock::Text("Let me look.\n\nThen this.".into()),
                ReplyBlock::Call(call("a")),
                ReplyBlock::Call(call("b")),
            ])
        );
        assert_eq!(
            message_of(Reply::Tools(vec![ReplyBlock::Call(call("a"))])),
            Reply::Tools(vec![ReplyBlock::Call(call("a"))])
        );
        assert_eq!(message(String::new(), vec![]), Reply::Text(String::new()));
    }

    #[test]
    fn text_waits_for_enough_bytes_or_for_the_wait_after_its_first_byte() {
        let start = tokio::time::Instant::now();
        let mut coalescer = Coalescer::default();
        assert_eq!(coalescer.due(), None);
        coalescer.add("a", start);
        coalescer.add("b", start + Duration::from_millis(30));
        assert_eq!(coalescer.due(), Some(start + COALESCE_WAIT));
        coalescer.add(
            &"c".repeat(COALESCE_BYTES),
            start + Duration::from_millis(35),
        );
        assert_eq!(coalescer.due(), Some(start), "enough bytes are due at once");
        assert_eq!(coalescer.take().len(), COALESCE_BYTES + 2);
        assert_eq!(coalescer.pending_len(), 0);
        assert_eq!(coalescer.due(), None);
    }
}
