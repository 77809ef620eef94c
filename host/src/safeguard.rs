//! `devin-bridge safeguard explain`: judge one tool call offline, as the bridge would in auto
//! mode, and say which `auto_mode.allow` entry would let a flagged call run.
//!
//! Invariants:
//! - The verdict is the safeguard component's (the built-in one, or the policy's with
//!   `--policy`), never a guess of this module: the same judge `serve` runs.
//! - A suggested allow entry is printed only after the judge passed the call with that entry
//!   added to the context's `auto_mode.allow`: the candidates are made from the call's text by
//!   a rough split of the command line, and a wrong candidate is simply never shown.
//! - The context comes from `--context` (a classifier context, or a whole Messages request
//!   body Claude Code sent, whose safeguard context and earlier tool calls the serializer
//!   component reads), else from the working directory (it is the trusted directory).
//!   Anything the judge cannot read is an error (exit 2) naming the file and the problem.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use devin_bridge_engine::{Component, TransformCalls as _, TransformKind};
use devin_bridge_policy::ModePolicy as _;
use devin_bridge_types::{CallVerdict, SafeguardOutcome, SafeguardStatus, ToolCall};

/// Largest `--context` file read, in bytes (a request body with its whole conversation).
const MAX_CONTEXT_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// `devin-bridge safeguard`.
#[derive(Debug, Subcommand)]
pub(crate) enum SafeguardCommand {
    /// Judge one tool call offline against a context and print the verdict, the rule that
    /// decided it, and for a flagged call the `auto_mode.allow` entry that would let it run.
    ///
    /// Exit status: 0 when the judge answered (flagged or not), 1 when the component failed,
    /// 2 when the call or the context cannot be read.
    Explain(ExplainArgs),
}

/// `devin-bridge safeguard explain`.
#[derive(Debug, Args)]
pub(crate) struct ExplainArgs {
    /// The shell command to judge (shorthand for `--tool Bash --input '{"command":"..."}'`).
    #[arg(long, value_name = "COMMAND", conflicts_with_all = ["tool", "input"])]
    pub command: Option<String>,
    /// The tool of the call (`Bash`, `Read`, `Edit`, `WebFetch`, `mcp__server__tool`, ...).
    #[arg(long, value_name = "TOOL", default_value = "Bash")]
    pub tool: String,
    /// The call's input, a JSON object (`{"file_path":"/p/x"}`).
    #[arg(long, value_name = "JSON")]
    pub input: Option<String>,
    /// A classifier context (JSON), or a Messages request body Claude Code sent in auto mode
    /// (its `dangerous_tool_use` safeguard's context and its earlier tool calls are used).
    /// Default: the working directory as the one trusted directory, with no rules.
    #[arg(long, value_name = "FILE")]
    pub context: Option<PathBuf>,
    /// A summarizer policy whose safeguard and serializer components to use (default: the
    /// built-in ones).
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<PathBuf>,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// Why `explain` could not answer: the message and the exit status.
#[derive(Debug)]
struct Refusal {
    message: String,
    status: u8,
}

impl Refusal {
    fn input(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            status: 2,
        }
    }

    fn component(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            status: 1,
        }
    }
}

/// What `explain` found.
#[derive(Debug)]
struct Explanation {
    tool: String,
    flagged: bool,
    explanation: String,
    cited_rule: Option<String>,
    /// The entries that let the call run, when it is flagged and some do.
    allow: Option<Vec<String>>,
    earlier_calls: usize,
    context_source: String,
}

pub(crate) fn run(command: &SafeguardCommand) -> ExitCode {
    let SafeguardCommand::Explain(args) = command;
    match explain(args) {
        Ok(found) => {
            let text = if args.json {
                json!({
                    "tool": found.tool,
                    "outcome": if found.flagged { "flagged" } else { "not_flagged" },
                    "explanation": found.explanation,
                    "cited_rule": found.cited_rule,
                    "allow": found.allow,
                    "earlier_calls": found.earlier_calls,
                    "context": found.context_source,
                })
                .to_string()
                    + "\n"
            } else {
                lines(&found)
            };
            crate::report::print_report(&text)
        }
        Err(refusal) => {
            eprintln!("devin-bridge safeguard explain: {}", refusal.message);
            ExitCode::from(refusal.status)
        }
    }
}

fn lines(found: &Explanation) -> String {
    let mut out = String::new();
    let verdict = if found.flagged {
        "flagged (the call is blocked in auto mode)"
    } else {
        "not flagged (the call runs without asking)"
    };
    out.push_str(&format!("verdict: {verdict}\n"));
    let rule = match &found.cited_rule {
        Some(rule) => format!("the user's rule {rule}"),
        None => "the judge's own rules".to_owned(),
    };
    out.push_str(&format!("rule: {rule}\n"));
    out.push_str(&format!("why: {}\n", found.explanation));
    out.push_str(&format!(
        "context: {} ({} earlier tool calls)\n",
        found.context_source, found.earlier_calls
    ));
    if found.flagged {
        match &found.allow {
            Some(entries) => {
                let list = entries
                    .iter()
                    .map(|entry| format!("\"{entry}\""))
                    .collect::<Vec<_>>()
                    .join(", ");
                out.push_str(&format!(
                    "allow: add {list} to auto_mode.allow in your settings to let this call run\n"
                ));
            }
            None => out.push_str(
                "allow: no auto_mode.allow entry lets this call run (a deny rule, a restricted session or a check the allow rules do not cover decides it)\n",
            ),
        }
    }
    out
}

fn explain(args: &ExplainArgs) -> Result<Explanation, Refusal> {
    let call = the_call(args)?;
    let (safeguard_location, serializer_location, limits) = locations(args.policy.as_deref())?;
    let load = |location, kind: TransformKind| {
        devin_bridge_engine::load_one(location, limits, kind).map_err(|error| {
            Refusal::component(format!(
                "cannot load the {} component: {error}",
                kind.name()
            ))
        })
    };
    let (context, earlier, context_source) = match &args.context {
        Some(path) => {
            let serializer = || load(&serializer_location, TransformKind::Serializer);
            let (context, earlier) = read_context(path, serializer)?;
            (context, earlier, path.display().to_string())
        }
        None => {
            let (context, cwd) = current_directory_context()?;
            (
                context,
                Vec::new(),
                format!("the working directory {cwd} as the trusted directory"),
            )
        }
    };
    let judge = load(&safeguard_location, TransformKind::Safeguard)?;
    let (flagged, explanation, cited_rule) = verdict(&judge, &call, &context, &earlier)?;
    let allow = if flagged {
        suggest(&judge, &call, &context, &earlier)?
    } else {
        None
    };
    Ok(Explanation {
        tool: call.name,
        flagged,
        explanation,
        cited_rule,
        allow,
        earlier_calls: earlier.len(),
        context_source,
    })
}

/// The call from `--command`, or `--tool` and `--input`.
fn the_call(args: &ExplainArgs) -> Result<ToolCall, Refusal> {
    let (name, input) = match (&args.command, &args.input) {
        (Some(command), _) => ("Bash".to_owned(), json!({ "command": command }).to_string()),
        (None, Some(input)) => {
            match serde_json::from_str::<Value>(input) {
                Ok(Value::Object(_)) => {}
                Ok(_) => return Err(Refusal::input("--input is not a JSON object")),
                Err(error) => return Err(Refusal::input(format!("--input is not JSON: {error}"))),
            }
            (args.tool.clone(), input.clone())
        }
        (None, None) => {
            return Err(Refusal::input(
                "give the call to judge: --command '...' or --tool TOOL --input '{...}'",
            ))
        }
    };
    Ok(ToolCall {
        id: "toolu_explain".to_owned(),
        name,
        input,
    })
}

/// Where the safeguard and serializer components are, and the runtime limits.
fn locations(
    policy: Option<&Path>,
) -> Result<
    (
        devin_bridge_engine::ComponentLocation,
        devin_bridge_engine::ComponentLocation,
        devin_bridge_engine::RuntimeLimits,
    ),
    Refusal,
> {
    let policy = match policy {
        Some(path) => crate::policy::load_summarizer(path, "safeguard explain")
            .map_err(|error| Refusal::input(format!("{error:#}")))?,
        None => devin_bridge_summarizer::policy::SummarizerPolicy::builtin(
            "mode = \"summarizer\"",
            "the built-in summarizer policy",
        )
        .map_err(|error| Refusal::input(error.to_string()))?,
    };
    let config = policy.engine_config();
    Ok((
        config.location(TransformKind::Safeguard).clone(),
        config.location(TransformKind::Serializer).clone(),
        config.limits,
    ))
}

/// The context JSON text and the earlier calls from a `--context` file: a classifier context
/// as it is, or a request body through the serializer.
fn read_context(
    path: &Path,
    serializer: impl FnOnce() -> Result<Component, Refusal>,
) -> Result<(String, Vec<ToolCall>), Refusal> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|error| Refusal::input(format!("cannot read the context {shown}: {error}")))?
        .len();
    if size > MAX_CONTEXT_FILE_BYTES {
        return Err(Refusal::input(format!(
            "the context {shown} is {size} bytes, more than the {MAX_CONTEXT_FILE_BYTES} read"
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|error| Refusal::input(format!("cannot read the context {shown}: {error}")))?;
    let value: Value = serde_json::from_str(&text).map_err(|error| {
        Refusal::input(format!(
            "the context {shown} is not JSON (line {}, column {}); give a classifier context or a request body Claude Code sent",
            error.line(),
            error.column()
        ))
    })?;
    let Value::Object(root) = &value else {
        return Err(Refusal::input(format!(
            "the context {shown} is not a JSON object; give a classifier context or a request body Claude Code sent"
        )));
    };
    if !(root.contains_key("messages") || root.contains_key("safeguards")) {
        return Ok((text, Vec::new()));
    }
    let prompt = serializer()?
        .serialize(text)
        .map_err(|error| Refusal::component(format!("the serializer component failed: {error}")))?
        .map_err(|failure| {
            Refusal::input(format!(
                "the request {shown} cannot be read: {} ({})",
                failure.message, failure.code
            ))
        })?;
    match prompt.classifier_context {
        Some(context) => Ok((context, prompt.earlier_calls)),
        None => Err(Refusal::input(format!(
            "the request {shown} asks for no dangerous_tool_use safeguard, so it has no classifier context (was Claude Code in auto mode?)"
        ))),
    }
}

/// A context with the working directory as the only trusted directory, and no rules.
fn current_directory_context() -> Result<(String, String), Refusal> {
    let cwd = std::env::current_dir()
        .map_err(|error| Refusal::input(format!("cannot read the working directory: {error}")))?;
    let cwd = cwd
        .to_str()
        .ok_or_else(|| Refusal::input("the working directory is not UTF-8"))?
        .to_owned();
    let mut context = json!({
        "v": 1,
        "permission_mode": "auto",
        "live_cwd": cwd,
        "trusted_directories": {"primary": {"path": cwd}},
    });
    if let Some(home) = std::env::var_os("HOME").and_then(|home| home.into_string().ok()) {
        if home.starts_with('/') {
            context["home_dir"] = Value::String(home);
        }
    }
    Ok((context.to_string(), cwd))
}

/// The judge's verdict on the call: (flagged, explanation, cited rule).
fn verdict(
    judge: &Component,
    call: &ToolCall,
    context: &str,
    earlier: &[ToolCall],
) -> Result<(bool, String, Option<String>), Refusal> {
    let status = judge
        .judge(vec![call.clone()], context.to_owned(), earlier.to_vec())
        .map_err(|error| Refusal::component(format!("the safeguard component failed: {error}")))?;
    match status {
        SafeguardStatus::Available(verdicts) => match verdicts.into_iter().next() {
            Some(verdict) => match verdict.verdict {
                CallVerdict::Evaluated(evaluation) => Ok((
                    evaluation.outcome == SafeguardOutcome::Flagged,
                    evaluation.explanation,
                    evaluation.cited_rule,
                )),
                CallVerdict::Skipped => Err(Refusal::component(
                    "the safeguard component skipped the call (the client would decide)",
                )),
                CallVerdict::Unavailable(reason) => Err(Refusal::component(format!(
                    "the safeguard component could not judge the call: {reason}"
                ))),
            },
            None => Err(Refusal::component(
                "the safeguard component answered no verdict for the call",
            )),
        },
        SafeguardStatus::Unavailable(reason) => Err(Refusal::input(format!(
            "the judge cannot read the context: {reason}"
        ))),
        SafeguardStatus::Unsupported => Err(Refusal::component(
            "the safeguard component answered unsupported",
        )),
    }
}

/// The `auto_mode.allow` entries that let a flagged call run, checked by judging the call
/// again with them added; none when no candidate does.
fn suggest(
    judge: &Component,
    call: &ToolCall,
    context: &str,
    earlier: &[ToolCall],
) -> Result<Option<Vec<String>>, Refusal> {
    let Ok(Value::Object(base)) = serde_json::from_str::<Value>(context) else {
        return Ok(None);
    };
    let input: Value = serde_json::from_str(&call.input).unwrap_or(Value::Null);
    let cwd = base.get("live_cwd").and_then(Value::as_str).unwrap_or("");
    for entries in candidates(&call.name, &input, cwd) {
        if entries.is_empty() || !passes(judge, call, &base, &entries, earlier)? {
            continue;
        }
        // Keep only the entries the call needs.
        let mut needed = entries;
        let mut index = 0;
        while index < needed.len() && needed.len() > 1 {
            let mut fewer = needed.clone();
            fewer.remove(index);
            if passes(judge, call, &base, &fewer, earlier)? {
                needed = fewer;
            } else {
                index += 1;
            }
        }
        return Ok(Some(needed));
    }
    Ok(None)
}

/// Whether the judge passes the call with `entries` added to `auto_mode.allow`.
fn passes(
    judge: &Component,
    call: &ToolCall,
    base: &serde_json::Map<String, Value>,
    entries: &[String],
    earlier: &[ToolCall],
) -> Result<bool, Refusal> {
    let mut context = base.clone();
    let auto = context.entry("auto_mode").or_insert_with(|| json!({}));
    if !auto.is_object() {
        return Ok(false);
    }
    let allow = &mut auto["allow"];
    if !allow.is_array() {
        *allow = json!([]);
    }
    if let Value::Array(list) = allow {
        list.extend(entries.iter().cloned().map(Value::String));
    }
    let (flagged, _, _) = verdict(judge, call, &Value::Object(context).to_string(), earlier)?;
    Ok(!flagged)
}

/// Candidate sets of allow entries, in the order they are tried: for a shell line, one entry
/// per simple command, by program and subcommand (`Bash(npm test:*)`), then by program alone
/// (`Bash(npm:*)`), then the exact words; for the other tools, the one entry that names the
/// call's file, directory, host or tool.
fn candidates(tool: &str, input: &Value, cwd: &str) -> Vec<Vec<String>> {
    let text = |key: &str| input.get(key).and_then(Value::as_str);
    let absolute = |path: &str| {
        if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("{}/{path}", cwd.trim_end_matches('/'))
        }
    };
    match tool {
        "Bash" => {
            let Some(command) = text("command") else {
                return Vec::new();
            };
            let commands = simple_commands(command);
            let prefixes: Vec<String> = commands
                .iter()
                .map(|words| {
                    let prefix = match words.get(1) {
                        Some(sub) if is_subcommand(sub) => format!("{} {sub}", words[0]),
                        _ => words[0].clone(),
                    };
                    format!("Bash({prefix}:*)")
                })
                .collect();
            let programs: Vec<String> = commands
                .iter()
                .map(|words| format!("Bash({}:*)", words[0]))
                .collect();
            let exact: Vec<String> = commands
                .iter()
                .map(|words| format!("Bash({})", words.join(" ")))
                .collect();
            vec![prefixes, programs, exact]
        }
        "Edit" | "MultiEdit" | "Write" => text("file_path")
            .map(|path| vec![vec![format!("Edit(/{})", absolute(path))]])
            .unwrap_or_default(),
        "NotebookEdit" => text("notebook_path")
            .map(|path| vec![vec![format!("Edit(/{})", absolute(path))]])
            .unwrap_or_default(),
        "Read" => text("file_path")
            .map(|path| vec![vec![format!("Read(/{})", absolute(path))]])
            .unwrap_or_default(),
        "NotebookRead" => text("notebook_path")
            .map(|path| vec![vec![format!("Read(/{})", absolute(path))]])
            .unwrap_or_default(),
        "LS" | "Glob" | "Grep" => {
            let dir = text("path").map_or_else(|| cwd.to_owned(), absolute);
            vec![vec![format!("Read(/{dir}/**)")]]
        }
        "WebFetch" => text("url")
            .and_then(url_host)
            .map(|host| vec![vec![format!("WebFetch(domain:{host})")]])
            .unwrap_or_default(),
        other => vec![vec![other.to_owned()]],
    }
}

/// A second word that names a subcommand (`test` of `npm test`), not an option or a path.
fn is_subcommand(word: &str) -> bool {
    word.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
}

/// The host of an `http(s)` URL.
fn url_host(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?.split(':').next()?;
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// A rough split of a command line into simple commands (words after quote removal), for
/// making candidates only: at unquoted `&&`, `||`, `;`, `|`, `&` and newlines, without
/// redirections and leading `NAME=value` words. The judge checks every candidate.
fn simple_commands(line: &str) -> Vec<Vec<String>> {
    let mut commands: Vec<Vec<String>> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let end_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(next) = chars.next() {
                                word.push(next);
                            }
                        }
                        other => word.push(other),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            ' ' | '\t' => end_word(&mut word, &mut in_word, &mut words),
            // Part of a redirection, not a separator: `2>&1`, `>|`, `&>file`.
            '&' | '|' if in_word && word.ends_with(['>', '<']) => word.push(c),
            '&' if chars.peek() == Some(&'>') => {
                in_word = true;
                word.push(c);
            }
            '&' | '|' | ';' | '\n' => {
                end_word(&mut word, &mut in_word, &mut words);
                commands.push(std::mem::take(&mut words));
            }
            other => {
                in_word = true;
                word.push(other);
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut words);
    commands.push(words);
    commands
        .into_iter()
        .map(|words| {
            let mut kept = Vec::new();
            let mut skip_target = false;
            for word in words {
                if skip_target {
                    skip_target = false;
                    continue;
                }
                let redirect = word.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
                if redirect.starts_with('>') || redirect.starts_with('<') {
                    // `> file` takes the next word; `>file`, `2>&1` are one word.
                    skip_target = redirect.trim_start_matches(['>', '<', '|', '&']).is_empty()
                        && !word.ends_with('&');
                    continue;
                }
                if kept.is_empty() && word.contains('=') && !word.starts_with('=') {
                    continue;
                }
                kept.push(word);
            }
            kept
        })
        .filter(|words| !words.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_into_simple_commands() {
        assert_eq!(
            simple_commands("cd app && CI=1 npm test -- --watch 2>&1 | tail -20 &> out.log"),
            vec![
                vec!["cd", "app"],
                vec!["npm", "test", "--", "--watch"],
                vec!["tail", "-20"],
            ]
        );
        assert_eq!(
            simple_commands("echo 'a && b'; curl \"https://x.example/a b\""),
            vec![
                vec!["echo", "a && b"],
                vec!["curl", "https://x.example/a b"]
            ]
        );
    }

    #[test]
    fn candidates_go_from_subcommand_prefixes_to_exact_lines() {
        let sets = candidates("Bash", &json!({"command": "npm run typecheck"}), "/p");
        assert_eq!(sets[0], vec!["Bash(npm run:*)"]);
        assert_eq!(sets[1], vec!["Bash(npm:*)"]);
        assert_eq!(sets[2], vec!["Bash(npm run typecheck)"]);
        let sets = candidates("Bash", &json!({"command": "curl -s https://x"}), "/p");
        assert_eq!(sets[0], vec!["Bash(curl:*)"]);
        assert_eq!(
            candidates("Write", &json!({"file_path": "out/x.txt"}), "/p"),
            vec![vec!["Edit(//p/out/x.txt)"]]
        );
        assert_eq!(
            candidates("WebFetch", &json!({"url": "https://Docs.rs:443/x"}), "/p"),
            vec![vec!["WebFetch(domain:docs.rs)"]]
        );
        assert_eq!(
            candidates("mcp__github__get_issue", &json!({}), "/p"),
            vec![vec!["mcp__github__get_issue"]]
        );
    }
}
