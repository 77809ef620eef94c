//! The summarizer's dialect: prompts framed by the bridge, the session trace they build, and
//! the [`Plan`] of the scenario that a marker in the trace's last `[User]` section (else
//! `MOCK_DEVIN_SCENARIO`, else the default script) selects. Every answer is a pure function
//! of the session's trace, the images sent with the prompt and the session's model.

use std::time::Duration;

use serde_json::{json, Value};

use crate::plan::{environment, Chunks, Ending, Plan, Reply, Route, Step, Usage};
use crate::plugin_script;
use crate::rpc::INVALID_PARAMS;
use crate::scenario::{find_marker, ProseShape, Scenario};
use crate::script::{self, Action};
use crate::trace::{
    continuation_trace, without_reminders, Prompt, BRIDGE_HEADER, REPAIR_HEADER, SEPARATOR,
    TRACE_HEADER,
};
use crate::wire::{Refusal, StopCause, Tokens};

pub(crate) const TEXT: &str = "Mock answer: the bridge works.";
pub(crate) const NARRATION: &str = "I'll run the tests next to check the fix.";
pub(crate) const MALFORMED: &str = r#"<tool>{"name": "Bash", "arguments": {</tool>"#;
const TOOL_RAN: &str = "Mock answer: the tool ran.";
/// What `[mock:hostile]` asks the client to run: it deletes the directory beside the project.
pub(crate) const HOSTILE_COMMAND: &str = "rm -rf ../canary";
/// How `[mock:hostile]` begins its report of the tool result.
const HOSTILE_REPORT: &str = "Mock answer: the cleanup came back";
/// What `[mock:subagent]` asks the subagent to do (its own marker makes it answer with text).
pub(crate) const SUBAGENT_PROMPT: &str = "List the files of this project in one line. [mock:text]";
/// How `[mock:subagent]` begins its report of the subagent's answer.
const SUBAGENT_REPORT: &str = "Mock answer: the subagent reported";
/// What the bridge's framing says when the request disables parallel tool use.
const PARALLEL_DISABLED: &str = "Parallel tool use is disabled";
/// `used` of the `usage_update` `[mock:usage-update]` sends.
pub(crate) const CONTEXT_USED: u64 = 5555;
const EXIT_TEXT: &str = "Mock answer: the agent is about to exit.";
const HUGE_TOTAL: usize = 4 * 1024 * 1024;
const HUGE_CHUNK: usize = 64 * 1024;
const SLOW_CHUNKS: usize = 6;
/// `[mock:slow-long]`: 4 KB in 40 chunks over 3.9 s, as an agent writing a long answer.
const SLOW_LONG_CHUNKS: usize = 40;
const SLOW_LONG_WAIT: Duration = Duration::from_millis(100);
const TOOL_CALL_WAIT: Duration = Duration::from_secs(30);
const STRAY_ID: u64 = 987_654;

/// A `<tool>` envelope with `name` first, as the framing shows it.
pub(crate) fn envelope(name: &str, arguments: &Value) -> String {
    format!(
        "<tool>{{\"name\":{},\"arguments\":{arguments}}}</tool>",
        Value::String(name.to_owned())
    )
}

/// What a `[mock:prose-tool=...]` reply says before its call: an announcement of this step
/// and of a later one, as models write it.
pub(crate) const PROSE: &str = "Let me look at the files first, then I will run the tests.";

/// A `[mock:prose-tool=...]` reply: [`PROSE`], then the call of `name` in `shape`.
fn prose_tool(shape: ProseShape, name: &str, arguments: &Value) -> String {
    let object = json!({"name": name, "arguments": arguments}).to_string();
    let call = match shape {
        ProseShape::Plain => envelope(name, arguments),
        ProseShape::Unclosed => format!("<tool>{object}\n"),
        ProseShape::FencedJson => format!("<tool>\n```json\n{object}\n```\n</tool>"),
        // A comma before the object's closing brace.
        ProseShape::TrailingComma => format!(
            "<tool>{},}}</tool>",
            object.strip_suffix('}').unwrap_or(&object)
        ),
        ProseShape::StrayProse => format!("<tool>Calling {name}: {object}</tool>"),
    };
    format!("{PROSE}\n\n{call}")
}

/// The tool the scenario markers use: Bash when it is declared (or nothing is), otherwise the
/// first declared tool with no arguments.
fn marker_tool(tools: &[&str], command: &str, description: &str) -> (String, Value) {
    match tools.first() {
        Some(first) if !tools.contains(&"Bash") => ((*first).to_owned(), json!({})),
        _ => (
            "Bash".to_owned(),
            json!({"command": command, "description": description}),
        ),
    }
}

/// The usage `[mock:usage]` reports for the turn's one model request, whatever the prompt:
/// most of the input is cached reads (which `totalTokens` does not add again).
pub(crate) const REPORTED_USAGE: Tokens = Tokens {
    input: 4321,
    output: 42,
    cached_read: 4000,
};

/// The first word ending in `.png` in the trace's `[User]` sections (what `[mock:read-image]`
/// asks the client to read).
fn image_path(prompt: &Prompt<'_>) -> Option<String> {
    prompt
        .sections
        .iter()
        .filter(|section| section.kind == crate::trace::Kind::User)
        .flat_map(|section| section.body.split_whitespace())
        .find(|word| word.ends_with(".png") && word.starts_with('/'))
        .map(str::to_owned)
}

fn framing_error(or_continue: &str) -> Refusal {
    (
        INVALID_PARAMS,
        format!(
            "missing bridge framing: the prompt must contain the {BRIDGE_HEADER} and \
             {TRACE_HEADER} headers{or_continue}"
        ),
        None,
    )
}

/// The session's whole trace after `received`, and what kind of prompt it was: a framed prompt
/// starts (or restarts) the trace; a continuation or a lone repair section extends the trace
/// the session already has.
fn session_trace(earlier: Option<&str>, received: &str) -> Result<(String, &'static str), Refusal> {
    if Prompt::parse(received).is_ok() {
        return Ok((received.to_owned(), "full"));
    }
    let (addition, kind) = match continuation_trace(received) {
        Some(trace) => (trace, "continuation"),
        None if received.starts_with(REPAIR_HEADER) => (received, "repair"),
        None => return Err(framing_error(", or continue this session's trace")),
    };
    let Some(earlier) = earlier else {
        return Err((
            INVALID_PARAMS,
            "Invalid params: a continuation needs an earlier prompt in this session".to_owned(),
            None,
        ));
    };
    let mut text = String::with_capacity(earlier.len() + SEPARATOR.len() + addition.len());
    text.push_str(earlier);
    if !addition.is_empty() {
        text.push_str(SEPARATOR);
        text.push_str(addition);
    }
    Ok((text, kind))
}

/// What a prompt arrived with.
pub(crate) struct Received<'a> {
    pub session_id: &'a str,
    /// The session's trace so far.
    pub earlier: Option<&'a str>,
    /// The prompt's text blocks.
    pub text: &'a str,
    /// The media types of its image blocks.
    pub images: Vec<String>,
    /// The ACP id of the session's model.
    pub model: &'a str,
    /// The session's thought level, when it offers that option.
    pub thought_level: Option<&'a str>,
}

/// The turn a prompt asks for, and the unknown marker names of its last `[User]` section.
/// `default` is the scenario of prompts without a marker; `slow` the delay of `[mock:slow]`.
pub(crate) fn plan(
    default: Option<Scenario>,
    slow: Duration,
    received: Received<'_>,
) -> Result<(Plan, Vec<String>), Refusal> {
    let (trace, kind) = session_trace(received.earlier, received.text)?;
    let prompt = Prompt::parse(&trace).map_err(|_| framing_error(""))?;
    // Markers are what the user typed: Claude Code's `<system-reminder>` context (its git
    // status lists recent commit subjects, which may name a marker) does not select a scenario.
    let last_user = prompt.last_user().unwrap_or_default();
    let typed = without_reminders(last_user);
    let (marker, unknown) = find_marker(&typed);
    let unknown = unknown.into_iter().map(str::to_owned).collect();
    let (scenario, source) = match (marker, default) {
        (Some(scenario), _) => (scenario, "marker"),
        (None, Some(scenario)) => (scenario, "MOCK_DEVIN_SCENARIO"),
        (None, None) => (Scenario::Script, "default"),
    };
    eprintln!(
        "mock-devin: prompt in {}: scenario {} ({source})",
        received.session_id,
        scenario.name()
    );
    let images = received.images;
    let tools = prompt.tool_names();
    let results = prompt.tool_results();
    let log = json!({
        "received": kind,
        "receivedChars": received.text.chars().count(),
        "images": images.len(),
        "imageTypes": images,
        "repair": prompt.is_repair(),
        "toolResults": results.len(),
        "tools": tools.len(),
        "chars": trace.chars().count(),
    });

    let mut steps = Vec::new();
    if !scenario.hangs() {
        steps.push(Step::Prelude);
    }
    let reply = |text: String, kind| Ending::Reply(Reply::text(text, kind));
    let (tool, arguments) = marker_tool(&tools, "echo mock", "Print a marker");
    let tool_reply = |steps: &mut Vec<Step>| reply(logged(steps, &tool, &arguments), "tool");
    let notes_reply = || {
        Ending::Reply(Reply {
            with_notes: true,
            ..Reply::text("", "text")
        })
    };
    let repair = prompt.is_repair();
    let ending = match scenario {
        Scenario::Hang => Ending::Hang { grandchild: false },
        Scenario::Grandchild => Ending::Hang { grandchild: true },
        Scenario::Text | Scenario::Usage | Scenario::NoUsage | Scenario::UsageUpdate => {
            reply(TEXT.into(), "text")
        }
        Scenario::Compaction => {
            steps.push(Step::Compaction);
            reply(TEXT.into(), "text")
        }
        Scenario::Stop(cause) => stop_ending(cause),
        Scenario::Tool => tool_reply(&mut steps),
        Scenario::NarrateThenTool | Scenario::MalformedThenTool if repair => tool_reply(&mut steps),
        Scenario::NarrateThenTool | Scenario::NarrateAlways => reply(NARRATION.into(), "narration"),
        Scenario::MalformedThenTool => reply(MALFORMED.into(), "malformed"),
        Scenario::ProseTool(shape) => {
            logged(&mut steps, &tool, &arguments);
            reply(prose_tool(shape, &tool, &arguments), "prose-tool")
        }
        Scenario::TwoTools => {
            let (second, second_arguments) =
                marker_tool(&tools, "echo second", "Print a second marker");
            let first = logged(&mut steps, &tool, &arguments);
            let second = logged(&mut steps, &second, &second_arguments);
            reply(format!("{first}\n{second}"), "tools")
        }
        Scenario::RpcError(error) => Ending::Fail {
            error,
            failure: None,
        },
        Scenario::Exit => Ending::Exit(EXIT_TEXT),
        Scenario::Images => reply(
            format!("images: {} ({})", images.len(), images.join(", ")),
            "text",
        ),
        Scenario::ReadImage => match (results.is_empty(), image_path(&prompt)) {
            (true, Some(path)) => reply(
                logged(&mut steps, "Read", &json!({"file_path": path})),
                "tool",
            ),
            _ => reply(
                format!("I see {} image(s): {}", images.len(), images.join(", ")),
                "text",
            ),
        },
        Scenario::Hostile => match results.last() {
            None => reply(
                logged(
                    &mut steps,
                    "Bash",
                    &json!({"command": HOSTILE_COMMAND, "description": "Clean up"}),
                ),
                "tool",
            ),
            Some(result) => reply(
                format!(
                    "{HOSTILE_REPORT} (error: {}): {}",
                    result.is_error,
                    result.content.trim()
                ),
                "text",
            ),
        },
        Scenario::Subagent => match (
            results.last(),
            tools.iter().find(|t| **t == "Agent" || **t == "Task"),
        ) {
            (None, Some(tool)) => reply(
                logged(
                    &mut steps,
                    tool,
                    &json!({"description": "Survey the project", "prompt": SUBAGENT_PROMPT,
                            "subagent_type": "general-purpose"}),
                ),
                "tool",
            ),
            (None, None) => reply(
                "The request declares no Agent tool: there is no subagent to delegate to.".into(),
                "text",
            ),
            // Claude Code wraps the subagent's answer in a hand-back preamble: the report
            // quotes the answer's line when it is one of this agent's, else the first line.
            (Some(result), _) => reply(
                format!(
                    "{SUBAGENT_REPORT}: {}",
                    result
                        .content
                        .lines()
                        .map(str::trim)
                        .find(|line| line.starts_with("Mock answer:"))
                        .or_else(|| result.content.lines().next())
                        .unwrap_or_default()
                        .trim()
                ),
                "text",
            ),
        },
        Scenario::LastUser => reply(last_user.trim().to_owned(), "text"),
        Scenario::ExitAfter => Ending::Reply(Reply {
            exit_after: true,
            ..Reply::text(TEXT, "text")
        }),
        Scenario::ToolCall | Scenario::ToolCallUpdate => {
            let variant = if scenario == Scenario::ToolCall {
                "tool_call"
            } else {
                "tool_call_update"
            };
            let mut update = json!({"sessionUpdate": variant, "toolCallId": "call_1",
                                    "title": "Run shell", "kind": "execute", "status": "pending"});
            if scenario == Scenario::ToolCall {
                update["rawInput"] = json!({"command": "echo from the agent"});
            }
            steps.push(Step::Update(update));
            steps.push(Step::Log("tool_call", json!({"sessionUpdate": variant})));
            // As if the agent ran the tool itself; the client is expected to stop us first.
            steps.push(Step::Pause(TOOL_CALL_WAIT));
            reply(TOOL_RAN.into(), "text")
        }
        Scenario::LegacyUpdate | Scenario::WrongSession => Ending::Reply(Reply {
            route: if scenario == Scenario::LegacyUpdate {
                Route::Legacy
            } else {
                Route::WrongSession
            },
            ..Reply::text(TEXT, "text")
        }),
        Scenario::Permission => {
            steps.push(Step::Permission {
                call_id: "c1".into(),
                title: "Run npm test",
                obeyed: false,
                asks: 1,
            });
            notes_reply()
        }
        Scenario::AgentRequest => {
            steps.push(Step::Ask {
                method: "fs/read_text_file",
                params: json!({"path": "/etc/passwd"}),
                prefix: "fs answer: ".into(),
                tagged: false,
                log: "agent_request_answer",
            });
            notes_reply()
        }
        Scenario::MalformedFrame => {
            steps.push(Step::Line("this is not json".into()));
            steps.push(Step::Log("malformed_frame", json!({})));
            reply(TEXT.into(), "text")
        }
        Scenario::StrayResponse => {
            let stray = json!({"jsonrpc": "2.0", "id": STRAY_ID, "result": {}});
            steps.push(Step::Line(stray.to_string()));
            steps.push(Step::Log("stray_response", json!({"id": STRAY_ID})));
            reply(TEXT.into(), "text")
        }
        Scenario::Huge => {
            const LINE: &str = "huge output from the offline agent, streamed on purpose.\n";
            let mut chunk = LINE.repeat(HUGE_CHUNK / LINE.len() + 1);
            chunk.truncate(HUGE_CHUNK);
            Ending::Reply(Reply {
                chunks: Chunks::Parts(vec![chunk; HUGE_TOTAL / HUGE_CHUNK], Duration::ZERO),
                ..Reply::text("", "huge")
            })
        }
        Scenario::Slow => Ending::Reply(Reply {
            chunks: Chunks::Parts(
                (1..=SLOW_CHUNKS)
                    .map(|n| format!("Mock slow answer, part {n} of {SLOW_CHUNKS}. "))
                    .collect(),
                slow,
            ),
            ..Reply::text("", "text")
        }),
        Scenario::SlowLong => Ending::Reply(Reply {
            chunks: Chunks::Parts(
                (1..=SLOW_LONG_CHUNKS).map(slow_long_sentence).collect(),
                SLOW_LONG_WAIT,
            ),
            log_chunks: true,
            ..Reply::text("", "text")
        }),
        // The environment listing stays out of the log.
        Scenario::Env => Ending::Reply(Reply {
            log_text: false,
            ..Reply::text(environment(), "env")
        }),
        Scenario::Whoami => reply(
            match received.thought_level {
                Some(level) => format!("model: {}, thought_level: {level}", received.model),
                None => format!("model: {}", received.model),
            },
            "text",
        ),
        Scenario::Probe => reply(crate::probe::report(last_user), "probe"),
        Scenario::RewriteTestScript => {
            script_step(&mut steps, crate::rewrite::next(&results), results.len())
        }
        Scenario::Script => {
            let action = match plugin_script::command_in(&prompt) {
                // A slash command of the Claude Code plugin: its transport handshake.
                Some((subcommand, raw)) => plugin_script::next(&subcommand, &raw, &results),
                None => {
                    let parallel = !trace.contains(PARALLEL_DISABLED);
                    script::next(&results, &tools, parallel)
                }
            };
            script_step(&mut steps, action, results.len())
        }
    };
    let mut plan = Plan::new(scenario.name(), trace, log, ending);
    plan.steps = steps;
    plan.usage = match scenario {
        Scenario::Usage => Usage::Fixed(REPORTED_USAGE),
        Scenario::NoUsage => Usage::Omitted,
        Scenario::UsageUpdate => Usage::Context(CONTEXT_USED),
        _ => Usage::Counted { cached_half: false },
    };
    Ok((plan, unknown))
}

/// A turn that ends with an `agent_stopped` cause that is not an error: what text there is,
/// the cause with its `errorMessage`, then an ordinary `end_turn`.
pub(crate) fn stop_ending(cause: StopCause) -> Ending {
    Ending::Reply(Reply {
        cause: cause.name(),
        error_message: cause.error_message(),
        ..Reply::text(cause.reply(), "stopped")
    })
}

/// Sentence `n` of `[mock:slow-long]`: 100 bytes, ending in a space.
fn slow_long_sentence(n: usize) -> String {
    format!(
        "Sentence {n:02} of {SLOW_LONG_CHUNKS}: the offline agent writes this long answer slowly, \
         one whole sentence each chunk. "
    )
}

/// An envelope whose tool call is logged when the turn plays it.
fn logged(steps: &mut Vec<Step>, name: &str, arguments: &Value) -> String {
    steps.push(Step::Log(
        "tool_envelope",
        json!({"name": name, "arguments": arguments}),
    ));
    envelope(name, arguments)
}

/// One step of a scripted session.
fn script_step(steps: &mut Vec<Step>, action: Action, step: usize) -> Ending {
    let (kind, text) = match action {
        Action::Tool { name, arguments } => {
            steps.push(Step::Log(
                "script_step",
                json!({"step": step, "tool": name}),
            ));
            ("tool", logged(steps, name, &arguments))
        }
        Action::Tools(calls) => {
            let names: Vec<&str> = calls.iter().map(|(name, _)| *name).collect();
            steps.push(Step::Log(
                "script_step",
                json!({"step": step, "tools": names}),
            ));
            let envelopes: Vec<String> = calls
                .iter()
                .map(|(name, arguments)| logged(steps, name, arguments))
                .collect();
            ("tools", envelopes.join("\n"))
        }
        Action::Text(text) => {
            steps.push(Step::Log(
                "script_step",
                json!({"step": step, "tool": null}),
            ));
            ("text", text)
        }
    };
    Ending::Reply(Reply::text(text, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(
            envelope(
                "Bash",
                &json!({"command": "echo mock", "description": "Print a marker"})
            ),
            r#"<tool>{"name":"Bash","arguments":{"command":"echo mock","description":"Print a marker"}}</tool>"#
        );
        assert_eq!(
            marker_tool(&["Read", "Write"], "c", "d"),
            ("Read".to_owned(), json!({}))
        );
        assert_eq!(marker_tool(&[], "c", "d").0, "Bash");
        assert_eq!(marker_tool(&["Read", "Bash"], "c", "d").0, "Bash");
    }

    #[test]
    fn slow_long_writes_4000_bytes_in_40_sentences() {
        let sentences: Vec<String> = (1..=SLOW_LONG_CHUNKS).map(slow_long_sentence).collect();
        assert!(sentences.iter().all(|s| s.len() == 100), "{sentences:?}");
        assert!(sentences[0].starts_with("Sentence 01 of 40:"));
        assert!(sentences[39].starts_with("Sentence 40 of 40:"));
    }

    fn received<'a>(text: &'a str, earlier: Option<&'a str>) -> Received<'a> {
        Received {
            session_id: "s",
            earlier,
            text,
            images: Vec::new(),
            model: "swe-1-7",
            thought_level: None,
        }
    }

    #[test]
    fn traces_continue_and_scenarios_become_plans() {
        let full = "[Devin Summarizer Bridge]\n[Execution Trace]\n[User]\nhi [mock:whoami]";
        let (plan, unknown) = plan(None, Duration::ZERO, received(full, None)).expect("plan");
        assert!(unknown.is_empty());
        assert_eq!(plan.name, "whoami");
        assert_eq!(plan.steps, [Step::Prelude]);
        assert_eq!(
            plan.ending,
            Ending::Reply(Reply::text("model: swe-1-7", "text"))
        );
        let more = "[Devin Summarizer Bridge: continued]\n[Execution Trace: continued]\n\
                    [User]\n[mock:nope] [mock:hang]";
        let (hang, unknown) = plan_of(more, Some(full)).expect("a continuation of the trace");
        assert_eq!(unknown, ["nope"]);
        assert!(hang.hangs() && hang.steps.is_empty());
        assert!(hang.input.starts_with(full) && hang.input.ends_with("[mock:hang]"));
        assert!(plan_of(more, None).is_err());
        assert_eq!(
            plan_of("hello", None).err().map(|e| e.0),
            Some(INVALID_PARAMS)
        );
    }

    #[test]
    fn markers_inside_system_reminders_select_nothing() {
        // Claude Code's git status reminder lists recent commit subjects, which may name a marker.
        let prompt = "[Devin Summarizer Bridge]\n[Execution Trace]\n[User]\n<system-reminder>\n\
                      Recent commits:\n5acca54 The offline agent's [mock:subagent] delegates\n\
                      </system-reminder>\nFix the failing test in this project.";
        let (plan, unknown) = plan_of(prompt, None).expect("plan");
        assert_eq!(plan.name, "script");
        assert!(unknown.is_empty());
        let typed = prompt.replace("project.", "project. [mock:text]");
        let (plan, _) = plan_of(&typed, None).expect("plan");
        assert_eq!(plan.name, "text");
    }

    fn plan_of(text: &str, earlier: Option<&str>) -> Result<(Plan, Vec<String>), Refusal> {
        plan(None, Duration::ZERO, received(text, earlier))
    }
}
