//! The full agent's scenario markers: `[mock:NAME]` or `[mock:NAME ARGS]` anywhere in the
//! prompt text. They combine into one [`Plan`] for the turn:
//!
//! - steps (`tool`, `tool-kind`, `write`, `permission`, `malformed`, `client-request`,
//!   `extra-updates`) run in prompt order;
//! - the first outcome marker (`fail`, `refusal`, `max-tokens`, `exit`, `hang`, `echo`, `env`,
//!   `review-*`) decides how the turn ends (default: the text reply);
//! - modifiers (`model`, `slow`, `cache-tokens`, `late-close`, `no-stopped`,
//!   `replay-after-answer`) apply to the whole turn (the first of each wins).

use std::time::Duration;

/// The longest marker body read (`[mock:` to `]`): write paths may be long.
const MAX_MARKER: usize = 512;
/// At most this many steps per turn; further ones are ignored.
pub const MAX_STEPS: usize = 32;
/// `[mock:slow]` without a number.
pub const DEFAULT_SLOW: Duration = Duration::from_millis(500);
/// The longest `[mock:slow MS]` accepted (10 minutes).
const MAX_SLOW_MS: u64 = 600_000;

/// The failure a `[mock:fail KIND]` marker simulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
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

    pub fn name(self) -> &'static str {
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
pub enum Review {
    Json,
    Bad,
    None,
}

/// How the turn ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Outcome {
    /// `Devin mock: done. turns seen: N`.
    #[default]
    Text,
    Fail(Failure),
    Refusal,
    MaxTokens,
    Exit,
    Hang,
    Echo,
    Env,
    Review(Review),
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Fail(_) => "fail",
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
pub enum Step {
    /// A tool call named in `_meta["cognition.ai/toolName"]`, with an ACP kind.
    Tool { name: String, kind: String },
    /// A tool call identified by its ACP kind only.
    ToolKind { kind: String },
    /// A `write` tool call for a path (relative to the session's cwd, or absolute).
    Write { path: String },
    /// `session/request_permission`.
    Permission,
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
pub enum ClientMethod {
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

    pub fn name(self) -> &'static str {
        match self {
            Self::ReadTextFile => "fs/read_text_file",
            Self::WriteTextFile => "fs/write_text_file",
            Self::TerminalCreate => "terminal/create",
        }
    }
}

/// Everything the markers of one prompt ask for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub outcome: Outcome,
    pub model_label: Option<String>,
    pub slow: Option<Duration>,
    pub cache_tokens: bool,
    pub late_close: bool,
    pub no_stopped: bool,
    pub replay_after_answer: bool,
    /// Marker bodies that were not understood (reported on stderr).
    pub unknown: Vec<String>,
}

impl Plan {
    /// Reads every marker in `text`.
    pub fn parse(text: &str) -> Self {
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
    fn apply(&mut self, body: &str, outcome: &mut Option<Outcome>) -> bool {
        let (name, args) = match body.split_once(char::is_whitespace) {
            Some((name, args)) => (name, args.trim()),
            None => (body, ""),
        };
        let words: Vec<&str> = args.split_whitespace().collect();
        let mut set_outcome = |value: Outcome| {
            outcome.get_or_insert(value);
            true
        };
        match (name, words.as_slice()) {
            ("tool", [tool, kind]) => self.step(Step::Tool {
                name: (*tool).to_owned(),
                kind: (*kind).to_owned(),
            }),
            ("tool-kind", [kind]) => self.step(Step::ToolKind {
                kind: (*kind).to_owned(),
            }),
            ("write", [_, ..]) => self.step(Step::Write {
                path: args.to_owned(),
            }),
            ("permission", []) => self.step(Step::Permission),
            ("malformed", []) => self.step(Step::Malformed),
            ("extra-updates", []) => self.step(Step::ExtraUpdates),
            ("client-request", [method]) => match ClientMethod::from_name(method) {
                Some(method) => self.step(Step::ClientRequest { method }),
                None => false,
            },
            ("fail", [kind]) => match Failure::from_name(kind) {
                Some(failure) => set_outcome(Outcome::Fail(failure)),
                None => false,
            },
            ("refusal", []) => set_outcome(Outcome::Refusal),
            ("max-tokens", []) => set_outcome(Outcome::MaxTokens),
            ("exit", []) => set_outcome(Outcome::Exit),
            ("hang", []) => set_outcome(Outcome::Hang),
            ("echo", []) => set_outcome(Outcome::Echo),
            ("env", []) => set_outcome(Outcome::Env),
            ("review-json", []) => set_outcome(Outcome::Review(Review::Json)),
            ("review-bad", []) => set_outcome(Outcome::Review(Review::Bad)),
            ("review-none", []) => set_outcome(Outcome::Review(Review::None)),
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

    fn step(&mut self, step: Step) -> bool {
        if self.steps.len() < MAX_STEPS {
            self.steps.push(step);
        }
        true
    }
}

/// The bodies of the `[mock:...]` markers in `text`, in order. A body ends at the first `]`
/// within [`MAX_MARKER`] characters on the same line; anything else is not a marker.
pub fn marker_bodies(text: &str) -> Vec<&str> {
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
        assert_eq!(Plan::parse("Fix the bug, please."), Plan::default());
        assert_eq!(Plan::parse("").outcome, Outcome::Text);
    }

    #[test]
    fn steps_keep_prompt_order_and_outcome_first_wins() {
        let plan = Plan::parse(
            "[mock:write src/a.rs] then [mock:tool grep search] [mock:refusal] \
             [mock:tool-kind execute] [mock:fail quota] [mock:permission] [mock:malformed] \
             [mock:client-request terminal/create] [mock:extra-updates]",
        );
        assert_eq!(
            plan.steps,
            [
                Step::Write {
                    path: "src/a.rs".into()
                },
                Step::Tool {
                    name: "grep".into(),
                    kind: "search".into()
                },
                Step::ToolKind {
                    kind: "execute".into()
                },
                Step::Permission,
                Step::Malformed,
                Step::ClientRequest {
                    method: ClientMethod::TerminalCreate
                },
                Step::ExtraUpdates,
            ]
        );
        assert_eq!(plan.outcome, Outcome::Refusal);
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
            let plan = Plan::parse(&format!("x [mock:fail {name}] y"));
            assert_eq!(plan.outcome, Outcome::Fail(failure));
            assert_eq!(failure.name(), name);
        }
        assert_eq!(
            Plan::parse("[mock:fail nope]").unknown,
            vec!["fail nope".to_owned()]
        );
        assert_eq!(
            Plan::parse("[mock:review-bad]").outcome,
            Outcome::Review(Review::Bad)
        );
        assert_eq!(Plan::parse("[mock:max-tokens]").outcome, Outcome::MaxTokens);
    }

    #[test]
    fn modifiers_take_arguments() {
        let plan = Plan::parse(
            "[mock:model Custom Label 7] [mock:slow 1500] [mock:cache-tokens] [mock:late-close] \
             [mock:no-stopped] [mock:replay-after-answer] [mock:model other]",
        );
        assert_eq!(plan.model_label.as_deref(), Some("Custom Label 7"));
        assert_eq!(plan.slow, Some(Duration::from_millis(1500)));
        assert!(plan.cache_tokens && plan.late_close && plan.no_stopped);
        assert!(plan.replay_after_answer);
        assert_eq!(plan.outcome, Outcome::Text);
        assert_eq!(Plan::parse("[mock:slow]").slow, Some(DEFAULT_SLOW));
        assert_eq!(
            Plan::parse("[mock:slow soon]").unknown,
            vec!["slow soon".to_owned()]
        );
        assert_eq!(Plan::parse("[mock:slow 99999999]").slow, None);
    }

    #[test]
    fn malformed_markers_are_not_markers() {
        assert_eq!(marker_bodies("[mock:echo"), Vec::<&str>::new());
        assert_eq!(marker_bodies("[mock:\n[mock:echo]"), vec!["echo"]);
        assert_eq!(marker_bodies("[mock:  hang ]"), vec!["hang"]);
        let plan = Plan::parse(
            "[mock:tool onlyname] [mock:write] [mock:what] [mock:client-request fs/delete]",
        );
        assert_eq!(
            plan.unknown,
            vec!["tool onlyname", "write", "what", "client-request fs/delete"]
        );
        assert!(plan.steps.is_empty());
        let long = format!("[mock:write {}]", "a/".repeat(300));
        assert!(Plan::parse(&long).steps.is_empty());
    }

    #[test]
    fn steps_are_bounded() {
        let text = "[mock:tool-kind read]".repeat(MAX_STEPS + 5);
        assert_eq!(Plan::parse(&text).steps.len(), MAX_STEPS);
    }
}
