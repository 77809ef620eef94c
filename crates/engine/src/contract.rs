//! What a swap candidate must agree on with the golden corpus: the promises of the WIT
//! contract, not the bytes of the reference build.
//!
//! For each fixture, the candidate's answer (in the fixtures' JSON encoding) is compared with
//! the expected one as follows.
//!
//! Every call:
//! - success or failure agrees with the fixture;
//! - a failure has the expected `code` (codes are the stable contract) and the expected
//!   `repairable` flag, a `status` within 400-599 and in the same class (4xx or 5xx) as the
//!   expected one, and a non-empty `message` (its wording is free).
//!
//! On success, per call:
//! - `serialize`: `model`, `stream` and `input_tokens` equal; `classifier_context` the same
//!   JSON value (or absent in both); `earlier_calls` the same list (empty when absent);
//!   `effort` equal (or absent in both: the agent runs at
//!   the effort the request asked for); `local_answer` absent in both, or present in both
//!   with the same `purpose` and a `text` that is the same JSON value (a local answer is sent
//!   to the client in place of an agent turn: one may never be made up, nor one dropped or
//!   changed); `tools` parses as JSON and is the
//!   same JSON value; `text` contains the `[Devin Summarizer Bridge]` and `[Execution Trace]`
//!   headers the agent side relies on (the rest of the framing is free);
//!   `id_seed` is 1-64 characters of `[A-Za-z0-9_-]`;
//! - `repair`: the new prompt contains the original prompt and the rejection's code;
//! - `parse`: the reply variant (text or tool) is the same; a text reply is the same text up to
//!   surrounding whitespace; a tool reply has the same blocks in the same order: a text block
//!   the same text up to surrounding whitespace (the client shows it), a call the same tool
//!   name, an input that parses as a JSON object equal (as a JSON value) to the expected one,
//!   and a well-formed id (`devin_call_` followed by 16 lowercase hex digits, as the envelope
//!   makes them), distinct within the reply; and the same recoveries in the same order (the
//!   host counts them);
//! - `parse_stream`: the end is what `parse` must answer for the concatenated chunks (a success
//!   or the same failure, the reply checked as `parse`'s is) with the same narration verdict;
//!   on success, the pushes' released text followed by the end's `tail` is exactly the shown
//!   text of the candidate's own reply (a text reply's text, or its text blocks joined by a
//!   blank line); after a push fails, no later push releases text;
//! - `narrates_unexecuted_action`: the same flag;
//! - `parse_review`: the same review, as the same JSON value and in the same canonical spelling
//!   (compact, known fields only, fixed order): the output is the one text a review has, so
//!   callers may compare or hash it;
//! - `stream_start`, `stream_ping`, `stream_finish`, `stream_text`, `stream_finish_after_text`,
//!   `render_stream`, `error_event`: the output
//!   is a well-formed event stream (events separated by a blank line, each with one `event:`
//!   line and `data:` lines, comments allowed, nothing else), with the same sequence of event
//!   names, and each event's data parses as a JSON object whose `type` is the event name and
//!   which equals the expected data as a JSON value (so only formatting may differ);
//! - `render_json`, `error_body`: the body parses as JSON and equals the expected body as a
//!   JSON value (its `type` included);
//! - `parse_events`: exactly the same events (type, data and id of each, in order) and the
//!   same tail bytes: framing has one right answer, and a caller that feeds the tail back must
//!   lose or repeat nothing;
//! - `validate`: the same model id; `resolve`: the same `family`, `model_uid` and `acp_id`
//!   (the display label is free); `client_environment`: the same variables and values;
//!   `list_models`: the same JSON value; `context_windows`: the same ids and windows, in the
//!   same order;
//! - `judge`: never more lenient (an operator's judge may be stricter): where the fixture's
//!   answer is unavailable, no call of the candidate's is `not_flagged`; where it is
//!   available, the candidate's is available too, with one verdict per call, the same ids in
//!   the same order, and every call the fixture flags flagged again with a non-empty
//!   explanation (a call the fixture passes may be flagged, skipped or unavailable);
//! - every other call (a function not named above): exactly the same answer, as a JSON value.
//!   The strictest contract is the default, so a new function needs no rule here until a
//!   rebuild may legitimately answer it differently.

use serde_json::Value;

use devin_bridge_calls::Call;

/// The prefix and length of the tool-call ids the envelope makes.
const TOOL_ID_PREFIX: &str = "devin_call_";
const TOOL_ID_HEX_DIGITS: usize = 16;

/// `Ok` when `got` keeps the contract that `expect` illustrates for `call`; otherwise what
/// differs, in one sentence.
pub fn check(call: &Call, expect: &Value, got: &Value) -> Result<(), String> {
    match (
        expect.get("ok"),
        expect.get("err"),
        got.get("ok"),
        got.get("err"),
    ) {
        (Some(expected), _, Some(actual), _) => check_ok(call, expected, actual),
        (_, Some(expected), _, Some(actual)) => check_failure(expected, actual),
        (Some(_), _, _, Some(actual)) => Err(format!(
            "expected a success, got the failure {} ({}): {}",
            field(actual, "code"),
            field(actual, "status"),
            excerpt(&field(actual, "message"))
        )),
        (_, Some(expected), Some(_), _) => Err(format!(
            "expected the failure {} ({}), got a success",
            field(expected, "code"),
            field(expected, "status")
        )),
        _ => Err("the answer is neither a success nor a failure".into()),
    }
}

fn check_failure(expected: &Value, actual: &Value) -> Result<(), String> {
    let (want_code, got_code) = (field(expected, "code"), field(actual, "code"));
    if want_code != got_code {
        return Err(format!(
            "failure code {got_code} differs from the expected {want_code}"
        ));
    }
    let want_status = expected.get("status").and_then(Value::as_u64).unwrap_or(0);
    let got_status = actual.get("status").and_then(Value::as_u64).unwrap_or(0);
    if !(400..=599).contains(&got_status) {
        return Err(format!(
            "failure {got_code} has status {got_status}, outside 400-599"
        ));
    }
    if want_status / 100 != got_status / 100 {
        return Err(format!(
            "failure {got_code} has status {got_status}, not in the class of the expected {want_status} ({}xx)",
            want_status / 100
        ));
    }
    if expected.get("repairable") != actual.get("repairable") {
        return Err(format!(
            "failure {got_code} has repairable {}, expected {}",
            field(actual, "repairable"),
            field(expected, "repairable")
        ));
    }
    if actual
        .get("message")
        .and_then(Value::as_str)
        .is_none_or(|message| message.trim().is_empty())
    {
        return Err(format!("failure {got_code} has no message"));
    }
    Ok(())
}

fn check_ok(call: &Call, expected: &Value, actual: &Value) -> Result<(), String> {
    match call {
        Call::Serialize { .. } => check_prompt(expected, actual),
        Call::SerializeUnseen { options, .. } => check_unseen(options.held, expected, actual),
        Call::SerializeResumed { .. } => check_resumed(expected, actual),
        Call::Repair { prompt, rejection } => {
            let text = actual.as_str().ok_or("the repair prompt is not a string")?;
            if !text.contains(prompt.as_str()) {
                return Err("the repair prompt does not contain the original prompt".into());
            }
            if !text.contains(rejection.code.as_str()) {
                return Err(format!(
                    "the repair prompt does not name the rejection code {}",
                    rejection.code
                ));
            }
            Ok(())
        }
        Call::Parse { .. } => check_reply(expected, actual),
        Call::ParseStream { .. } => check_streamed(expected, actual),
        Call::ParseReview { .. } => check_review(expected, actual),
        Call::ClientEnvironment { .. } => same(expected, actual, "the client environment"),
        Call::ContextWindows { .. } => same(expected, actual, "the context windows"),
        Call::StreamStart { .. }
        | Call::StreamPing
        | Call::StreamFinish { .. }
        | Call::StreamText { .. }
        | Call::StreamFinishAfterText { .. }
        | Call::RenderStream { .. }
        | Call::ErrorEvent { .. } => check_stream(expected, actual),
        Call::RenderJson { .. } | Call::ErrorBody { .. } | Call::ListModels { .. } => {
            check_json_body(expected, actual)
        }
        Call::AgentErrorMessage { .. } => check_agent_error_message(actual),
        Call::Judge { .. } => check_safeguard(expected, actual),
        Call::ParseEvents { .. } => check_frames(expected, actual),
        Call::Resolve { .. } => {
            for key in ["family", "model_uid", "acp_id"] {
                same(
                    expected.get(key).unwrap_or(&Value::Null),
                    actual.get(key).unwrap_or(&Value::Null),
                    &format!("the resolved {key}"),
                )?;
            }
            Ok(())
        }
        // `narrates_unexecuted_action`, `validate`, and any function without a rule above.
        _ => same(expected, actual, "the answer"),
    }
}

/// A judge's answer against the fixture's (see the module doc): never more lenient.
fn check_safeguard(expected: &Value, actual: &Value) -> Result<(), String> {
    let kind = |status: &Value| {
        status
            .get("kind")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let verdicts = |status: &Value| -> Vec<Value> {
        status
            .get("value")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let outcome = |verdict: &Value| {
        verdict
            .pointer("/verdict/value/outcome")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    match kind(expected).as_deref() {
        Some("available") => {}
        _ => {
            if let Some(passed) = verdicts(actual)
                .iter()
                .find(|verdict| outcome(verdict).as_deref() == Some("not_flagged"))
            {
                return Err(format!(
                    "the call {} is not_flagged where the reference gives no verdict",
                    field(passed, "id")
                ));
            }
            return Ok(());
        }
    }
    if kind(actual).as_deref() != Some("available") {
        return Err(format!(
            "the answer is {}, not available",
            kind(actual).unwrap_or_else(|| "unknown".into())
        ));
    }
    let (want, got) = (verdicts(expected), verdicts(actual));
    if want.len() != got.len() {
        return Err(format!("{} verdicts for {} calls", got.len(), want.len()));
    }
    for (index, (want, got)) in want.iter().zip(&got).enumerate() {
        if want.get("id") != got.get("id") {
            return Err(format!(
                "verdict {index} is for {}, not {}",
                field(got, "id"),
                field(want, "id")
            ));
        }
        if outcome(want).as_deref() == Some("flagged") {
            if outcome(got).as_deref() != Some("flagged") {
                return Err(format!(
                    "the call {} is flagged by the reference and not by the candidate",
                    field(want, "id")
                ));
            }
            let explained = got
                .pointer("/verdict/value/explanation")
                .and_then(Value::as_str)
                .is_some_and(|text| !text.trim().is_empty());
            if !explained {
                return Err(format!(
                    "the flagged call {} has no explanation",
                    field(want, "id")
                ));
            }
        }
    }
    Ok(())
}

/// What any cleaner of agent error text promises (its wording may differ): a non-empty text
/// of at most 200 characters, with no control characters, no path-like words and no vendor
/// names.
fn check_agent_error_message(actual: &Value) -> Result<(), String> {
    let text = actual
        .as_str()
        .ok_or("the cleaned message is not a string")?;
    if text.trim().is_empty() {
        return Err("the cleaned message is empty".into());
    }
    let chars = text.chars().count();
    if chars > 200 {
        return Err(format!(
            "the cleaned message has {chars} characters (at most 200)"
        ));
    }
    if text.chars().any(char::is_control) {
        return Err("the cleaned message keeps control characters".into());
    }
    if let Some(word) = text
        .split_whitespace()
        .find(|word| word.contains('/') || word.contains('\\'))
    {
        return Err(format!(
            "the cleaned message keeps the path-like word {}",
            excerpt(word)
        ));
    }
    let lower = text.to_lowercase();
    if let Some(vendor) = ["cognition", "windsurf", "codeium"]
        .into_iter()
        .find(|vendor| lower.contains(vendor))
    {
        return Err(format!("the cleaned message names the vendor {vendor}"));
    }
    Ok(())
}

/// An unseen-messages prompt: the whole prompt when nothing is held, else a continuation
/// (its wording is the component's; it must not carry the opening framing again). The history
/// has one identity per message, all different (each covers one more message); how they are
/// computed is the component's own.
fn check_unseen(held: u32, expected: &Value, actual: &Value) -> Result<(), String> {
    let prompt = |value: &Value| value.get("prompt").cloned().unwrap_or(Value::Null);
    let (expected_prompt, actual_prompt) = (prompt(expected), prompt(actual));
    if held == 0 {
        check_prompt(&expected_prompt, &actual_prompt)?;
    } else {
        for key in ["model", "stream", "input_tokens"] {
            same(
                expected_prompt.get(key).unwrap_or(&Value::Null),
                actual_prompt.get(key).unwrap_or(&Value::Null),
                &format!("the prompt's {key}"),
            )?;
        }
        check_continuation_text(&actual_prompt)?;
    }
    check_history_and_images(expected, actual)
}

/// A continuation's prompt: the token count and images the whole request would give, one
/// identity per continued message (the component's own, as for `serialize_unseen`), and the
/// marks of those messages where the request has them: the byte positions and tool-use ids
/// are facts of the request, the character counts follow the component's wording.
fn check_resumed(expected: &Value, actual: &Value) -> Result<(), String> {
    same(
        expected.get("input_tokens").unwrap_or(&Value::Null),
        actual.get("input_tokens").unwrap_or(&Value::Null),
        "the prompt's input_tokens",
    )?;
    check_continuation_text(actual)?;
    let seed = actual.get("id_seed").and_then(Value::as_str).unwrap_or("");
    if !well_formed_seed(seed) {
        return Err(format!("the prompt's id_seed {seed:?} is malformed"));
    }
    check_history_and_images(expected, actual)?;
    let marks = |value: &Value| -> Vec<(Value, Value)> {
        value
            .get("marks")
            .and_then(Value::as_array)
            .map(|marks| {
                marks
                    .iter()
                    .map(|mark| {
                        (
                            mark.get("request_end").cloned().unwrap_or(Value::Null),
                            mark.get("tool_uses").cloned().unwrap_or(Value::Null),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    if marks(expected) != marks(actual) {
        return Err("the marks' message ends or tool-use ids differ from the expected ones".into());
    }
    Ok(())
}

/// A continuation's text (its wording is the component's) must not open the session again.
fn check_continuation_text(prompt: &Value) -> Result<(), String> {
    let text = prompt.get("text").and_then(Value::as_str).unwrap_or("");
    if text.contains("[Devin Summarizer Bridge]\n") {
        return Err("a continuation repeats the opening framing".into());
    }
    Ok(())
}

/// As many history identities as expected, all distinct, non-empty and short (how they are
/// computed is the component's own), and exactly the expected attached images.
fn check_history_and_images(expected: &Value, actual: &Value) -> Result<(), String> {
    let history = |value: &Value| -> Vec<String> {
        value
            .get("history")
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .map(|id| id.as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (want, got) = (history(expected), history(actual));
    if want.len() != got.len() {
        return Err(format!(
            "the history has {} identities, expected {}",
            got.len(),
            want.len()
        ));
    }
    let distinct: std::collections::HashSet<&String> = got.iter().collect();
    if distinct.len() != got.len() || got.iter().any(|id| id.is_empty() || id.len() > 64) {
        return Err("the history's identities must be distinct, non-empty and short".into());
    }
    same(
        expected.get("images").unwrap_or(&Value::Null),
        actual.get("images").unwrap_or(&Value::Null),
        "the attached images",
    )
}

fn check_prompt(expected: &Value, actual: &Value) -> Result<(), String> {
    for key in ["model", "stream", "input_tokens"] {
        same(
            expected.get(key).unwrap_or(&Value::Null),
            actual.get(key).unwrap_or(&Value::Null),
            &format!("the prompt's {key}"),
        )?;
    }
    // A fixture that does not say asks for the default: parallel tool calls allowed.
    same(
        expected
            .get("single_tool_call")
            .unwrap_or(&Value::Bool(false)),
        actual.get("single_tool_call").unwrap_or(&Value::Null),
        "the prompt's single_tool_call",
    )?;
    // The safeguard's context: the same JSON value, or absent in both.
    let context = |value: &Value| -> Result<Option<Value>, String> {
        match value.get("classifier_context") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => serde_json::from_str(text)
                .map(Some)
                .map_err(|error| format!("the prompt's classifier_context is not JSON ({error})")),
            Some(other) => Err(format!(
                "the prompt's classifier_context is not a string: {other}"
            )),
        }
    };
    if context(expected)? != context(actual)? {
        return Err("the prompt's classifier_context differs from the expected one".into());
    }
    // The calls the judge reads of the conversation: the same list, or absent (empty) in both.
    same(
        expected
            .get("earlier_calls")
            .unwrap_or(&Value::Array(Vec::new())),
        actual
            .get("earlier_calls")
            .unwrap_or(&Value::Array(Vec::new())),
        "the prompt's earlier_calls",
    )?;
    // The effort: the same text, or absent in both.
    same(
        expected.get("effort").unwrap_or(&Value::Null),
        actual.get("effort").unwrap_or(&Value::Null),
        "the prompt's effort",
    )?;
    check_local_answer(
        expected.get("local_answer").unwrap_or(&Value::Null),
        actual.get("local_answer").unwrap_or(&Value::Null),
    )?;
    let tools = |value: &Value| -> Result<Value, String> {
        let text = value
            .get("tools")
            .and_then(Value::as_str)
            .ok_or("the prompt's tools is not a string")?;
        serde_json::from_str(text)
            .map_err(|error| format!("the prompt's tools is not JSON ({error})"))
    };
    if tools(expected)? != tools(actual)? {
        return Err("the prompt's tools differ from the expected tools (as JSON)".into());
    }
    let text = actual.get("text").and_then(Value::as_str).unwrap_or("");
    for header in ["[Devin Summarizer Bridge]", "[Execution Trace]"] {
        if !text.contains(header) {
            return Err(format!("the prompt text has no {header} header"));
        }
    }
    let seed = actual.get("id_seed").and_then(Value::as_str).unwrap_or("");
    if !well_formed_seed(seed) {
        return Err(format!("the prompt's id_seed {seed:?} is malformed"));
    }
    Ok(())
}

/// A prompt's local answer: absent in both, or the same purpose and the same JSON value as
/// its text.
fn check_local_answer(expected: &Value, actual: &Value) -> Result<(), String> {
    match (expected, actual) {
        (Value::Null, Value::Null) => Ok(()),
        (Value::Null, _) => Err("the prompt has a local answer where none is expected".into()),
        (_, Value::Null) => Err("the prompt has no local answer where one is expected".into()),
        (expected, actual) => {
            same(
                expected.get("purpose").unwrap_or(&Value::Null),
                actual.get("purpose").unwrap_or(&Value::Null),
                "the local answer's purpose",
            )?;
            let text = |value: &Value| -> Result<Value, String> {
                let text = value
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or("the local answer's text is not a string")?;
                serde_json::from_str(text)
                    .map_err(|error| format!("the local answer's text is not JSON ({error})"))
            };
            if text(expected)? != text(actual)? {
                return Err("the local answer's text differs from the expected one".into());
            }
            Ok(())
        }
    }
}

/// 1 to 64 characters of `[A-Za-z0-9_-]`: safe in a tool-use id.
fn well_formed_seed(seed: &str) -> bool {
    (1..=64).contains(&seed.len())
        && seed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_reply(expected: &Value, actual: &Value) -> Result<(), String> {
    let kind = |value: &Value| field(value, "kind");
    if kind(expected) != kind(actual) {
        return Err(format!(
            "the reply is a {} reply, expected a {} reply",
            kind(actual),
            kind(expected)
        ));
    }
    let (want, got) = (
        expected.get("value").unwrap_or(&Value::Null),
        actual.get("value").unwrap_or(&Value::Null),
    );
    if kind(expected) == "text" {
        return same_text(want, got, "the text reply");
    }
    let recoveries = |value: &Value| {
        value
            .get("recoveries")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()))
    };
    same(&recoveries(expected), &recoveries(actual), "the recoveries")?;
    let (want, got) = (
        want.as_array()
            .ok_or("the fixture's reply blocks are not a list")?,
        got.as_array().ok_or("the reply blocks are not a list")?,
    );
    if want.len() != got.len() {
        return Err(format!(
            "the reply has {} blocks, expected {}",
            got.len(),
            want.len()
        ));
    }
    let mut ids = std::collections::HashSet::new();
    for (position, (want, got)) in want.iter().zip(got).enumerate() {
        if want.is_string() {
            same_text(want, got, &format!("text block {position}"))?;
            continue;
        }
        check_tool_call(want, got).map_err(|why| format!("block {position}: {why}"))?;
        let id = got.get("id").and_then(Value::as_str).unwrap_or("");
        if !ids.insert(id) {
            return Err(format!("the tool id {id:?} is used twice in one reply"));
        }
    }
    Ok(())
}

/// A reply stream's answer (see the module doc): the end checked as `parse`'s answer, and the
/// released text against the candidate's own shown text.
fn check_streamed(expected: &Value, actual: &Value) -> Result<(), String> {
    let pushes = actual
        .get("pushes")
        .and_then(Value::as_array)
        .ok_or("the stream's pushes are not a list")?;
    let mut released = String::new();
    let mut failed = false;
    for (index, push) in pushes.iter().enumerate() {
        match (push.get("Ok").and_then(Value::as_str), push.get("Err")) {
            (Some(_), _) if failed => {
                return Err(format!("push {index} released text after a push failed"));
            }
            (Some(text), _) => released.push_str(text),
            (None, Some(_)) => failed = true,
            (None, None) => return Err(format!("push {index} is neither text nor a failure")),
        }
    }
    let end = |value: &Value| value.get("end").cloned().unwrap_or(Value::Null);
    let (want, got) = (end(expected), end(actual));
    match (
        want.get("Ok"),
        want.get("Err"),
        got.get("Ok"),
        got.get("Err"),
    ) {
        (Some(want), _, Some(got), _) => {
            let reply = |value: &Value| value.get("reply").cloned().unwrap_or(Value::Null);
            check_reply(&reply(want), &reply(got))?;
            same(
                want.get("narrates").unwrap_or(&Value::Null),
                got.get("narrates").unwrap_or(&Value::Null),
                "the narration verdict",
            )?;
            let parsed: devin_bridge_types::Parsed = serde_json::from_value(reply(got))
                .map_err(|error| format!("the stream's reply does not read as a reply: {error}"))?;
            let tail = got.get("tail").and_then(Value::as_str).unwrap_or_default();
            released.push_str(tail);
            if released != parsed.reply.shown_text() {
                return Err(format!(
                    "the released text and the tail {} are not the reply's shown text {}",
                    excerpt(&released),
                    excerpt(&parsed.reply.shown_text())
                ));
            }
            Ok(())
        }
        (_, Some(want), _, Some(got)) => check_failure(want, got),
        (Some(_), _, _, Some(got)) => Err(format!(
            "the stream ends with the failure {}, expected a success",
            field(got, "code")
        )),
        (_, Some(want), Some(_), _) => Err(format!(
            "the stream ends with a success, expected the failure {}",
            field(want, "code")
        )),
        _ => Err("the stream's end is neither a success nor a failure".into()),
    }
}

/// Two texts equal up to surrounding whitespace (`what` names them in the message).
fn same_text(want: &Value, got: &Value, what: &str) -> Result<(), String> {
    let trimmed = |value: &Value| value.as_str().map(|text| text.trim().to_owned());
    if trimmed(want) != trimmed(got) {
        return Err(format!(
            "{what} {} differs from the expected {}",
            excerpt(&got.to_string()),
            excerpt(&want.to_string())
        ));
    }
    Ok(())
}

/// One tool call: the same name, the same input as JSON, and a well-formed id.
fn check_tool_call(want: &Value, got: &Value) -> Result<(), String> {
    same(
        want.get("name").unwrap_or(&Value::Null),
        got.get("name").unwrap_or(&Value::Null),
        "the tool name",
    )?;
    let input = |value: &Value| -> Result<Value, String> {
        value
            .get("input")
            .and_then(Value::as_str)
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
            .filter(Value::is_object)
            .ok_or_else(|| "the tool input is not the text of a JSON object".to_owned())
    };
    if input(want)? != input(got)? {
        return Err("the tool input differs from the expected input (as JSON)".into());
    }
    let id = got.get("id").and_then(Value::as_str).unwrap_or("");
    if !well_formed_tool_id(id) {
        return Err(format!(
            "the tool id {id:?} is malformed (expected {TOOL_ID_PREFIX} and {TOOL_ID_HEX_DIGITS} lowercase hex digits)"
        ));
    }
    Ok(())
}

/// The same review as the same JSON value, then the same canonical text.
fn check_review(expected: &Value, actual: &Value) -> Result<(), String> {
    let want_text = expected
        .as_str()
        .ok_or("the fixture's review is not a string")?;
    let got_text = actual.as_str().ok_or("the review is not a string")?;
    let want: Value = serde_json::from_str(want_text)
        .map_err(|error| format!("the fixture's review: {error}"))?;
    let got: Value = serde_json::from_str(got_text)
        .map_err(|error| format!("the review is not JSON ({error})"))?;
    same(&want, &got, "the review")?;
    if want_text != got_text {
        return Err(format!(
            "the review {} is not in the canonical form {}",
            excerpt(got_text),
            excerpt(want_text)
        ));
    }
    Ok(())
}

/// The same events in the same order, then the same tail.
fn check_frames(expected: &Value, actual: &Value) -> Result<(), String> {
    let events = |value: &Value| value.get("events").cloned().unwrap_or(Value::Null);
    let (want, got) = (events(expected), events(actual));
    let (want_list, got_list) = (
        want.as_array().map(Vec::as_slice).unwrap_or_default(),
        got.as_array().ok_or("the frames have no list of events")?,
    );
    if want_list.len() != got_list.len() {
        return Err(format!(
            "{} events framed, expected {}",
            got_list.len(),
            want_list.len()
        ));
    }
    for (index, (want, got)) in want_list.iter().zip(got_list).enumerate() {
        same(want, got, &format!("event {index}"))?;
    }
    same(
        expected.get("tail").unwrap_or(&Value::Null),
        actual.get("tail").unwrap_or(&Value::Null),
        "the tail",
    )
}

/// `devin_call_` + 16 lowercase hex digits.
pub fn well_formed_tool_id(id: &str) -> bool {
    id.strip_prefix(TOOL_ID_PREFIX).is_some_and(|hex| {
        hex.len() == TOOL_ID_HEX_DIGITS
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// One server-sent event: its name and its data, joined.
#[derive(Debug, PartialEq)]
pub struct Event {
    pub name: String,
    pub data: String,
}

/// Parses a complete event stream strictly: every event ends with a blank line and has one
/// `event:` field and at least one `data:` field; `:` comment lines are allowed.
pub fn parse_events(stream: &str) -> Result<Vec<Event>, String> {
    if stream.is_empty() {
        return Ok(Vec::new());
    }
    let body = stream
        .strip_suffix("\n\n")
        .ok_or("the event stream does not end with a blank line")?;
    body.split("\n\n")
        .enumerate()
        .map(|(index, block)| {
            let mut name = None;
            let mut data: Option<String> = None;
            for line in block.split('\n') {
                if line.starts_with(':') {
                    continue;
                }
                let (field, value) = line.split_once(':').ok_or_else(|| {
                    format!("event {index}: line {:?} is not a field", excerpt(line))
                })?;
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" if name.is_none() => name = Some(value.to_owned()),
                    "data" => match &mut data {
                        Some(joined) => {
                            joined.push('\n');
                            joined.push_str(value);
                        }
                        None => data = Some(value.to_owned()),
                    },
                    other => return Err(format!("event {index}: unexpected field {other:?}")),
                }
            }
            match (name, data) {
                (Some(name), Some(data)) => Ok(Event { name, data }),
                _ => Err(format!("event {index} lacks an event name or data")),
            }
        })
        .collect()
}

fn check_stream(expected: &Value, actual: &Value) -> Result<(), String> {
    let want = parse_events(
        expected
            .as_str()
            .ok_or("the fixture's stream is not a string")?,
    )
    .map_err(|error| format!("the fixture's stream: {error}"))?;
    let got = parse_events(actual.as_str().ok_or("the answer is not a string")?)?;
    let names =
        |events: &[Event]| -> Vec<String> { events.iter().map(|e| e.name.clone()).collect() };
    if names(&want) != names(&got) {
        return Err(format!(
            "event sequence {:?} differs from the expected {:?}",
            names(&got),
            names(&want)
        ));
    }
    for (index, (want, got)) in want.iter().zip(&got).enumerate() {
        let data: Value = serde_json::from_str(&got.data)
            .map_err(|error| format!("event {index} ({}): data is not JSON ({error})", got.name))?;
        if data.get("type").and_then(Value::as_str) != Some(got.name.as_str()) {
            return Err(format!(
                "event {index} ({}): data type {} is not the event name",
                got.name,
                field(&data, "type")
            ));
        }
        let expected: Value = serde_json::from_str(&want.data)
            .map_err(|error| format!("the fixture's event {index}: {error}"))?;
        if data != expected {
            return Err(format!(
                "event {index} ({}): data {} differs from the expected {}",
                got.name,
                excerpt(&data.to_string()),
                excerpt(&expected.to_string())
            ));
        }
    }
    Ok(())
}

fn check_json_body(expected: &Value, actual: &Value) -> Result<(), String> {
    let want: Value = serde_json::from_str(
        expected
            .as_str()
            .ok_or("the fixture's body is not a string")?,
    )
    .map_err(|error| format!("the fixture's body: {error}"))?;
    let got: Value = serde_json::from_str(actual.as_str().ok_or("the answer is not a string")?)
        .map_err(|error| format!("the body is not JSON ({error})"))?;
    if want.get("type") != got.get("type") {
        return Err(format!(
            "the body's type {} differs from the expected {}",
            field(&got, "type"),
            field(&want, "type")
        ));
    }
    same(&want, &got, "the body (as JSON)")
}

fn same(expected: &Value, actual: &Value, what: &str) -> Result<(), String> {
    if expected == actual {
        return Ok(());
    }
    Err(format!(
        "{what} {} differs from the expected {}",
        excerpt(&actual.to_string()),
        excerpt(&expected.to_string())
    ))
}

/// A field of a JSON object, rendered for a message.
fn field(value: &Value, key: &str) -> String {
    match value.get(key) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => "(none)".into(),
    }
}

/// A bounded rendering of text for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
