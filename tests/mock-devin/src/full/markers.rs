//! The full agent's dialect: `[mock:NAME]` or `[mock:NAME ARGS]` markers anywhere in the
//! prompt text. They combine into one [`Markers`], which [`plan`] turns into the turn's
//! [`Plan`]:
//!
//! - steps (`tool`, `tool-kind`, `write`, `permission`, `compaction`, `malformed`,
//!   `client-request`, `extra-updates`) run in prompt order;
//! - the first outcome marker (`fail`, `stop`, `refusal`, `max-tokens`, `exit`, `hang`, `echo`,
//!   `env`, `review-*`) decides how the turn ends (default: the text reply);
//! - modifiers (`model`, `slow`, `cache-tokens`, `late-close`, `no-stopped`,
//!   `replay-after-answer`) apply to the whole turn (the first of each wins).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::permissions::WRITTEN;
use super::store::Record;
use crate::plan::{environment, Ending, Plan, Reply, Step, Usage};
use crate::scenario::ErrorKind;
use crate::wire::{Fault, StopCause};

/// The longest marker body read (`[mock:` to `]`): write paths may be long.
const MAX_MARKER: usize = 512;
/// At most this many steps per turn; further ones are ignored.
pub(crate) const MAX_STEPS: usize = 32;
/// `[mock:slow]` without a number.
pub(crate) const DEFAULT_SLOW: Duration = Duration::from_millis(500);
/// The longest `[mock:slow MS]` accepted (10 minutes).
const MAX_SLOW_MS: u64 = 600_000;
/// The most permission requests `[mock:permission N]` makes for one command: the real agent
/// was seen asking 6 to 9 times after refusals.
pub(crate) const MAX_ASKS: u8 = 9;

/// The failure a `[mock:fail KIND]` marker simulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// -32000 "ACP host has not authenticated", no data.
    Auth,
    /// -32011, kind `resource_exhausted`.
    Quota,
    /// -32010, kind `unavailable`, a rate limit.
    RateLimited,
    /// -32010, kind `unavailable`, a connection error.
    Network,
    /// -32603, kind `internal`.
    Server,
    /// No JSON-RPC error: agent_stopped cause `error`, stopReason `end_turn`.
    Error,
}

impl Failure {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "auth" => Self::Auth,
            "quota" => Self::Quota,
            "rate_limited" => Self::RateLimited,
            "network" => Self::Network,
            "server" => Self::Server,
            "error" => Self::Error,
            _ => return None,
        })
    }

    /// The error it answers with (`error` answers none: it ends the turn normally).
    fn fault(self) -> Fault {
        match self {
            Self::Auth => Fault::NotAuthenticated,
            Self::Quota => Fault::Quota,
            Self::RateLimited => Fault::RateLimited,
            Self::Network => Fault::Connection,
            Self::Server | Self::Error => Fault::Internal,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::Quota => "quota",
            Self::RateLimited => "rate_limited",
            Self::Network => "network",
            Self::Server => "server",
            Self::Error => "error",
        }
    }
}

/// Which review reply a `[mock:review-*]` marker asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Review {
    Json,
    Bad,
    None,
}

/// How the turn ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum TurnEnding {
    /// `Devin mock: done. turns seen: N`.
    #[default]
    Text,
    Fail(Failure),
    /// An `agent_stopped` cause that is not an error, then `end_turn`.
    Stop(StopCause),
    Refusal,
    MaxTokens,
    Exit,
    Hang,
    Echo,
    Env,
    Review(Review),
}

impl TurnEnding {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Fail(_) => "fail",
            Self::Stop(_) => "stop",
            Self::Refusal => "refusal",
            Self::MaxTokens => "max-tokens",
            Self::Exit => "exit",
            Self::Hang => "hang",
            Self::Echo => "echo",
            Self::Env => "env",
            Self::Review(Review::Json) => "review-json",
            Self::Review(Review::Bad) => "review-bad",
            Self::Review(Review::None) => "review-none",
        }
    }
}

/// Something the agent does before its reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MarkerStep {
    /// A tool call with a name (`inferenceToolName` for a native tool, `toolName` for an MCP
    /// tool `mcp__server__tool`) and an ACP kind.
    Tool { name: String, kind: String },
    /// A tool call identified by its ACP kind only.
    ToolKind { kind: String },
    /// A `write` tool call for a path (relative to the session's cwd, or absolute).
    Write { path: String },
    /// `session/request_permission`, asked up to this many times while it is rejected.
    Permission { asks: u8 },
    /// Context compaction: display-only chunks and `_cognition.ai/compaction`.
    Compaction,
    /// A stdout line that is not JSON.
    Malformed,
    /// A request to the client (`fs/read_text_file`, `fs/write_text_file`, `terminal/create`).
    ClientRequest { method: ClientMethod },
    /// Session updates a client must tolerate: `plan`, `usage_update`, `current_mode_update`,
    /// `config_option_update` and an unknown variant.
    ExtraUpdates,
}

/// The client methods `[mock:client-request METHOD]` can call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClientMethod {
    ReadTextFile,
    WriteTextFile,
    TerminalCreate,
}

impl ClientMethod {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "fs/read_text_file" => Self::ReadTextFile,
            "fs/write_text_file" => Self::WriteTextFile,
            "terminal/create" => Self::TerminalCreate,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::ReadTextFile => "fs/read_text_file",
            Self::WriteTextFile => "fs/write_text_file",
            Self::TerminalCreate => "terminal/create",
        }
    }
}

/// Everything the markers of one prompt ask for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Markers {
    pub steps: Vec<MarkerStep>,
    pub outcome: TurnEnding,
    pub model_label: Option<String>,
    pub slow: Option<Duration>,
    pub cache_tokens: bool,
    pub late_close: bool,
    pub no_stopped: bool,
    pub replay_after_answer: bool,
    /// Marker bodies that were not understood (reported on stderr).
    pub unknown: Vec<String>,
}

impl Markers {
    /// Reads every marker in `text`.
    pub(crate) fn parse(text: &str) -> Self {
        let mut plan = Self::default();
        let mut outcome = None;
        for body in marker_bodies(text) {
            if !plan.apply(body, &mut outcome) {
                plan.unknown.push(body.to_owned());
            }
        }
        plan.outcome = outcome.unwrap_or_default();
        plan
    }

    /// Applies one marker body; false when it is not a known marker.
    fn apply(&mut self, body: &str, outcome: &mut Option<TurnEnding>) -> bool {
        let (name, args) = match body.split_once(char::is_whitespace) {
            Some((name, args)) => (name, args.trim()),
            None => (body, ""),
        };
        let words: Vec<&str> = args.split_whitespace().collect();
        let mut set_outcome = |value: TurnEnding| {
            outcome.get_or_insert(value);
            true
        };
        match (name, words.as_slice()) {
            ("tool", [tool, kind]) => self.step(MarkerStep::Tool {
                name: (*tool).to_owned(),
                kind: (*kind).to_owned(),
            }),
            ("tool-kind", [kind]) => self.step(MarkerStep::ToolKind {
                kind: (*kind).to_owned(),
            }),
            ("write", [_, ..]) => self.step(MarkerStep::Write {
                path: args.to_owned(),
            }),
            ("permission", []) => self.step(MarkerStep::Permission { asks: 1 }),
            ("permission", [asks]) => match asks.parse::<u8>() {
                Ok(asks @ 1..=MAX_ASKS) => self.step(MarkerStep::Permission { asks }),
                _ => false,
            },
            ("compaction", []) => self.step(MarkerStep::Compaction),
            ("stop", [cause]) => match StopCause::from_name(cause) {
                Some(cause) => set_outcome(TurnEnding::Stop(cause)),
                None => false,
            },
            ("malformed", []) => self.step(MarkerStep::Malformed),
            ("extra-updates", []) => self.step(MarkerStep::ExtraUpdates),
            ("client-request", [method]) => match ClientMethod::from_name(method) {
                Some(method) => self.step(MarkerStep::ClientRequest { method }),
                None => false,
            },
            ("fail", [kind]) => match Failure::from_name(kind) {
                Some(failure) => set_outcome(TurnEnding::Fail(failure)),
                None => false,
            },
            ("refusal", []) => set_outcome(TurnEnding::Refusal),
            ("max-tokens", []) => set_outcome(TurnEnding::MaxTokens),
            ("exit", []) => set_outcome(TurnEnding::Exit),
            ("hang", []) => set_outcome(TurnEnding::Hang),
            ("echo", []) => set_outcome(TurnEnding::Echo),
            ("env", []) => set_outcome(TurnEnding::Env),
            ("review-json", []) => set_outcome(TurnEnding::Review(Review::Json)),
            ("review-bad", []) => set_outcome(TurnEnding::Review(Review::Bad)),
            ("review-none", []) => set_outcome(TurnEnding::Review(Review::None)),
            ("model", [_, ..]) => {
                self.model_label.get_or_insert_with(|| args.to_owned());
                true
            }
            ("slow", []) => {
                self.slow.get_or_insert(DEFAULT_SLOW);
                true
            }
            ("slow", [ms]) => match ms.parse::<u64>() {
                Ok(ms) if ms <= MAX_SLOW_MS => {
                    self.slow.get_or_insert(Duration::from_millis(ms));
                    true
                }
                _ => false,
            },
            ("cache-tokens", []) => {
                self.cache_tokens = true;
                true
            }
            ("late-close", []) => {
                self.late_close = true;
                true
            }
            ("no-stopped", []) => {
                self.no_stopped = true;
                true
            }
            ("replay-after-answer", []) => {
                self.replay_after_answer = true;
                true
            }
            _ => false,
        }
    }

    fn step(&mut self, step: MarkerStep) -> bool {
        if self.steps.len() < MAX_STEPS {
            self.steps.push(step);
        }
        true
    }
}

const FAIL_ERROR_TEXT: &str = "Devin mock: the agent stopped after an internal error.";
const REFUSAL_TEXT: &str = "Devin mock: I can't help with that request.";
const MAX_TOKENS_TEXT: &str = "Devin mock: a partial answer, cut off at the output token limit";
const EXIT_TEXT: &str = "Devin mock: the agent is about to exit.";

/// The finding of `[mock:review-json]`.
pub(crate) fn review_json() -> Value {
    json!({
        "verdict": "request_changes",
        "summary": "The loop in a.rs reads one element past the end of the slice.",
        "findings": [{
            "severity": "high",
            "file": "a.rs",
            "line": 3,
            "title": "Off-by-one loop bound",
            "body": "`0..=len` indexes `items[len]`, which panics; use `0..len`.",
        }],
    })
}

/// `MOCK_DEVIN_SCENARIO` for the full agent: marker text (`[mock:refusal]`) or a bare marker
/// body (`refusal`, `fail quota`); it must name only known markers.
pub(crate) fn default_markers(value: &str) -> Result<String, String> {
    let value = value.trim();
    let text = if value.contains("[mock:") {
        value.to_owned()
    } else {
        format!("[mock:{value}]")
    };
    if !Markers::parse(&text).unknown.is_empty() || marker_bodies(&text).is_empty() {
        return Err(format!(
            "MOCK_DEVIN_SCENARIO {text:?} names no known full-agent marker"
        ));
    }
    Ok(text)
}

/// The turn that the markers of `text` (or, when it has none, of `default`) ask for in the
/// session `record` as the prompt found it, and the marker bodies that were not understood.
pub(crate) fn plan(default: Option<&str>, text: String, record: &Record) -> (Plan, Vec<String>) {
    let mut markers = Markers::parse(&text);
    if let (Some(default), true) = (default, marker_bodies(&text).is_empty()) {
        markers = Markers::parse(default);
    }
    let unknown = std::mem::take(&mut markers.unknown);
    let seen = format!("turns seen: {}", record.turns());
    let reply = |text: String, stop_reason, cause, with_notes| {
        Ending::Reply(Reply {
            stop_reason,
            cause,
            with_notes,
            // Replies may echo the prompt, which stays out of the log.
            log_text: false,
            ..Reply::text(text, "text")
        })
    };
    let ending = match markers.outcome {
        TurnEnding::Text => reply(
            format!("Devin mock: done. {seen}"),
            "end_turn",
            "complete",
            true,
        ),
        TurnEnding::Fail(Failure::Error) => {
            reply(FAIL_ERROR_TEXT.into(), "end_turn", "error", false)
        }
        TurnEnding::Fail(failure) => Ending::Fail {
            error: ErrorKind::Fault(failure.fault()),
            failure: Some(failure.name()),
        },
        TurnEnding::Stop(cause) => crate::bridge::stop_ending(cause),
        TurnEnding::Refusal => reply(REFUSAL_TEXT.into(), "refusal", "complete", false),
        TurnEnding::MaxTokens => reply(MAX_TOKENS_TEXT.into(), "max_tokens", "complete", false),
        TurnEnding::Exit => Ending::Exit(EXIT_TEXT),
        TurnEnding::Hang => Ending::Hang { grandchild: false },
        TurnEnding::Echo => reply(text.clone(), "end_turn", "complete", false),
        TurnEnding::Env => reply(environment(), "end_turn", "complete", false),
        TurnEnding::Review(review) => {
            let prose = format!("Devin mock review ({seen}).");
            let text = match review {
                Review::Json => format!(
                    "{prose} I read the change and found one problem.\n\n{}",
                    review_json()
                ),
                Review::Bad => format!(
                    "{prose} I could not decide.\n\n{}",
                    json!({"verdict": "maybe", "summary": "Unsure.", "findings": []})
                ),
                Review::None => {
                    format!("{prose} The change looks reasonable to me; no structured verdict.")
                }
            };
            reply(text, "end_turn", "complete", true)
        }
    };
    // A hang stops right after the prelude.
    let mut steps = vec![Step::Prelude];
    if markers.outcome != TurnEnding::Hang {
        steps.push(Step::Thought);
        steps.extend(markers.slow.map(Step::Wait));
        let file = Path::new(&record.cwd)
            .join("README.md")
            .display()
            .to_string();
        for (index, step) in markers.steps.iter().enumerate() {
            let call_id = format!("call_{}", index + 1);
            let next = match step {
                MarkerStep::Tool { name, kind } => Step::Tool {
                    call_id,
                    name: Some(name.clone()),
                    kind: kind.clone(),
                },
                MarkerStep::ToolKind { kind } => Step::Tool {
                    call_id,
                    name: None,
                    kind: kind.clone(),
                },
                MarkerStep::Write { path } => Step::Write {
                    call_id,
                    path: path.clone(),
                },
                MarkerStep::Permission { asks } => Step::Permission {
                    call_id,
                    title: "Run cargo test",
                    obeyed: true,
                    asks: *asks,
                },
                MarkerStep::Compaction => Step::Compaction,
                MarkerStep::Malformed => {
                    steps.push(Step::Line("this is not json".into()));
                    Step::Log("malformed_frame", json!({}))
                }
                MarkerStep::ClientRequest { method } => Step::Ask {
                    method: method.name(),
                    params: match method {
                        ClientMethod::ReadTextFile => json!({"path": file}),
                        ClientMethod::WriteTextFile => json!({"path": file, "content": WRITTEN}),
                        ClientMethod::TerminalCreate => {
                            json!({"command": "ls", "args": ["-la"], "cwd": record.cwd})
                        }
                    },
                    prefix: format!("client answered {}: ", method.name()),
                    tagged: true,
                    log: "client_answer",
                },
                MarkerStep::ExtraUpdates => Step::ExtraUpdates,
            };
            steps.push(next);
        }
    }
    let log = json!({"mode": record.mode, "turnsSeen": record.turns(),
                     "steps": markers.steps.len(), "chars": text.chars().count()});
    let mut plan = Plan::new(markers.outcome.name(), text, log, ending);
    plan.steps = steps;
    plan.label = markers.model_label;
    plan.usage = Usage::Counted {
        cached_half: markers.cache_tokens,
    };
    plan.stopped = !markers.no_stopped;
    plan.late_close = markers.late_close;
    plan.cancel_counts_output = true;
    (plan, unknown)
}

/// The bodies of the `[mock:...]` markers in `text`, in order. A body ends at the first `]`
/// within [`MAX_MARKER`] characters on the same line; anything else is not a marker.
pub(crate) fn marker_bodies(text: &str) -> Vec<&str> {
    const OPEN: &str = "[mock:";
    let mut bodies = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let end = after
            .char_indices()
            .take(MAX_MARKER)
            .find(|&(_, c)| c == ']' || c == '\n')
            .and_then(|(at, c)| (c == ']').then_some(at));
        match end {
            Some(end) => {
                bodies.push(after[..end].trim());
                rest = &after[end + 1..];
            }
            None => rest = after,
        }
    }
    bodies
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_marker_is_the_default_text_turn() {
        assert_eq!(Markers::parse("Fix the bug, please."), Markers::default());
        assert_eq!(Markers::parse("").outcome, TurnEnding::Text);
    }

    #[test]
    fn steps_keep_prompt_order_and_outcome_first_wins() {
        let plan = Markers::parse(
            "[mock:write src/a.rs] then [mock:tool grep search] [mock:refusal] \
             [mock:tool-kind execute] [mock:fail quota] [mock:permission] [mock:malformed] \
             [mock:client-request terminal/create] [mock:extra-updates]",
        );
        assert_eq!(
            plan.steps,
            [
                MarkerStep::Write {
                    path: "src/a.rs".into()
                },
                MarkerStep::Tool {
                    name: "grep".into(),
                    kind: "search".into()
                },
                MarkerStep::ToolKind {
                    kind: "execute".into()
                },
                MarkerStep::Permission { asks: 1 },
                MarkerStep::Malformed,
                MarkerStep::ClientRequest {
                    method: ClientMethod::TerminalCreate
                },
                MarkerStep::ExtraUpdates,
            ]
        );
        assert_eq!(plan.outcome, TurnEnding::Refusal);
        assert!(plan.unknown.is_empty());
    }

    #[test]
    fn failures_and_reviews() {
        for (name, failure) in [
            ("auth", Failure::Auth),
            ("quota", Failure::Quota),
            ("rate_limited", Failure::RateLimited),
            ("network", Failure::Network),
            ("server", Failure::Server),
            ("error", Failure::Error),
        ] {
            let plan = Markers::parse(&format!("x [mock:fail {name}] y"));
            assert_eq!(plan.outcome, TurnEnding::Fail(failure));
            assert_eq!(failure.name(), name);
        }
        assert_eq!(
            Markers::parse("[mock:fail nope]").unknown,
            vec!["fail nope".to_owned()]
        );
        assert_eq!(
            Markers::parse("[mock:review-bad]").outcome,
            TurnEnding::Review(Review::Bad)
        );
        assert_eq!(
            Markers::parse("[mock:max-tokens]").outcome,
            TurnEnding::MaxTokens
        );
    }

    #[test]
    fn stop_causes_compaction_and_repeated_asks() {
        for cause in StopCause::ALL {
            let plan = Markers::parse(&format!("[mock:stop {}]", cause.name()));
            assert_eq!(plan.outcome, TurnEnding::Stop(cause));
        }
        assert_eq!(
            Markers::parse("[mock:stop complete]").unknown,
            vec!["stop complete".to_owned()]
        );
        let plan = Markers::parse("[mock:compaction] [mock:permission 7]");
        assert_eq!(
            plan.steps,
            [MarkerStep::Compaction, MarkerStep::Permission { asks: 7 }]
        );
        // Bounded: no more than MAX_ASKS, and at least one.
        for bad in [
            "[mock:permission 10]",
            "[mock:permission 0]",
            "[mock:permission x]",
        ] {
            assert!(Markers::parse(bad).steps.is_empty(), "{bad}");
        }
    }

    #[test]
    fn modifiers_take_arguments() {
        let plan = Markers::parse(
            "[mock:model Custom Label 7] [mock:slow 1500] [mock:cache-tokens] [mock:late-close] \
             [mock:no-stopped] [mock:replay-after-answer] [mock:model other]",
        );
        assert_eq!(plan.model_label.as_deref(), Some("Custom Label 7"));
        assert_eq!(plan.slow, Some(Duration::from_millis(1500)));
        assert!(plan.cache_tokens && plan.late_close && plan.no_stopped);
        assert!(plan.replay_after_answer);
        assert_eq!(plan.outcome, TurnEnding::Text);
        assert_eq!(Markers::parse("[mock:slow]").slow, Some(DEFAULT_SLOW));
        assert_eq!(
            Markers::parse("[mock:slow soon]").unknown,
            vec!["slow soon".to_owned()]
        );
        assert_eq!(Markers::parse("[mock:slow 99999999]").slow, None);
    }

    #[test]
    fn malformed_markers_are_not_markers() {
        assert_eq!(marker_bodies("[mock:echo"), Vec::<&str>::new());
        assert_eq!(marker_bodies("[mock:\n[mock:echo]"), vec!["echo"]);
        assert_eq!(marker_bodies("[mock:  hang ]"), vec!["hang"]);
        let plan = Markers::parse(
            "[mock:tool onlyname] [mock:write] [mock:what] [mock:client-request fs/delete]",
        );
        assert_eq!(
            plan.unknown,
            vec!["tool onlyname", "write", "what", "client-request fs/delete"]
        );
        assert!(plan.steps.is_empty());
        let long = format!("[mock:write {}]", "a/".repeat(300));
        assert!(Markers::parse(&long).steps.is_empty());
    }

    #[test]
    fn steps_are_bounded() {
        let text = "[mock:tool-kind read]".repeat(MAX_STEPS + 5);
        assert_eq!(Markers::parse(&text).steps.len(), MAX_STEPS);
    }
}
