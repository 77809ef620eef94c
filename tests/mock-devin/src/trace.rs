//! Reading the prompt the bridge sends: the framing headers, the trace's sections, the last
//! `[User]` section, the `[Tool Result]` blocks and the names in `[Available Tools]`.
//!
//! The trace is the serializer's output: sections separated by `\n\n---\n\n`, each starting
//! with a header line. A separator only starts a section when a known header follows it, so a
//! horizontal rule inside a message does not split it. A repair prompt is the same prompt plus
//! a final `[Single Repair Attempt]` section.

pub(crate) const BRIDGE_HEADER: &str = "[Devin Summarizer Bridge]";
pub(crate) const TRACE_HEADER: &str = "[Execution Trace]";
/// The framing of a continuation: the messages a resident session has not seen yet.
pub(crate) const CONTINUED_BRIDGE_HEADER: &str = "[Devin Summarizer Bridge: continued]";
pub(crate) const CONTINUED_TRACE_HEADER: &str = "[Execution Trace: continued]";
pub(crate) const REPAIR_HEADER: &str = "[Single Repair Attempt]";
pub(crate) const SEPARATOR: &str = "\n\n---\n\n";
const TOOL_RESULT: &str = "[Tool Result]\ntool_use_id: ";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    System,
    AvailableTools,
    ToolChoice,
    User,
    Assistant,
    Repair,
    /// Text before the first recognised header.
    Other,
}

const HEADERS: [(&str, Kind); 6] = [
    ("[System]", Kind::System),
    ("[Available Tools]", Kind::AvailableTools),
    ("[Tool Choice]", Kind::ToolChoice),
    ("[User]", Kind::User),
    ("[Assistant]", Kind::Assistant),
    (REPAIR_HEADER, Kind::Repair),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Section<'a> {
    pub kind: Kind,
    pub body: &'a str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ToolResult<'a> {
    pub tool_use_id: &'a str,
    pub is_error: bool,
    /// The rendered content (empty for `content: (empty)`), plus any text blocks that follow
    /// it in the same message.
    pub content: &'a str,
}

#[derive(Debug)]
pub(crate) struct Prompt<'a> {
    pub sections: Vec<Section<'a>>,
}

/// Why a prompt is not a bridge prompt.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MissingFraming;

/// The trace of a continuation prompt (the text after its `[Execution Trace: continued]`
/// header), or `None` when `text` is not one.
pub(crate) fn continuation_trace(text: &str) -> Option<&str> {
    let bridge = text.find(CONTINUED_BRIDGE_HEADER)?;
    let at = text[bridge..].find(CONTINUED_TRACE_HEADER)?;
    let trace = &text[bridge + at + CONTINUED_TRACE_HEADER.len()..];
    Some(trace.strip_prefix('\n').unwrap_or(trace))
}

/// If `rest` starts with a known header line, its kind and the body after it.
fn header(rest: &str) -> Option<(Kind, &str)> {
    HEADERS.iter().find_map(|&(name, kind)| {
        let after = rest.strip_prefix(name)?;
        if after.is_empty() {
            Some((kind, after))
        } else {
            after.strip_prefix('\n').map(|body| (kind, body))
        }
    })
}

impl<'a> Prompt<'a> {
    /// Checks the framing headers and splits the trace (everything after the first
    /// `[Execution Trace]` header) into sections.
    pub(crate) fn parse(text: &'a str) -> Result<Self, MissingFraming> {
        let Some(bridge) = text.find(BRIDGE_HEADER) else {
            return Err(MissingFraming);
        };
        let Some(at) = text[bridge..].find(TRACE_HEADER) else {
            return Err(MissingFraming);
        };
        let trace = &text[bridge + at + TRACE_HEADER.len()..];
        let trace = trace.strip_prefix('\n').unwrap_or(trace);

        let mut sections = Vec::new();
        let (mut kind, mut body_start) = match header(trace) {
            Some((kind, body)) => (kind, trace.len() - body.len()),
            None => (Kind::Other, 0),
        };
        let mut search = body_start;
        while let Some(found) = trace[search..].find(SEPARATOR) {
            let at = search + found;
            let after = &trace[at + SEPARATOR.len()..];
            match header(after) {
                Some((next_kind, body)) => {
                    sections.push(Section {
                        kind,
                        body: &trace[body_start..at],
                    });
                    kind = next_kind;
                    body_start = trace.len() - body.len();
                    search = body_start;
                }
                None => search = at + 1,
            }
        }
        sections.push(Section {
            kind,
            body: &trace[body_start..],
        });
        Ok(Self { sections })
    }

    /// Whether this is the single repair attempt (its section comes last).
    pub(crate) fn is_repair(&self) -> bool {
        self.sections.last().is_some_and(|s| s.kind == Kind::Repair)
    }

    /// The body of the last `[User]` section.
    pub(crate) fn last_user(&self) -> Option<&'a str> {
        self.sections
            .iter()
            .rev()
            .find(|s| s.kind == Kind::User)
            .map(|s| s.body)
    }

    /// The bodies of the `[User]` sections, in order.
    pub(crate) fn user_bodies(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.sections
            .iter()
            .filter(|s| s.kind == Kind::User)
            .map(|s| s.body)
    }

    /// The tool names of `[Available Tools]`, in declaration order.
    pub(crate) fn tool_names(&self) -> Vec<&'a str> {
        let Some(section) = self
            .sections
            .iter()
            .find(|s| s.kind == Kind::AvailableTools)
        else {
            return Vec::new();
        };
        const START: &str = "\n\n[Tool: ";
        let body = section.body;
        let mut names = Vec::new();
        let mut search = 0;
        while let Some(found) = body[search..].find(START) {
            let name_start = search + found + START.len();
            search = name_start;
            let rest = &body[name_start..];
            let Some(end) = rest.find(']') else { break };
            let name = &rest[..end];
            let after = &rest[end + 1..];
            let well_formed = !name.is_empty()
                && !name.contains('\n')
                && (after.is_empty() || after.starts_with('\n'));
            if well_formed {
                names.push(name);
            }
        }
        names
    }

    /// Every `[Tool Result]` block of the trace's `[User]` sections, in order.
    pub(crate) fn tool_results(&self) -> Vec<ToolResult<'a>> {
        let mut results = Vec::new();
        for section in self.sections.iter().filter(|s| s.kind == Kind::User) {
            let body = section.body;
            let mut starts = Vec::new();
            if body.starts_with(TOOL_RESULT) {
                starts.push(0);
            }
            let mut search = 0;
            while let Some(found) = body[search..].find(&format!("\n\n{TOOL_RESULT}")) {
                let at = search + found + 2;
                starts.push(at);
                search = at;
            }
            for (index, &start) in starts.iter().enumerate() {
                let end = starts
                    .get(index + 1)
                    .map_or(body.len(), |&next| next.saturating_sub(2));
                if let Some(result) = parse_result(&body[start..end]) {
                    results.push(result);
                }
            }
        }
        results
    }
}

/// One `[Tool Result]` block: `tool_use_id: ID\nis_error: BOOL\ncontent:\nBODY` (or
/// `content: (empty)`).
fn parse_result(block: &str) -> Option<ToolResult<'_>> {
    let rest = block.strip_prefix(TOOL_RESULT)?;
    let (tool_use_id, rest) = rest.split_once('\n').unwrap_or((rest, ""));
    let (is_error, rest) = match rest.split_once('\n') {
        Some((line, rest)) if line.starts_with("is_error:") => {
            (line.trim_start_matches("is_error:").trim() == "true", rest)
        }
        _ => (false, rest),
    };
    let content = if let Some(body) = rest.strip_prefix("content:\n") {
        body
    } else if let Some(after) = rest.strip_prefix("content: (empty)") {
        after.trim_start_matches('\n')
    } else {
        rest.strip_prefix("content:").unwrap_or(rest)
    };
    Some(ToolResult {
        tool_use_id: tool_use_id.trim(),
        is_error,
        content,
    })
}

/// `text` without Claude Code's `<system-reminder>...</system-reminder>` blocks, trimmed.
pub(crate) fn without_reminders(text: &str) -> String {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        match rest[start..].find(CLOSE) {
            Some(end) => rest = &rest[start + end + CLOSE.len()..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prompt text the serializer produced for one of its golden fixtures.
    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/../fixtures/serializer/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let raw = std::fs::read_to_string(&path).expect("fixture");
        let value: serde_json::Value = serde_json::from_str(&raw).expect("fixture json");
        value["expect"]["ok"]["text"]
            .as_str()
            .expect("fixture text")
            .to_owned()
    }

    #[test]
    fn refuses_prompts_without_framing() {
        assert_eq!(Prompt::parse("[User]\nhi").err(), Some(MissingFraming));
        assert_eq!(
            Prompt::parse("[Devin Summarizer Bridge]\n[User]\nhi").err(),
            Some(MissingFraming)
        );
        assert_eq!(
            Prompt::parse("[Execution Trace]\n[Devin Summarizer Bridge]").err(),
            Some(MissingFraming)
        );
    }

    #[test]
    fn parses_the_serializer_tool_fixture() {
        let text = fixture("ok_tool_use_and_result");
        let prompt = Prompt::parse(&text).expect("framed");
        let kinds: Vec<Kind> = prompt.sections.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                Kind::AvailableTools,
                Kind::User,
                Kind::Assistant,
                Kind::User
            ]
        );
        assert_eq!(prompt.tool_names(), ["Read"]);
        assert!(!prompt.is_repair());
        assert_eq!(
            prompt.tool_results(),
            [ToolResult {
                tool_use_id: "toolu_01",
                is_error: false,
                content: "line one\nline two\n\nNow summarise it.",
            }]
        );
        assert!(prompt
            .last_user()
            .expect("user")
            .ends_with("Now summarise it."));
    }

    #[test]
    fn parses_a_claude_code_snapshot() {
        let text = fixture("ok_claude_code_regression_snapshot");
        let prompt = Prompt::parse(&text).expect("framed");
        let names = prompt.tool_names();
        assert_eq!(names.len(), 21);
        assert_eq!(names[..2], ["Task", "Bash"]);
        assert!(names.contains(&"Read") && names.contains(&"Edit"));
        assert_eq!(names.last(), Some(&"ListMcpResourcesTool"));
        let results = prompt.tool_results();
        assert_eq!(results.len(), 3);
        assert!(results[1].content.contains("     2→  return a + b;"));
        assert!(results[2].is_error);
        assert!(results[2].content.starts_with("> abacus@3.4.0 test"));
        let last = without_reminders(results[2].content);
        assert!(last.ends_with("ℹ fail 1"), "{last}");
        assert_eq!(prompt.sections[0].kind, Kind::System);
    }

    #[test]
    fn repair_section_and_horizontal_rules() {
        let text = "[Devin Summarizer Bridge]\nrules\n\n[Execution Trace]\n[User]\n\
                    before\n\n---\n\nafter [mock:tool]\n\n---\n\n[Single Repair Attempt]\n\
                    Your previous output was rejected.";
        let prompt = Prompt::parse(text).expect("framed");
        assert!(prompt.is_repair());
        assert_eq!(
            prompt.last_user(),
            Some("before\n\n---\n\nafter [mock:tool]")
        );
        assert!(prompt.tool_names().is_empty());
        assert!(prompt.tool_results().is_empty());
    }

    #[test]
    fn tool_results_in_one_message() {
        let text = "[Devin Summarizer Bridge]\n[Execution Trace]\n[User]\n\
                    [Tool Result]\ntool_use_id: a\nis_error: true\ncontent: (empty)\n\n\
                    [Tool Result]\ntool_use_id: b\nis_error: false\ncontent:\n/tmp/x\n\n\
                    <system-reminder>\nfail\n</system-reminder>";
        let prompt = Prompt::parse(text).expect("framed");
        let results = prompt.tool_results();
        assert_eq!(results.len(), 2);
        assert_eq!(
            results[0],
            ToolResult {
                tool_use_id: "a",
                is_error: true,
                content: ""
            }
        );
        assert_eq!(results[1].tool_use_id, "b");
        assert_eq!(without_reminders(results[1].content), "/tmp/x");
        assert_eq!(without_reminders("a<system-reminder>x"), "a");
    }
}
