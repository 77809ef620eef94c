//! The scenarios a prompt can select with a `[mock:NAME]` marker (or `MOCK_DEVIN_SCENARIO`).

/// The `cognition.ai/errorKind` of a simulated JSON-RPC error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    ServerError,
    RateLimited,
    Unauthenticated,
}

impl ErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::ServerError => "ServerError",
            Self::RateLimited => "RateLimited",
            Self::Unauthenticated => "Unauthenticated",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    Text,
    Tool,
    NarrateThenTool,
    NarrateAlways,
    MalformedThenTool,
    TwoTools,
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
    Hang,
    ToolCall,
    ToolCallUpdate,
    LegacyUpdate,
    Permission,
    AgentRequest,
    MalformedFrame,
    Huge,
    Slow,
    WrongSession,
    StrayResponse,
    Env,
    /// Reports its identity and tries to reach the host's private files (a hostile turn).
    Probe,
    Grandchild,
    /// A text answer whose result reports fixed counts, cache reads and writes included.
    Usage,
    /// A text answer whose result reports no usage.
    NoUsage,
    /// A text answer with a `usage_update` (context used) and no usage in the result.
    UsageUpdate,
    /// No marker: the default scripted coding session.
    Script,
}

/// Every marker name, as written inside `[mock:...]`.
pub const MARKERS: &[&str] = &[
    "text",
    "tool",
    "narrate-then-tool",
    "narrate-always",
    "malformed-then-tool",
    "two-tools",
    "rpc-error",
    "rpc-error=ServerError",
    "rpc-error=RateLimited",
    "rpc-error=Unauthenticated",
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
    "wrong-session",
    "stray-response",
    "env",
    "probe",
    "grandchild",
    "usage",
    "no-usage",
    "usage-update",
];

impl Scenario {
    /// The scenario a marker name selects (`script` and `default` name the default script,
    /// for `MOCK_DEVIN_SCENARIO`).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "text" => Self::Text,
            "tool" => Self::Tool,
            "narrate-then-tool" => Self::NarrateThenTool,
            "narrate-always" => Self::NarrateAlways,
            "malformed-then-tool" => Self::MalformedThenTool,
            "two-tools" => Self::TwoTools,
            "rpc-error" | "rpc-error=ServerError" => Self::RpcError(ErrorKind::ServerError),
            "rpc-error=RateLimited" => Self::RpcError(ErrorKind::RateLimited),
            "rpc-error=Unauthenticated" => Self::RpcError(ErrorKind::Unauthenticated),
            "exit" => Self::Exit,
            "exit-after" => Self::ExitAfter,
            "last-user" => Self::LastUser,
            "images" => Self::Images,
            "read-image" => Self::ReadImage,
            "hang" => Self::Hang,
            "tool-call" => Self::ToolCall,
            "tool-call-update" => Self::ToolCallUpdate,
            "legacy-update" => Self::LegacyUpdate,
            "permission" => Self::Permission,
            "agent-request" => Self::AgentRequest,
            "malformed-frame" => Self::MalformedFrame,
            "huge" => Self::Huge,
            "slow" => Self::Slow,
            "wrong-session" => Self::WrongSession,
            "stray-response" => Self::StrayResponse,
            "env" => Self::Env,
            "probe" => Self::Probe,
            "grandchild" => Self::Grandchild,
            "usage" => Self::Usage,
            "no-usage" => Self::NoUsage,
            "usage-update" => Self::UsageUpdate,
            "script" | "default" => Self::Script,
            _ => return None,
        })
    }

    /// Reads `MOCK_DEVIN_SCENARIO`: a bare name (`text`) or a marker (`[mock:text]`).
    pub fn from_setting(value: &str) -> Option<Self> {
        let value = value.trim();
        let name = value
            .strip_prefix("[mock:")
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or(value);
        Self::from_name(name)
    }

    /// The name used in logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Tool => "tool",
            Self::NarrateThenTool => "narrate-then-tool",
            Self::NarrateAlways => "narrate-always",
            Self::MalformedThenTool => "malformed-then-tool",
            Self::TwoTools => "two-tools",
            Self::RpcError(ErrorKind::ServerError) => "rpc-error",
            Self::RpcError(ErrorKind::RateLimited) => "rpc-error=RateLimited",
            Self::RpcError(ErrorKind::Unauthenticated) => "rpc-error=Unauthenticated",
            Self::Exit => "exit",
            Self::ExitAfter => "exit-after",
            Self::LastUser => "last-user",
            Self::Images => "images",
            Self::ReadImage => "read-image",
            Self::Hang => "hang",
            Self::ToolCall => "tool-call",
            Self::ToolCallUpdate => "tool-call-update",
            Self::LegacyUpdate => "legacy-update",
            Self::Permission => "permission",
            Self::AgentRequest => "agent-request",
            Self::MalformedFrame => "malformed-frame",
            Self::Huge => "huge",
            Self::Slow => "slow",
            Self::WrongSession => "wrong-session",
            Self::StrayResponse => "stray-response",
            Self::Env => "env",
            Self::Probe => "probe",
            Self::Grandchild => "grandchild",
            Self::Usage => "usage",
            Self::NoUsage => "no-usage",
            Self::UsageUpdate => "usage-update",
            Self::Script => "script",
        }
    }

    /// Whether the agent stops answering for good (stdin EOF included).
    pub fn hangs(self) -> bool {
        matches!(self, Self::Hang | Self::Grandchild)
    }
}

/// What the markers in `text` select: the first known marker wins; unknown names are returned
/// so that the caller can warn about them.
pub fn find_marker(text: &str) -> (Option<Scenario>, Vec<&str>) {
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
            find_marker("[mock:rpc-error=RateLimited]").0,
            Some(Scenario::RpcError(ErrorKind::RateLimited))
        );
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
