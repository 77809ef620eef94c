//! What a turn will do, decided before it starts: the steps in order, then the ending. The
//! summarizer's scenarios ([`crate::bridge`]) and the full agent's markers
//! ([`crate::full::markers`]) produce a [`Plan`]; the turn ([`crate::turn`]) plays it.

use std::time::Duration;

use serde_json::Value;

use crate::scenario::ErrorKind;
use crate::wire::Tokens;

/// Everything a turn does, decided before it starts.
pub(crate) struct Plan {
    /// The scenario's name in the turn's log lines.
    pub name: &'static str,
    /// The `prompt` log line's fields (the turn adds `sessionId`).
    pub log: Value,
    /// What the turn was decided on: its tokens are the input, and it is stored as the prompt.
    pub input: String,
    pub steps: Vec<Step>,
    pub ending: Ending,
    /// The model label reported instead of the session model's (`[mock:model LABEL]`).
    pub label: Option<String>,
    pub usage: Usage,
    /// `_cognition.ai/agent_stopped` is sent (not with `[mock:no-stopped]`).
    pub stopped: bool,
    /// stdin EOF ends the process only a while later (`[mock:late-close]`).
    pub late_close: bool,
    /// A cancelled turn reports the tokens of the reply streamed so far (else none).
    pub cancel_counts_output: bool,
}

impl Plan {
    /// A plan with no steps, counted usage and `agent_stopped`.
    pub(crate) fn new(name: &'static str, input: String, log: Value, ending: Ending) -> Self {
        Self {
            name,
            log,
            input,
            steps: Vec::new(),
            ending,
            label: None,
            usage: Usage::Counted { cached_half: false },
            stopped: true,
            late_close: false,
            cancel_counts_output: false,
        }
    }

    /// Whether the agent stops answering for good (stdin EOF included).
    pub(crate) fn hangs(&self) -> bool {
        matches!(self.ending, Ending::Hang { .. })
    }
}

/// What the prompt result's `usage` says.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Usage {
    /// Token counts of prompt and reply; cached reads half the input when `cached_half`.
    Counted { cached_half: bool },
    /// These counts for the turn's one model request, whatever the prompt.
    Fixed(Tokens),
    /// No usage.
    Omitted,
    /// No usage, but a `usage_update {used, size: 256000, _meta}` before turn_stats.
    Context(u64),
}

/// Something the agent does before its reply.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    /// `_cognition.ai/output` and `available_commands_update`: what a real turn sends before
    /// anything else.
    Prelude,
    /// An `agent_thought_chunk`.
    Thought,
    /// A log line, written when the turn gets here.
    Log(&'static str, Value),
    /// A wait with a grandchild `mock-devin --grandchild-sleep` in the process group, killed
    /// when the wait ends.
    Wait(Duration),
    /// A wait, as if the agent ran a tool itself.
    Pause(Duration),
    /// A session update, as given.
    Update(Value),
    /// A raw stdout line (not JSON, or a response nobody asked for).
    Line(String),
    /// A tool call with its ACP kind, pending then completed, named (when `name` is given) in
    /// `_meta["cognition.ai/toolName"]` for an MCP tool (`mcp__server__tool`) and in
    /// `_meta["cognition.ai/inferenceToolName"]` for a native one. Counted in agent_stopped;
    /// one model request of the turn.
    Tool {
        call_id: String,
        name: Option<String>,
        kind: String,
    },
    /// A `write` tool call that writes [`permissions::WRITTEN`] when the mode and the rules
    /// allow it; notes what happened.
    Write { call_id: String, path: String },
    /// A `tool_call` update, then `session/request_permission` whose `toolCall` holds only its
    /// id; notes `permission outcome: <outcome>`. A rejection fails the call, and the agent asks
    /// again with a new call, up to `asks` requests in all. When `obeyed`, the note names the
    /// selected option (and the number of asks when there were several) and a `cancelled`
    /// outcome cancels the turn.
    Permission {
        call_id: String,
        title: &'static str,
        obeyed: bool,
        asks: u8,
    },
    /// Context compaction: a display-only `agent_message_chunk` ("Compacting context...") and
    /// a `_cognition.ai/compaction` notification; neither is part of the reply.
    Compaction,
    /// A request to the client (the turn adds `sessionId` to `params`); notes `prefix` and the
    /// answer: its error code or result, each after `error `/`result ` when `tagged`. The
    /// answer is logged as `log`.
    Ask {
        method: &'static str,
        params: Value,
        prefix: String,
        tagged: bool,
        log: &'static str,
    },
    /// Session updates a client must tolerate: `plan`, `usage_update`, `current_mode_update`,
    /// `config_option_update` and an unknown variant.
    ExtraUpdates,
}

impl Step {
    /// Whether the step acts (a cancel that arrived before it is honoured first); the prelude,
    /// the thought, log lines and waits do not.
    pub(crate) fn acts(&self) -> bool {
        !matches!(
            self,
            Self::Prelude
                | Self::Thought
                | Self::Log(..)
                | Self::Wait(_)
                | Self::Pause(_)
                | Self::Compaction
        )
    }
}

/// How the turn ends.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ending {
    Reply(Reply),
    /// agent_stopped cause `error`, then this JSON-RPC error; `failure` is logged.
    Fail {
        error: ErrorKind,
        failure: Option<&'static str>,
    },
    /// The first half of this text, then exit status 3 before the result.
    Exit(&'static str),
    /// Nothing more, ever: cancel and stdin EOF are ignored (the host must kill the agent).
    Hang {
        grandchild: bool,
    },
}

/// The reply streamed as `agent_message_chunk` updates, then the result.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reply {
    pub chunks: Chunks,
    /// The notes of the steps come first, one per line.
    pub with_notes: bool,
    pub route: Route,
    pub stop_reason: &'static str,
    /// agent_stopped's cause.
    pub cause: &'static str,
    /// What the reply is, for the log.
    pub kind: &'static str,
    /// A short reply's text goes into the log.
    pub log_text: bool,
    /// Exit status 3 once the answer is out (a process lost between turns).
    pub exit_after: bool,
    /// Each chunk is logged (`chunk`) just before it is sent.
    pub log_chunks: bool,
    /// agent_stopped's `errorMessage`.
    pub error_message: Option<&'static str>,
}

impl Reply {
    /// `text` in two chunks, stopReason `end_turn`, cause `complete`.
    pub(crate) fn text(text: impl Into<String>, kind: &'static str) -> Self {
        Self {
            chunks: Chunks::Halves(text.into()),
            with_notes: false,
            route: Route::Update,
            stop_reason: "end_turn",
            cause: "complete",
            kind,
            log_text: true,
            exit_after: false,
            log_chunks: false,
            error_message: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Chunks {
    /// The text (after any notes) split in two at its middle; an empty text sends no chunk.
    Halves(String),
    /// These parts, with a wait between two.
    Parts(Vec<String>, Duration),
}

/// How chunks are delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Update,
    /// The legacy `$/update` method with flat params.
    Legacy,
    /// `session/update` with somebody else's session id.
    WrongSession,
}

/// `max(1, ceil(chars / 4))`, the bridge's own estimate.
pub(crate) fn tokens(text: &str) -> u64 {
    let chars = text.chars().count() as u64;
    chars.div_ceil(4).max(1)
}

/// Splits `text` in two at the character boundary nearest its middle.
pub(crate) fn halves(text: &str) -> [&str; 2] {
    let mut at = text.len() / 2;
    while !text.is_char_boundary(at) {
        at += 1;
    }
    let (a, b) = text.split_at(at);
    [a, b]
}

/// `NAME=VALUE` lines for the whole environment, sorted by name.
pub(crate) fn environment() -> String {
    let mut vars: Vec<(String, String)> = std::env::vars_os()
        .map(|(name, value)| {
            (
                name.to_string_lossy().into_owned(),
                value.to_string_lossy().into_owned(),
            )
        })
        .collect();
    vars.sort();
    if vars.is_empty() {
        return "(empty environment)".to_owned();
    }
    vars.iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join("\n")
}
