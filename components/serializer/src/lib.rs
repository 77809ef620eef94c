//! The serializer transform: an Anthropic Messages request becomes the framed plain-text
//! prompt that the tool-less summarizer agent answers.
//!
//! The trace is a sequence of sections separated by `---`: `[System]`, `[Available Tools]`,
//! `[Tool Choice]`, then one `[User]` or `[Assistant]` section per message. Before it comes a
//! fixed framing that tells the agent what the trace is and how to ask the client for a tool.
//! Every malformed or unsupported request is a typed 400 failure; nothing here panics on input.
//!
//! This crate is plain Rust (no clock, files, threads or randomness) so the same code runs
//! natively and inside the wasm component, and the two must agree byte for byte.

// The table of the transforms' functions names each library by its crate name, this one too
// (the component crate's exports are made from it).
extern crate self as devin_bridge_serializer;

mod failure;
mod framing;
mod images;
mod json;
mod messages;
mod request;
mod side_requests;
mod tools;
mod trace;

pub use devin_bridge_types::{
    Failure, Image, ImageLimits, LocalAnswer, MessageMark, Prompt, PromptOptions, Resume,
    ResumedPrompt, UnseenPrompt,
};

use crate::json::Json;
use crate::trace::Trace;

/// How many hex digits of the trace digest make the id seed.
const ID_SEED_HEX_DIGITS: usize = 24;

/// Serializes an Anthropic Messages request (JSON text) into the agent prompt.
///
/// Unknown fields are ignored. Fails with a 400 [`Failure`] when the request is not JSON, is
/// malformed, uses something the tool-less agent cannot represent (images, roles other than
/// user and assistant, unknown block types), or is inconsistent (a tool result without its
/// tool use, a tool use of an undeclared tool).
pub fn serialize(request: &str) -> Result<Prompt, Failure> {
    let Built {
        mut prompt,
        trace_start,
        ..
    } = build(request, 0, ImageLimits::NONE, false)?;
    let trace = prompt.text.get(trace_start..).unwrap_or_default();
    prompt.input_tokens = devin_bridge_types::estimate_tokens(trace);
    prompt.id_seed = id_seed(trace);
    Ok(prompt)
}

/// [`serialize`] for a session that has seen the first `options.held` messages of this
/// request's conversation: the prompt carries only the later ones (none when `held` covers them
/// all), and `history` lets the caller check that the session has seen exactly these messages.
/// Validation covers the whole request, whatever `held` is. With `options.images`, image blocks
/// are placeholders in the text and the images of the carried messages come with the prompt.
pub fn serialize_unseen(request: &str, options: PromptOptions) -> Result<UnseenPrompt, Failure> {
    let Built {
        mut prompt,
        trace_start,
        mut spans,
        images,
        tool_uses,
        tool_names,
    } = build(request, options.held, options.images, true)?;
    spans.measure_head(&prompt.text, trace_start);
    let digests = spans.digests(&prompt.text);
    prompt.id_seed = chain_seed(digests.last().copied().unwrap_or(spans.head_digest));
    let marks = spans.marks(&prompt.text, tool_uses);
    // The marks counted the trace's characters already: the last one has them all.
    let chars = marks
        .last()
        .map_or(spans.head_chars, |mark| mark.trace_chars);
    prompt.input_tokens = devin_bridge_types::tokens_for_chars(chars);
    let held = usize::try_from(options.held).unwrap_or(usize::MAX);
    if held > 0 {
        let from = spans
            .message_ends
            .get(held - 1)
            .copied()
            .unwrap_or(prompt.text.len());
        prompt.text = framing::continuation(&prompt.text[from..]);
    }
    Ok(UnseenPrompt {
        prompt,
        history: digests.into_iter().map(hex_digest).collect(),
        images,
        marks,
        tool_names,
    })
}

/// [`serialize_unseen`] of a request that repeats, byte for byte, an earlier request (one this
/// function or [`serialize_unseen`] accepted) up to the end of its message
/// `resume.messages - 1`, and whose bytes after its last message are the earlier request's
/// after its own last message. `continuation` is what lies between: the rest of the
/// `messages` array, `(ws "," ws message)* ws`. Given that, the request is the earlier one
/// with these messages in place of the earlier ones from `resume.messages` on, and everything
/// outside the continuation was validated already: only the continuation is parsed and
/// checked, and the answer agrees with what [`serialize_unseen`] says of the whole request.
///
/// `options.held` must be at least `resume.messages` (the text starts after the first `held`
/// messages, and only the continuation's are at hand). Any failure here may also be the
/// caller's mistake; serializing the whole request says what, if anything, is wrong with it.
pub fn serialize_resumed(
    continuation: &str,
    resume: &Resume,
    options: PromptOptions,
) -> Result<ResumedPrompt, Failure> {
    let before = usize::try_from(resume.messages).unwrap_or(usize::MAX);
    let held = usize::try_from(options.held).unwrap_or(usize::MAX);
    if before == 0 || held < before {
        return Err(failure::fail(
            failure::INVALID_RESUME,
            format!(
                "a continuation needs at least one message before it, and a session that holds \
                 them all (messages before it: {before}, held: {held})"
            ),
        ));
    }
    let previous = parse_digest(&resume.history).ok_or_else(|| {
        failure::fail(
            failure::INVALID_RESUME,
            "the resumed history identity is not 32 hex digits",
        )
    })?;
    let (messages, request_ends) = json::parse_elements(continuation, 2).map_err(|error| {
        failure::fail(
            failure::INVALID_JSON,
            format!("the request body is not valid JSON: {error}"),
        )
    })?;
    let declared = resume.tool_names.iter().map(String::as_str).collect();
    let known = messages::Before {
        count: before,
        tool_uses: resume.tool_uses.iter().map(String::as_str).collect(),
    };
    let mut trace = Trace::continuing(String::with_capacity(continuation.len() + 1024));
    let written = messages::write(&messages, known, &declared, &mut trace, options.images)?;
    let images = images::attach(&written.found, held, options.images);
    let (text, _, message_ends) = trace.finish();
    let spans = Spans {
        messages_start: 0,
        message_ends,
        request_ends,
        head_digest: previous,
        head_chars: resume.trace_chars,
    };
    let digests = spans.digests(&text);
    let last = digests.last().copied().unwrap_or(previous);
    let marks = spans.marks(&text, owned(written.tool_uses));
    let chars = marks
        .last()
        .map_or(resume.trace_chars, |mark| mark.trace_chars);
    let from = match held - before {
        0 => 0,
        carried => spans
            .message_ends
            .get(carried - 1)
            .copied()
            .unwrap_or(text.len()),
    };
    Ok(ResumedPrompt {
        text: framing::continuation(&text[from..]),
        input_tokens: devin_bridge_types::tokens_for_chars(chars),
        id_seed: chain_seed(last),
        history: digests.into_iter().map(hex_digest).collect(),
        marks,
        images,
        earlier_calls: written.calls,
    })
}

/// Where the trace and its messages sit in a prompt's text (or in a continuation's: then the
/// trace before its first message is elsewhere, summed up by the head fields).
struct Spans {
    /// Where the first message's sections begin (the head, system and tools, is before it).
    messages_start: usize,
    message_ends: Vec<usize>,
    /// Where each message ends in the request (or continuation) text.
    request_ends: Vec<usize>,
    /// The identity of the trace before the first message here.
    head_digest: u128,
    /// Characters of the trace before the first message here.
    head_chars: u64,
}

impl Spans {
    /// Sets the head's digest and length from the trace in `text` that begins at `trace_start`.
    fn measure_head(&mut self, text: &str, trace_start: usize) {
        let head = text
            .get(trace_start..self.messages_start)
            .unwrap_or_default();
        self.head_digest = xxhash_rust::xxh3::xxh3_128(head.as_bytes());
        self.head_chars = devin_bridge_types::text::count_chars(head) as u64;
    }

    /// The identity of every prefix of the trace that ends with a message: a chain, each
    /// link xxh3-128 over the previous link (the head's own digest before the first message)
    /// and the message's sections, so that a continuation can extend it from the last link
    /// alone.
    ///
    /// xxh3 rather than SHA-256: the identity tells a continued conversation from an edited
    /// one, sent by the same client, and is never a credential; a cryptographic hash of a
    /// 1 MB trace would cost milliseconds in wasm on every turn.
    fn digests(&self, text: &str) -> Vec<u128> {
        let mut link = self.head_digest;
        let mut at = self.messages_start;
        self.message_ends
            .iter()
            .map(|&end| {
                let mut hasher = xxhash_rust::xxh3::Xxh3::new();
                hasher.update(&link.to_le_bytes());
                hasher.update(text.as_bytes().get(at..end).unwrap_or_default());
                at = end;
                link = hasher.digest128();
                link
            })
            .collect()
    }

    /// Every message's mark.
    fn marks(&self, text: &str, tool_uses: Vec<Vec<String>>) -> Vec<MessageMark> {
        let mut chars = self.head_chars;
        let mut at = self.messages_start;
        let mut tool_uses = tool_uses.into_iter();
        self.message_ends
            .iter()
            .zip(&self.request_ends)
            .map(|(&end, &request_end)| {
                let section = text.get(at..end).unwrap_or_default();
                chars += devin_bridge_types::text::count_chars(section) as u64;
                at = end;
                MessageMark {
                    request_end: u32::try_from(request_end).unwrap_or(u32::MAX),
                    trace_chars: chars,
                    tool_uses: tool_uses.next().unwrap_or_default(),
                }
            })
            .collect()
    }
}

fn hex_digest(digest: u128) -> String {
    format!("{digest:032x}")
}

fn parse_digest(text: &str) -> Option<u128> {
    (text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u128::from_str_radix(text, 16).ok())
        .flatten()
}

/// The id seed of a prompt whose trace ends with the chain link `digest`: the seed changes
/// with every message, and costs nothing beyond the history.
fn chain_seed(digest: u128) -> String {
    let mut seed = hex_digest(digest);
    seed.truncate(ID_SEED_HEX_DIGITS);
    seed
}

fn owned(tool_uses: Vec<Vec<&str>>) -> Vec<Vec<String>> {
    tool_uses
        .into_iter()
        .map(|ids| ids.into_iter().map(str::to_owned).collect())
        .collect()
}

/// What [`build`] makes of a request.
struct Built {
    /// Without `input_tokens` and `id_seed`, which the callers derive each their own way.
    prompt: Prompt,
    /// Where the trace begins in the prompt's text.
    trace_start: usize,
    spans: Spans,
    images: Vec<Image>,
    /// The tool-use ids each message introduced (none unless built for marks).
    tool_uses: Vec<Vec<String>>,
    /// The declared tool names in request order (none unless built for marks).
    tool_names: Vec<String>,
}

/// The whole prompt, where its messages end, and the images to attach for a prompt that
/// carries the messages from `first_message` on. The tool uses and names are collected only
/// `for_marks` (a plain `serialize` has no use for them).
fn build(
    request: &str,
    first_message: u32,
    limits: ImageLimits,
    for_marks: bool,
) -> Result<Built, Failure> {
    let (root, request_ends) = json::parse_request(request).map_err(|error| {
        failure::fail(
            failure::INVALID_JSON,
            format!("the request body is not valid JSON: {error}"),
        )
    })?;
    if !matches!(root, Json::Object(_)) {
        return Err(failure::fail(
            failure::INVALID_REQUEST,
            format!(
                "the request body must be a JSON object, not {}",
                root.kind()
            ),
        ));
    }

    let model = request::model(&root)?;
    let stream = request::stream(&root)?;
    let toolset = tools::Toolset::read(&root)?;
    let choice = tools::ToolChoice::read(&root, &toolset)?;
    let system = request::System::read(&root)?;
    let messages = messages::of(&root)?;

    // The prompt is roughly the request's text plus the framing and the indentation of pretty
    // schemas; reserving that up front keeps a large request from reallocating repeatedly.
    let mut text =
        String::with_capacity(framing::PREAMBLE.len() + request.len() + request.len() / 4 + 1024);
    text.push_str(framing::PREAMBLE);
    let mut trace = Trace::after(text);
    system.write(&mut trace);
    toolset.write(&mut trace);
    let single_tool_call = choice.is_some_and(|choice| choice.single_call);
    if let Some(choice) = choice {
        choice.write(&mut trace);
    }
    let messages_start = trace.len();
    let before = messages::Before {
        count: 0,
        tool_uses: Default::default(),
    };
    let written = messages::write(messages, before, toolset.names(), &mut trace, limits)?;
    let images = images::attach(
        &written.found,
        usize::try_from(first_message).unwrap_or(usize::MAX),
        limits,
    );
    if trace.is_empty() {
        return Err(failure::fail(
            failure::EMPTY_MESSAGES,
            "the request has no messages and nothing else to serialize",
        ));
    }

    let (text, trace_start, message_ends) = trace.finish();
    // The head's digest and length are for `serialize_unseen` alone (see `Spans::measure_head`).
    let spans = Spans {
        messages_start,
        message_ends,
        request_ends,
        head_digest: 0,
        head_chars: 0,
    };

    let classifier_context = request::classifier_context(&root);
    // The judge reads the conversation only when it is asked to judge.
    let earlier_calls = if classifier_context.is_some() {
        written.calls
    } else {
        Vec::new()
    };
    Ok(Built {
        prompt: Prompt {
            tools: toolset.to_json(),
            input_tokens: 0,
            id_seed: String::new(),
            model: model.to_owned(),
            stream,
            single_tool_call,
            classifier_context,
            earlier_calls,
            effort: request::effort(&root),
            local_answer: side_requests::local_answer(&root),
            text,
        },
        trace_start,
        spans,
        images,
        tool_uses: if for_marks {
            owned(written.tool_uses)
        } else {
            Vec::new()
        },
        tool_names: if for_marks {
            toolset.names_in_order()
        } else {
            Vec::new()
        },
    })
}

/// The prompt for the single repair attempt after the agent's answer to `prompt` was rejected
/// with `rejection`: the original prompt plus a `[Single Repair Attempt]` section.
pub fn repair(prompt: &str, rejection: &Failure) -> String {
    framing::repair(prompt, rejection)
}

#[cfg(test)]
mod tests;

/// Bytes of the trace's start that the id seed covers.
pub const SEED_HEAD_BYTES: usize = 4 << 10;
/// Bytes of the trace's end that the id seed covers.
pub const SEED_TAIL_BYTES: usize = 60 << 10;

/// The id seed of a trace: the first 24 hex digits of xxh3-128 over the trace's length (8 bytes,
/// little endian) followed by the whole trace when it is at most 64 KiB, else by its first
/// 4 KiB and its last 60 KiB.
///
/// The seed only has to differ between turns so that tool-call ids do: it is neither a secret
/// nor a credential (the envelope derives each call id from it with SHA-256). A bounded part
/// keeps the cost flat on long conversations, and the seed still changes with every turn: a
/// turn appends to the end of the trace and grows it. xxh3 rather than SHA-256, which wasm
/// runs without SHA instructions: hashing 64 KiB with SHA-256 there took longer than the rest
/// of serializing a Claude-Code-sized request.
pub fn id_seed(trace: &str) -> String {
    let bytes = trace.as_bytes();
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(&(bytes.len() as u64).to_le_bytes());
    if bytes.len() <= SEED_HEAD_BYTES + SEED_TAIL_BYTES {
        hasher.update(bytes);
    } else {
        hasher.update(&bytes[..SEED_HEAD_BYTES]);
        hasher.update(&bytes[bytes.len() - SEED_TAIL_BYTES..]);
    }
    let mut seed = format!("{:032x}", hasher.digest128());
    seed.truncate(ID_SEED_HEX_DIGITS);
    seed
}
