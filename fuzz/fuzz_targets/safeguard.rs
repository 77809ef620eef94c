#![no_main]
//! Safeguard judge: coverage-guided on the native library, every answer compared with the wasm
//! component's (`devin_bridge_fuzz::differential`). Oracle: nothing outside the documented
//! safe set is ever `not_flagged`, and nothing that runs a file the conversation wrote is.
//!
//! The first byte picks the mode:
//! - structured (most inputs): `Bash` lines built from a token alphabet (safe and hostile
//!   programs, operators, quotes, substitutions, redirections, paths inside and outside the
//!   project, Unicode look-alikes) and `Read`/`Write` calls with generated paths, judged
//!   against a fixed context. Every answer has one verdict per call, ids in order; a call must
//!   be flagged when a hostile program stands in command position, a reader or a redirection
//!   takes a path outside the project, `$(`, a backtick, `${`, `<(` or `>(` is left for the
//!   shell to expand, or the line holds a non-ASCII or control character.
//! - outside paths: a call that writes, loads or runs a path outside the project, built from
//!   a template with a slot for the path (a redirection, `tee`, `cp`, `mkdir`, an output option
//!   of a build or test runner, a configuration or module to load, a script or program to run,
//!   an argument handed on after `--`), an outside path (absolute, under `~`, climbing with
//!   `..`, a sibling such as `/proj-evil`), an optional quoting, wrapper and `cd` before it,
//!   in sh or zsh (`>!`, `&>|`), or a `Write`/`Edit` tool call: it must be flagged.
//! - run after a write: an earlier call of the conversation, or an earlier call of the same
//!   reply, writes a file that decides what a runner runs (`package.json`, a `Makefile`,
//!   `build.rs`, `conftest.py`, a project script, ...; `Write`, `Edit`, `MultiEdit` or a shell
//!   redirection, among unrelated earlier calls), then the runner runs (with an optional `cd`,
//!   wrapper or environment prefix): the run must be flagged.
//! - raw context: the rest of the bytes are the `classifier_context`; anything that is not a
//!   JSON object makes the answer `unavailable`.
//! - raw command: the rest of the bytes are a `Bash` command; no panic, one verdict.

use devin_bridge_engine::{Call, TransformKind};
use devin_bridge_fuzz::differential;
use devin_bridge_types::{CallVerdict, SafeguardOutcome, SafeguardStatus, ToolCall};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

/// `/proj` is the working directory and the only trusted directory; no user rules.
const CONTEXT: &str = r#"{"v":1,"permission_mode":"auto","live_cwd":"/proj","home_dir":"/home/u",
"trusted_directories":{"primary":{"path":"/proj"},"additional":[]},
"rules":{"allow":[],"deny":[],"ask":[]},
"auto_mode":{"allow":[],"soft_deny":[],"hard_deny":[],"environment":[]},
"classify_all_shell":false,"restricted":false}"#;

/// The fixed context on macOS without a shell named: zsh runs the commands.
const CONTEXT_ZSH: &str = r#"{"v":1,"permission_mode":"auto","platform":"darwin","live_cwd":"/proj",
"home_dir":"/home/u","trusted_directories":{"primary":{"path":"/proj"},"additional":[]},
"rules":{"allow":[],"deny":[],"ask":[]},
"auto_mode":{"allow":[],"soft_deny":[],"hard_deny":[],"environment":[]},
"classify_all_shell":false,"restricted":false}"#;

/// Commands with a slot `{}` where a path is written, loaded as code or configuration, or
/// run; every one must be flagged when the path is outside the project.
const OUTSIDE_SLOTS: [&str; 44] = [
    "echo x > {}",
    "echo x >> {}",
    "git diff &> {}",
    "cat src/a.rs 2> {}",
    "ls | tee {}",
    "ls | tee -a {}",
    "cp src/a.rs {}",
    "cp -r src {}",
    "mv notes.txt {}",
    "mkdir -p {}",
    "touch {}",
    "npm test -- --outputFile={}",
    "npm test -- --config {}",
    "npm run build -- --out {}",
    "yarn test --setupFiles={}",
    "pnpm run lint -- {}",
    "cargo test -- --logfile {}",
    "cargo fmt -- {}",
    "cargo run -- {}",
    "go build -o {} .",
    "go test ./... -args -test.coverprofile={}",
    "pytest --junitxml={}",
    "pytest -c {}",
    "pytest --cov-report=html:{}",
    "jest --config={}",
    "jest -c {}",
    "vitest run --config {}",
    "tsc --outDir {}",
    "tsc -p {}",
    "gofmt -w {}",
    "node {}",
    "node scripts/x.js {}",
    "python3 {}",
    "python3 scripts/x.py --out={}",
    "make -f {} test",
    "make -C {} test",
    "make {}",
    "git -C {} status",
    "git add {}",
    "git diff --orderfile={}",
    "cd {} && npm test",
    "{} --help",
    "source {}",
    "find {} -print0 | xargs -0 grep x",
];

/// The same, with zsh's redirections (judged in [`CONTEXT_ZSH`]).
const OUTSIDE_ZSH_SLOTS: [&str; 6] = [
    "echo x >! {}",
    "echo x >>! {}",
    "npm test &>| {}",
    "ls >| {}",
    "git log >>| {}",
    "echo x &>>! {}",
];

/// Paths outside `/proj`, written so the shell keeps them as they are (see [`quote`]); the
/// relative ones climb out of `/proj` and of `/proj/src` alike.
const OUTSIDE_PATHS: [&str; 14] = [
    "/etc/x",
    "/tmp/y",
    "/",
    "~/.bashrc",
    "~/x",
    "~",
    "../../x",
    "../../etc/x",
    "src/../../../x",
    "/proj-evil/x",
    "//etc/x",
    "/proj/../etc/x",
    "/proj/src/../../tmp/x",
    "./../../y",
];

/// What may stand before the command: nothing, a wrapper, an accepted environment prefix, a
/// `cd` inside (a relative path then climbs from there, still outside for these paths).
const BEFORE: [&str; 6] = ["", "timeout 60 ", "nice ", "time ", "CI=1 ", "cd src && "];

/// Quotes the shell removes: the path the program gets is the same (`~` only unquoted).
fn quote(path: &str, how: u8) -> String {
    if path.starts_with('~') {
        return path.to_owned();
    }
    match how % 3 {
        0 => path.to_owned(),
        1 => format!("'{path}'"),
        _ => format!("\"{path}\""),
    }
}

/// A call that writes, loads or runs a path outside the project: it must be flagged.
fn outside(u: &mut Unstructured<'_>) -> Result<()> {
    let path = *u.choose(&OUTSIDE_PATHS)?;
    let quoted = quote(path, u.arbitrary()?);
    let (call, context) = match u.int_in_range(0..=5)? {
        0 => {
            let input = json!({ "file_path": path, "content": "x" });
            (
                ToolCall {
                    id: "toolu_00".into(),
                    name: "Write".into(),
                    input: input.to_string(),
                },
                CONTEXT,
            )
        }
        1 => {
            let input = json!({ "file_path": path, "old_string": "a", "new_string": "b" });
            (
                ToolCall {
                    id: "toolu_00".into(),
                    name: "Edit".into(),
                    input: input.to_string(),
                },
                CONTEXT,
            )
        }
        2 => {
            let command = u.choose(&OUTSIDE_ZSH_SLOTS)?.replace("{}", &quoted);
            let input = json!({ "command": command });
            (
                ToolCall {
                    id: "toolu_00".into(),
                    name: "Bash".into(),
                    input: input.to_string(),
                },
                CONTEXT_ZSH,
            )
        }
        _ => {
            let command = format!(
                "{}{}",
                u.choose(&BEFORE)?,
                u.choose(&OUTSIDE_SLOTS)?.replace("{}", &quoted)
            );
            let input = json!({ "command": command });
            let context = if u.arbitrary()? { CONTEXT } else { CONTEXT_ZSH };
            (
                ToolCall {
                    id: "toolu_00".into(),
                    name: "Bash".into(),
                    input: input.to_string(),
                },
                context,
            )
        }
    };
    let calls = [call];
    let status = judged(&calls, context);
    let outcome = outcomes(&status, &calls)[0];
    assert_eq!(
        outcome,
        SafeguardOutcome::Flagged,
        "passed: {} {}",
        calls[0].name,
        calls[0].input
    );
    Ok(())
}

/// Programs (with arguments) in the safe set.
const SAFE: [&str; 16] = [
    "pwd",
    "echo",
    "true",
    "git status",
    "git diff",
    "git log --oneline",
    "npm test",
    "cargo test",
    "date",
    "which",
    "tr a b",
    "printf x",
    "cd src",
    "find .",
    "rg x",
    "grep -rn x",
];

/// Programs that read their path operands: an outside path after one must be flagged.
const READERS: [&str; 6] = ["cat", "head", "ls", "wc -l", "grep -r x", "tail -n 5"];

/// Programs outside the safe set (`python FILE` and `node FILE` run a project script, like
/// `npm test`: only their inline-code forms are here).
const HOSTILE: [&str; 24] = [
    "rm",
    "curl",
    "wget",
    "sh",
    "bash",
    "python -c",
    "python3 -c",
    "node -e",
    "perl",
    "sudo",
    "su",
    "nc",
    "dd",
    "chmod",
    "xargs",
    "env",
    "eval",
    "exec",
    "source",
    "ssh",
    "scp",
    "base64",
    "awk",
    "./ls",
];

const OPERATORS: [&str; 8] = ["&&", "||", ";", "|", "\n", "&", "|&", ";;"];
const QUOTES: [&str; 4] = ["'", "\"", "\\", "#"];
const EXPANSIONS: [&str; 9] = ["$(", "`", "${", "<(", ">(", "$", ")", "(", "$'"];
const REDIRECTIONS: [&str; 5] = [">", ">>", "2>", "<", "&>"];
/// Paths that may pass (`/dev/null` only as a redirection target: it is outside the project).
const INSIDE: [&str; 6] = [
    "src/main.rs",
    "/proj/a",
    "./x",
    "README.md",
    "/proj/src/../b",
    "/dev/null",
];
const OUTSIDE: [&str; 8] = [
    "/etc/passwd",
    "~/.ssh/id_rsa",
    "../../x",
    "/proj/../etc/shadow",
    "/proj-evil/x",
    "//etc/shadow",
    "/tmp/x",
    "~",
];
const LOOKALIKES: [&str; 6] = [
    "\u{ff52}\u{ff4d}",
    "\u{441}at",
    "\u{202e}",
    "\u{200b}",
    "\u{a0}",
    "l\u{0455}",
];

/// Which kind of token was placed, for the oracle.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Safe,
    Reader,
    Hostile,
    Operator,
    Quote,
    Expansion,
    Redirection,
    Inside,
    Outside,
    Lookalike,
    Word,
}

struct Line {
    text: String,
    must_flag: bool,
}

fn build_line(u: &mut Unstructured<'_>) -> Result<Line> {
    let count = u.int_in_range(1..=12)?;
    let mut tokens: Vec<(Kind, String)> = Vec::with_capacity(count);
    for _ in 0..count {
        let token = match u.int_in_range(0..=10)? {
            0 => (Kind::Safe, (*u.choose(&SAFE)?).to_owned()),
            1 => (Kind::Reader, (*u.choose(&READERS)?).to_owned()),
            2 => (Kind::Hostile, (*u.choose(&HOSTILE)?).to_owned()),
            3 => (Kind::Operator, (*u.choose(&OPERATORS)?).to_owned()),
            4 => (Kind::Quote, (*u.choose(&QUOTES)?).to_owned()),
            5 => (Kind::Expansion, (*u.choose(&EXPANSIONS)?).to_owned()),
            6 => (Kind::Redirection, (*u.choose(&REDIRECTIONS)?).to_owned()),
            7 => (Kind::Inside, (*u.choose(&INSIDE)?).to_owned()),
            8 => (Kind::Outside, (*u.choose(&OUTSIDE)?).to_owned()),
            9 => (Kind::Lookalike, (*u.choose(&LOOKALIKES)?).to_owned()),
            _ => {
                let len = u.int_in_range(0..=6)?;
                let word: String = (0..len)
                    .map(|_| u.int_in_range(0x20u8..=0x7e).map(char::from))
                    .collect::<Result<_>>()?;
                (Kind::Word, word)
            }
        };
        tokens.push(token);
    }
    let text = tokens
        .iter()
        .map(|(_, t)| t.as_str())
        .collect::<Vec<_>>()
        .join(" ");

    // Quotes, backslashes, comments and free words can change what every later token means:
    // the token-level rules below hold only for lines without them.
    let plain = tokens
        .iter()
        .all(|(kind, _)| !matches!(kind, Kind::Quote | Kind::Word));
    let mut must_flag = !text.is_ascii()
        || text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        || shell_would_expand(&text);
    if plain {
        // A hostile program where a command starts; an outside path right after a reader that
        // starts a command (its first operand) or right after a redirection.
        let mut command_position = true;
        let mut after_reader = false;
        let mut after_redirection = false;
        for (kind, _) in &tokens {
            match kind {
                Kind::Hostile if command_position => must_flag = true,
                Kind::Outside if after_reader || after_redirection => must_flag = true,
                _ => {}
            }
            after_reader = command_position && *kind == Kind::Reader;
            after_redirection = *kind == Kind::Redirection;
            command_position = *kind == Kind::Operator;
        }
    }
    Ok(Line { text, must_flag })
}

/// An independent reading of the line: is `$(`, a backtick, `${` or `$'` left unquoted or in
/// double quotes, or `<(`/`>(` left unquoted? Backslashes escape outside single quotes.
fn shell_would_expand(line: &str) -> bool {
    let bytes = line.as_bytes();
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let next = bytes.get(i + 1).copied();
        if single {
            single = b != b'\'';
        } else if b == b'\\' {
            i += 1;
        } else if b == b'\'' && !double {
            single = true;
        } else if b == b'"' {
            double = !double;
        } else if b == b'`' || (b == b'$' && matches!(next, Some(b'(' | b'{'))) {
            return true;
        } else if b == b'$' && next == Some(b'\'') && !double {
            return true;
        } else if !double && matches!(b, b'<' | b'>') && next == Some(b'(') {
            return true;
        } else if !double && b == b'#' && (i == 0 || b" \t\n;&|<>()".contains(&bytes[i - 1])) {
            // Possibly a comment (the shell's rule also depends on quotes before it): nothing
            // after it up to the newline is then read, so nothing there is asserted.
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    false
}

fn outcomes(status: &SafeguardStatus, calls: &[ToolCall]) -> Vec<SafeguardOutcome> {
    let SafeguardStatus::Available(verdicts) = status else {
        panic!("the fixed context must be readable: {status:?}");
    };
    assert_eq!(verdicts.len(), calls.len(), "one verdict per call");
    verdicts
        .iter()
        .zip(calls)
        .map(|(verdict, call)| {
            assert_eq!(verdict.id, call.id, "verdicts in the calls' order");
            match &verdict.verdict {
                CallVerdict::Evaluated(evaluation) => {
                    assert!(!evaluation.explanation.is_empty());
                    assert!(evaluation.explanation.chars().count() <= 200);
                    evaluation.outcome
                }
                other => panic!("not evaluated: {other:?}"),
            }
        })
        .collect()
}

/// The native judge's answer, after checking that the component answers the same.
fn judged(calls: &[ToolCall], context: &str) -> SafeguardStatus {
    judged_after(calls, context, &[])
}

/// [`judged`] in a conversation whose earlier calls are `earlier`.
fn judged_after(calls: &[ToolCall], context: &str, earlier: &[ToolCall]) -> SafeguardStatus {
    let status = devin_bridge_safeguard::judge_in_conversation(calls, context, earlier);
    differential(Call::Judge {
        calls: calls.to_vec(),
        classifier_context: context.to_owned(),
        earlier_calls: earlier.to_vec(),
    });
    status
}

/// Files that decide what a runner runs, with runners that read them (`{}`: the file's
/// directory, for a runner that takes it).
const DECISIVE: [(&str, &[&str]); 9] = [
    (
        "package.json",
        &[
            "npm test",
            "npm run build",
            "npm run typecheck",
            "yarn test",
            "pnpm test",
        ],
    ),
    ("Makefile", &["make", "make -j8", "make test"]),
    ("build.rs", &["cargo test", "cargo build", "cargo check"]),
    (".cargo/config.toml", &["cargo test", "cargo build"]),
    ("rust-toolchain.toml", &["cargo test", "cargo build"]),
    ("conftest.py", &["pytest", "pytest -q", "python3 -m pytest"]),
    ("pytest.ini", &["pytest", "pytest --cov=src"]),
    ("scripts/gen.py", &["python3 scripts/gen.py"]),
    ("tsconfig.json", &["npx tsc", "npm run typecheck"]),
];

/// Directories of the project a decisive file may sit in.
const DECISIVE_DIRS: [&str; 3] = ["/proj/", "/proj/packages/app/", "/proj/sub/"];

/// A run after an earlier call of the conversation (or of the same reply) wrote a file that
/// decides what it runs: it must be flagged.
fn run_after_write(u: &mut Unstructured<'_>) -> Result<()> {
    let (file, runners) = *u.choose(&DECISIVE)?;
    let dir = if file.contains('/') {
        "/proj/"
    } else {
        *u.choose(&DECISIVE_DIRS)?
    };
    let path = format!("{dir}{file}");
    let write = match u.int_in_range(0..=3)? {
        0 => ToolCall {
            id: "toolu_w".into(),
            name: "Write".into(),
            input: json!({ "file_path": path, "content": "x" }).to_string(),
        },
        1 => ToolCall {
            id: "toolu_w".into(),
            name: "Edit".into(),
            input: json!({ "file_path": path, "old_string": "a", "new_string": "b" }).to_string(),
        },
        2 => ToolCall {
            id: "toolu_w".into(),
            name: "MultiEdit".into(),
            input:
                json!({ "file_path": path, "edits": [{ "old_string": "a", "new_string": "b" }] })
                    .to_string(),
        },
        _ => ToolCall {
            id: "toolu_w".into(),
            name: "Bash".into(),
            input: json!({ "command": format!("echo x >> {path}") }).to_string(),
        },
    };
    let runner = *u.choose(runners)?;
    let prefix = *u.choose(&["", "cd /proj && ", "timeout 120 ", "CI=1 "])?;
    let run = ToolCall {
        id: "toolu_r".into(),
        name: "Bash".into(),
        input: json!({ "command": format!("{prefix}{runner}") }).to_string(),
    };
    let context = if u.arbitrary()? { CONTEXT } else { CONTEXT_ZSH };
    // Unrelated earlier calls around the write, so the index is searched, not just read.
    let mut earlier: Vec<ToolCall> = (0..u.int_in_range(0..=20)?)
        .map(|i| ToolCall {
            id: format!("toolu_e{i}"),
            name: "Read".into(),
            input: json!({ "file_path": format!("/proj/src/m{i}.rs") }).to_string(),
        })
        .collect();
    let at = u.int_in_range(0..=earlier.len())?;
    let (status, calls) = if u.arbitrary()? {
        earlier.insert(at, write);
        let calls = vec![run];
        (judged_after(&calls, context, &earlier), calls)
    } else {
        // The write comes earlier in the same reply.
        let calls = vec![write, run];
        (judged_after(&calls, context, &earlier), calls)
    };
    let last = calls.len() - 1;
    let outcome = outcomes(&status, &calls)[last];
    assert_eq!(
        outcome,
        SafeguardOutcome::Flagged,
        "passed: {} after a write of {path}",
        calls[last].input
    );
    Ok(())
}

fn structured(u: &mut Unstructured<'_>) -> Result<()> {
    let count = u.int_in_range(1..=6)?;
    let mut calls = Vec::with_capacity(count);
    let mut must_flag = Vec::with_capacity(count);
    for i in 0..count {
        let id = format!("toolu_{i:02}");
        match u.int_in_range(0..=3)? {
            0 | 1 => {
                let line = build_line(u)?;
                calls.push(ToolCall {
                    id,
                    name: "Bash".into(),
                    input: json!({ "command": line.text }).to_string(),
                });
                must_flag.push(line.must_flag);
            }
            kind => {
                let (path, outside) = match u.int_in_range(0..=3)? {
                    0 => ((*u.choose(&INSIDE)?).to_owned(), false),
                    1 => ((*u.choose(&OUTSIDE)?).to_owned(), true),
                    2 => (format!("/proj/{}", u.choose(&LOOKALIKES)?), true),
                    _ => (format!("/proj/{}", u.choose(&OUTSIDE)?), false),
                };
                let (name, input) = if kind == 2 {
                    ("Read", json!({ "file_path": path }))
                } else {
                    ("Write", json!({ "file_path": path, "content": "x" }))
                };
                let outside = outside || path == "/dev/null";
                calls.push(ToolCall {
                    id,
                    name: name.into(),
                    input: input.to_string(),
                });
                must_flag.push(outside);
            }
        }
    }
    let status = judged(&calls, CONTEXT);
    for ((outcome, must), call) in outcomes(&status, &calls).iter().zip(&must_flag).zip(&calls) {
        if *must {
            assert_eq!(
                *outcome,
                SafeguardOutcome::Flagged,
                "passed: {} {}",
                call.name,
                call.input
            );
        }
    }
    Ok(())
}

fuzz_target!(init: devin_bridge_fuzz::prepare(TransformKind::Safeguard), |data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else { return };
    match mode % 8 {
        0 => {
            let context = String::from_utf8_lossy(rest);
            let calls = [ToolCall { id: "toolu_00".into(), name: "Bash".into(), input: r#"{"command":"pwd"}"#.into() }];
            let status = judged(&calls, &context);
            let object = matches!(serde_json::from_str::<Value>(&context), Ok(Value::Object(_)));
            if !object {
                assert!(matches!(status, SafeguardStatus::Unavailable(_)), "{status:?}");
            } else if let SafeguardStatus::Available(verdicts) = &status {
                assert_eq!(verdicts.len(), 1);
            }
        }
        1 => {
            let command = String::from_utf8_lossy(rest);
            let calls = [ToolCall { id: "toolu_00".into(), name: "Bash".into(), input: json!({ "command": command }).to_string() }];
            let status = judged(&calls, CONTEXT);
            let outcome = outcomes(&status, &calls)[0];
            let control = command.chars().any(|c| c.is_control() && c != '\n' && c != '\t');
            if !command.is_ascii() || control || shell_would_expand(&command) {
                assert_eq!(outcome, SafeguardOutcome::Flagged, "passed: {command:?}");
            }
        }
        2 => {
            let _ = outside(&mut Unstructured::new(rest));
        }
        3 => {
            let _ = run_after_write(&mut Unstructured::new(rest));
        }
        _ => {
            let _ = structured(&mut Unstructured::new(rest));
        }
    }
});
