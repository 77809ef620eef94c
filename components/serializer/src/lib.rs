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

mod failure;
mod framing;
mod images;
mod json;
mod messages;
mod request;
mod tools;
mod trace;
/// The component export (a thin shell); off when another component embeds this library.
#[cfg(all(target_arch = "wasm32", feature = "export"))]
mod wasm;

use serde::{Deserialize, Serialize};

pub use devin_bridge_types::Failure;
pub use images::{Image, ImageLimits};

use crate::json::Json;
use crate::trace::Trace;

/// The prompt for one agent turn, and what the later transforms need to know about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// The whole prompt: framing, `[Execution Trace]`, then the serialized request.
    pub text: String,
    /// The request's `tools` array as compact JSON (`[]` when absent), for the envelope parser.
    pub tools: String,
    /// `max(1, ceil(chars / 4))` of the trace (the text after the framing).
    pub input_tokens: u32,
    /// 24 hex digits derived from the trace (see [`id_seed`]); seeds deterministic tool-call ids.
    pub id_seed: String,
    /// The request's `model`, verbatim.
    pub model: String,
    /// The request's `stream` flag, false when absent.
    pub stream: bool,
}

/// How many hex digits of the trace digest make the id seed.
const ID_SEED_HEX_DIGITS: usize = 24;

/// Serializes an Anthropic Messages request (JSON text) into the agent prompt.
///
/// Unknown fields are ignored. Fails with a 400 [`Failure`] when the request is not JSON, is
/// malformed, uses something the tool-less agent cannot represent (images, roles other than
/// user and assistant, unknown block types), or is inconsistent (a tool result without its
/// tool use, a tool use of an undeclared tool).
pub fn serialize(request: &str) -> Result<Prompt, Failure> {
    let (prompt, _, _) = build(request, 0, ImageLimits::NONE)?;
    Ok(prompt)
}

/// How [`serialize_unseen`] serializes a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptOptions {
    /// Messages the session already holds (0: a new session, the whole prompt).
    pub held: u32,
    /// Which images are attached (none: an image is an `unsupported_visual_block` failure).
    pub images: ImageLimits,
}

impl PromptOptions {
    /// A session that holds `held` messages, for an agent that takes no image.
    pub fn held(held: u32) -> Self {
        Self {
            held,
            images: ImageLimits::NONE,
        }
    }
}

/// A prompt for a session that may already hold the start of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnseenPrompt {
    /// `text` is the whole prompt when `held` is 0; otherwise the continuation framing and the
    /// messages after the first `held` ones. The other fields describe the whole request.
    pub prompt: Prompt,
    /// `history[i]`: the identity of the trace up to the end of message `i` (32 hex digits of
    /// xxh3-128 over the trace's system, tools and messages `0..=i`, as serialized). Two
    /// requests whose first `n` messages serialize identically, under the same system prompt
    /// and tools, share `history[..n]`.
    pub history: Vec<String>,
    /// The images that go with the prompt, in the order they appear (see `images`).
    pub images: Vec<Image>,
}

/// [`serialize`] for a session that has seen the first `options.held` messages of this
/// request's conversation: the prompt carries only the later ones (none when `held` covers them
/// all), and `history` lets the caller check that the session has seen exactly these messages.
/// Validation covers the whole request, whatever `held` is. With `options.images`, image blocks
/// are placeholders in the text and the images of the carried messages come with the prompt.
pub fn serialize_unseen(request: &str, options: PromptOptions) -> Result<UnseenPrompt, Failure> {
    let (mut prompt, spans, images) = build(request, options.held, options.images)?;
    let history = spans.history(&prompt.text);
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
        history,
        images,
    })
}

/// Where the trace and its messages sit in a prompt's text.
struct Spans {
    trace_start: usize,
    message_ends: Vec<usize>,
}

impl Spans {
    /// The identity of every prefix of the trace that ends with a message.
    ///
    /// xxh3 rather than SHA-256: the identity tells a continued conversation from an edited
    /// one, sent by the same client, and is never a credential; a cryptographic hash of a
    /// 1 MB trace would cost milliseconds in wasm on every turn.
    fn history(&self, text: &str) -> Vec<String> {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        let mut at = self.trace_start;
        self.message_ends
            .iter()
            .map(|&end| {
                hasher.update(text.as_bytes().get(at..end).unwrap_or_default());
                at = end;
                format!("{:032x}", hasher.digest128())
            })
            .collect()
    }
}

/// The whole prompt, where its messages end, and the images to attach for a prompt that
/// carries the messages from `first_message` on.
fn build(
    request: &str,
    first_message: u32,
    limits: ImageLimits,
) -> Result<(Prompt, Spans, Vec<Image>), Failure> {
    let root = Json::parse(request).map_err(|error| {
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
    let catalog = tools::Catalog::read(&root)?;
    let choice = tools::Choice::read(&root, &catalog)?;
    let system = request::System::read(&root)?;

    // The prompt is roughly the request's text plus the framing and the indentation of pretty
    // schemas; reserving that up front keeps a large request from reallocating repeatedly.
    let mut text =
        String::with_capacity(framing::PREAMBLE.len() + request.len() + request.len() / 4 + 1024);
    text.push_str(framing::PREAMBLE);
    let mut trace = Trace::after(text);
    system.write(&mut trace);
    catalog.write(&mut trace);
    if let Some(choice) = choice {
        choice.write(&mut trace);
    }
    let found = messages::write(&root, &catalog, &mut trace, limits)?;
    let images = images::attach(
        &found,
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
    let trace_text = text.get(trace_start..).unwrap_or_default();
    let input_tokens = devin_bridge_types::estimate_tokens(trace_text);
    let id_seed = id_seed(trace_text);

    Ok((
        Prompt {
            tools: catalog.to_json(),
            input_tokens,
            id_seed,
            model: model.to_owned(),
            stream,
            text,
        },
        Spans {
            trace_start,
            message_ends,
        },
        images,
    ))
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
