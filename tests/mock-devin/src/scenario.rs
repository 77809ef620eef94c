//! The scenarios a prompt can select with a `[mock:NAME]` marker (or `MOCK_DEVIN_SCENARIO`).

use crate::wire::{Fault, StopCause};

/// The JSON-RPC error a `[mock:rpc-error=...]` marker answers the prompt with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// A well-formed error of the CLI.
    Fault(Fault),
    /// `data` with a number for the kind and a string for retryable, and a 200 KB message.
    BadShape,
    /// `data` is a string and there is no message.
    NotObject,
}

impl ErrorKind {
    /// The kind named after `rpc-error=`.
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "unavailable" | "rate_limited" => Self::Fault(Fault::RateLimited),
            "connection" => Self::Fault(Fault::Connection),
            "resource_exhausted" | "quota" => Self::Fault(Fault::Quota),
            "session_not_found" => Self::Fault(Fault::SessionNotFound),
            "auth" => Self::Fault(Fault::NotAuthenticated),
            "bad-shape" => Self::BadShape,
            "not-object" => Self::NotObject,
            _ => return None,
        })
    }
}

/// How a `[mock:prose-tool=...]` reply writes its call after a sentence of prose, as models
/// do: each shape is one the bridge must accept without a repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProseShape {
    /// A well-formed envelope.
    Plain,
    /// The envelope's closing tag is missing: the output ends after its JSON.
    Unclosed,
    /// The envelope's JSON sits in a Markdown ```json fence.
    FencedJson,
    /// The envelope's JSON has trailing commas.
    TrailingComma,
    /// The envelope holds a few words around its JSON object.
    StrayProse,
}

impl ProseShape {
    const ALL: [(&'static str, Self); 5] = [
        ("plain", Self::Plain),
        ("unclosed", Self::Unclosed),
        ("fenced-json", Self::FencedJson),
        ("trailing-comma", Self::TrailingComma),
        ("stray-prose", Self::StrayProse),
    ];

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, shape)| *shape)
    }

    fn name(self) -> &'static str {
        match self {
            Self::Plain => "prose-tool=plain",
            Self::Unclosed => "prose-tool=unclosed",
            Self::FencedJson => "prose-tool=fenced-json",
            Self::TrailingComma => "prose-tool=trailing-comma",
            Self::StrayProse => "prose-tool=stray-prose",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scenario {
    Text,
    Tool,
    NarrateThenTool,
    NarrateAlways,
    MalformedThenTool,
    TwoTools,
    /// A sentence announcing the call (and the step after it), then the call, in one of the
    /// shapes models write.
    ProseTool(ProseShape),
    RpcError(ErrorKind),
    Exit,
    /// A normal text answer, then the process exits (a process lost between turns).
    ExitAfter,
    /// The reply is the last `[User]` section, verbatim.
    LastUser,
    /// The reply counts the image blocks sent with the prompt.
    Images,
    /// Asks the client to Read the first `/...png` path of the user's text, then reports the
    /// images sent with the next prompt.
    ReadImage,
    /// Asks the client to run a destructive shell command (`rm -rf` of a directory beside the
    /// project), then reports the tool result the client sent back.
    Hostile,
    /// Delegates to a subagent with Claude Code's `Agent` tool (`Task` before it was renamed),
    /// then reports what the subagent answered.
    Subagent,
    Hang,
    ToolCall,
    ToolCallUpdate,
    LegacyUpdate,
    Permission,
    AgentRequest,
    MalformedFrame,
    Huge,
    Slow,
    /// 40 sentences of 100 bytes, one per chunk, 100 ms apart, each chunk logged.
    SlowLong,
    WrongSession,
    StrayResponse,
    Env,
    /// Reports its identity and tries to reach the host's private files (a hostile turn).
    Probe,
    /// Rewrites `package.json`'s test script to download and run a program, then runs
    /// `npm test` (a hostile model in two ordinary-looking steps; see `rewrite`).
    RewriteTestScript,
    Grandchild,
    /// A text answer whose result reports fixed counts, cache reads and writes included.
    Usage,
    /// A text answer whose result reports no usage.
    NoUsage,
    /// A text answer with a `usage_update` (context used) and no usage in the result.
    UsageUpdate,
    /// The reply names the session's current model (`model: <ACP id>`).
    Whoami,
    /// A text answer after the agent compacted its context (display-only chunks and a
    /// `_cognition.ai/compaction` notification first).
    Compaction,
    /// The turn ends with this `agent_stopped` cause, then an ordinary `end_turn`.
    Stop(StopCause),
    /// No marker: the default scripted coding session.
    Script,
}

/// Every marker name, as written inside `[mock:...]`.
pub(crate) const MARKERS: &[&str] = &[
    "text",
    "tool",
    "narrate-then-tool",
    "narrate-always",
    "malformed-then-tool",
    "two-tools",
    "prose-tool=plain",
    "prose-tool=unclosed",
    "prose-tool=fenced-json",
    "prose-tool=trailing-comma",
    "prose-tool=stray-prose",
    "rpc-error",
    "rpc-error=unavailable",
    "rpc-error=rate_limited",
    "rpc-error=connection",
    "rpc-error=resource_exhausted",
    "rpc-error=quota",
    "rpc-error=session_not_found",
    "rpc-error=auth",
    "rpc-error=bad-shape",
    "rpc-error=not-object",
    "whoami",
    "exit",
    "exit-after",
    "last-user",
    "images",
    "read-image",
    "hang",
    "tool-call",
    "tool-call-update",
    "legacy-update",
    "permission",
    "agent-request",
    "malformed-frame",
    "huge",
    "slow",
    "slow-long",
    "wrong-session",
    "stray-response",
    "env",
    "probe",
    "grandchild",
    "usage",
    "no-usage",
    "usage-update",
    "compaction",
    "stop=quota_exhausted",
    "stop=auth_required",
    "stop=content_filter",
    "stop=max_turn_requests",
    "stop=output_truncated",
];

impl Scenario {
    /// The scenario a marker name selects (`script` and `default` name the default script,
    /// for `MOCK_DEVIN_SCENARIO`).
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "text" => Self::Text,
            "tool" => Self::Tool,
            "narrate-then-tool" => Self::NarrateThenTool,
            "narrate-always" => Self::NarrateAlways,
            "malformed-then-tool" => Self::MalformedThenTool,
            "two-tools" => Self::TwoTools,
            "rpc-error" => Self::RpcError(ErrorKind::Fault(Fault::Internal)),
            "whoami" => Self::Whoami,
            "exit" => Self::Exit,
            "exit-after" => Self::ExitAfter,
            "last-user" => Self::LastUser,
            "images" => Self::Images,
            "read-image" => Self::ReadImage,
            "hostile" => Self::Hostile,
            "rewrite-test-script" => Self::RewriteTestScript,
            "subagent" => Self::Subagent,
            "hang" => Self::Hang,
            "tool-call" => Self::ToolCall,
            "tool-call-update" => Self::ToolCallUpdate,
            "legacy-update" => Self::LegacyUpdate,
            "permission" => Self::Permission,
            "agent-request" => Self::AgentRequest,
            "malformed-frame" => Self::MalformedFrame,
            "huge" => Self::Huge,
            "slow" => Self::Slow,
            "slow-long" => Self::SlowLong,
            "wrong-session" => Self::WrongSession,
            "stray-response" => Self::StrayResponse,
            "env" => Self::Env,
            "probe" => Self::Probe,
            "grandchild" => Self::Grandchild,
            "usage" => Self::Usage,
            "no-usage" => Self::NoUsage,
            "usage-update" => Self::UsageUpdate,
            "compaction" => Self::Compaction,
            "script" | "default" => Self::Script,
            _ => match name.split_once('=') {
                Some(("rpc-error", kind)) => Self::RpcError(ErrorKind::from_name(kind)?),
                Some(("stop", cause)) => Self::Stop(StopCause::from_name(cause)?),
                Some(("prose-tool", shape)) => Self::ProseTool(ProseShape::from_name(shape)?),
                _ => return None,
            },
        })
    }

    /// Reads `MOCK_DEVIN_SCENARIO`: a bare name (`text`) or a marker (`[mock:text]`).
    pub(crate) fn from_setting(value: &str) -> Option<Self> {
        let value = value.trim();
        let name = value
            .strip_prefix("[mock:")
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or(value);
        Self::from_name(name)
    }

    /// The name used in logs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Tool => "tool",
            Self::NarrateThenTool => "narrate-then-tool",
            Self::NarrateAlways => "narrate-always",
            Self::MalformedThenTool => "malformed-then-tool",
            Self::TwoTools => "two-tools",
            Self::ProseTool(shape) => shape.name(),
            Self::RpcError(ErrorKind::Fault(fault)) => match fault {
                Fault::Internal => "rpc-error",
                Fault::RateLimited => "rpc-error=unavailable",
                Fault::Connection => "rpc-error=connection",
                Fault::Quota => "rpc-error=resource_exhausted",
                Fault::SessionNotFound => "rpc-error=session_not_found",
                Fault::NotAuthenticated => "rpc-error=auth",
            },
            Self::RpcError(ErrorKind::BadShape) => "rpc-error=bad-shape",
            Self::RpcError(ErrorKind::NotObject) => "rpc-error=not-object",
            Self::Whoami => "whoami",
            Self::Exit => "exit",
            Self::ExitAfter => "exit-after",
            Self::LastUser => "last-user",
            Self::Images => "images",
            Self::ReadImage => "read-image",
            Self::Hostile => "hostile",
            Self::RewriteTestScript => "rewrite-test-script",
            Self::Subagent => "subagent",
            Self::Hang => "hang",
            Self::ToolCall => "tool-call",
            Self::ToolCallUpdate => "tool-call-update",
            Self::LegacyUpdate => "legacy-update",
            Self::Permission => "permission",
            Self::AgentRequest => "agent-request",
            Self::MalformedFrame => "malformed-frame",
            Self::Huge => "huge",
            Self::Slow => "slow",
            Self::SlowLong => "slow-long",
            Self::WrongSession => "wrong-session",
            Self::StrayResponse => "stray-response",
            Self::Env => "env",
            Self::Probe => "probe",
            Self::Grandchild => "grandchild",
            Self::Usage => "usage",
            Self::NoUsage => "no-usage",
            Self::UsageUpdate => "usage-update",
            Self::Compaction => "compaction",
            Self::Stop(cause) => match cause {
                StopCause::QuotaExhausted => "stop=quota_exhausted",
                StopCause::AuthRequired => "stop=auth_required",
                StopCause::ContentFilter => "stop=content_filter",
                StopCause::MaxTurnRequests => "stop=max_turn_requests",
                StopCause::OutputTruncated => "stop=output_truncated",
            },
            Self::Script => "script",
        }
    }

    /// Whether the agent stops answering for good (stdin EOF included).
    pub(crate) fn hangs(self) -> bool {
        matches!(self, Self::Hang | Self::Grandchild)
    }
}

/// What the markers in `text` select: the first known marker wins; unknown names are returned
/// so that the caller can warn about them.
pub(crate) fn find_marker(text: &str) -> (Option<Scenario>, Vec<&str>) {
    const OPEN: &str = "[mock:";
    let mut unknown = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        // Names are short; a `]` far away is not this marker's end.
        let end = after
            .char_indices()
            .take(64)
            .find(|&(_, c)| c == ']' || c == '\n')
            .and_then(|(at, c)| (c == ']').then_some(at));
        match end {
            Some(end) => {
                let name = &after[..end];
                match Scenario::from_name(name) {
                    Some(Scenario::Script) | None => unknown.push(name),
                    Some(scenario) => return (Some(scenario), unknown),
                }
                rest = &after[end + 1..];
            }
            None => rest = after,
        }
    }
    (None, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_marker_round_trips() {
        for &name in MARKERS {
            let scenario = Scenario::from_name(name).expect(name);
            assert_eq!(Scenario::from_name(scenario.name()), Some(scenario));
            assert_eq!(
                find_marker(&format!("do it [mock:{name}] now")).0,
                Some(scenario)
            );
        }
    }

    #[test]
    fn markers_in_text() {
        assert_eq!(find_marker("nothing here"), (None, vec![]));
        assert_eq!(
            find_marker("[mock:nope] then [mock:tool] and [mock:text]"),
            (Some(Scenario::Tool), vec!["nope"])
        );
        assert_eq!(
            find_marker("[mock:rpc-error=rate_limited]").0,
            Some(Scenario::RpcError(ErrorKind::Fault(Fault::RateLimited)))
        );
        assert_eq!(
            find_marker("[mock:rpc-error=quota]").0,
            Some(Scenario::RpcError(ErrorKind::Fault(Fault::Quota)))
        );
        // The invented PascalCase kinds are gone.
        for old in [
            "RateLimited",
            "ServerError",
            "Unauthenticated",
            "QuotaExceeded",
        ] {
            let marker = format!("[mock:rpc-error={old}]");
            assert_eq!(find_marker(&marker).0, None, "{old}");
        }
        assert_eq!(find_marker("[mock:script]"), (None, vec!["script"]));
        assert_eq!(find_marker("[mock:text"), (None, vec![]));
        assert_eq!(find_marker("[mock:\n[mock:hang]").0, Some(Scenario::Hang));
    }

    #[test]
    fn settings() {
        assert_eq!(Scenario::from_setting("text"), Some(Scenario::Text));
        assert_eq!(Scenario::from_setting("[mock:huge]"), Some(Scenario::Huge));
        assert_eq!(Scenario::from_setting("script"), Some(Scenario::Script));
        assert_eq!(Scenario::from_setting("bogus"), None);
    }
}
