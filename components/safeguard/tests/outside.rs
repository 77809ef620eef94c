//! Every combination of the fuzz oracle's "outside paths" mode, judged exhaustively: a call
//! that writes, loads or runs a path outside the project is flagged, whatever wrapper, `cd`,
//! quoting or shell stands around it. The lists are those of `fuzz/fuzz_targets/safeguard.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use devin_bridge_safeguard::judge;
use devin_bridge_types::{CallVerdict, SafeguardOutcome, SafeguardStatus, ToolCall};
use serde_json::json;

const CONTEXT: &str = r#"{"v":1,"permission_mode":"auto","live_cwd":"/proj","home_dir":"/home/u",
"trusted_directories":{"primary":{"path":"/proj"},"additional":[]}}"#;

const CONTEXT_ZSH: &str = r#"{"v":1,"permission_mode":"auto","platform":"darwin","live_cwd":"/proj",
"home_dir":"/home/u","trusted_directories":{"primary":{"path":"/proj"},"additional":[]}}"#;

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

const OUTSIDE_ZSH_SLOTS: [&str; 6] = [
    "echo x >! {}",
    "echo x >>! {}",
    "npm test &>| {}",
    "ls >| {}",
    "git log >>| {}",
    "echo x &>>! {}",
];

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

const BEFORE: [&str; 6] = ["", "timeout 60 ", "nice ", "time ", "CI=1 ", "cd src && "];

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

fn outcome(name: &str, input: serde_json::Value, context: &str) -> SafeguardOutcome {
    let calls = [ToolCall {
        id: "toolu_00".to_owned(),
        name: name.to_owned(),
        input: input.to_string(),
    }];
    match judge(&calls, context) {
        SafeguardStatus::Available(verdicts) => match &verdicts[0].verdict {
            CallVerdict::Evaluated(evaluation) => evaluation.outcome,
            other => panic!("not evaluated: {other:?}"),
        },
        other => panic!("not available: {other:?}"),
    }
}

#[test]
fn nothing_that_writes_loads_or_runs_outside_passes() {
    let mut passed = Vec::new();
    let mut judged = 0;
    for path in OUTSIDE_PATHS {
        for tool in ["Write", "Edit"] {
            let input =
                json!({"file_path": path, "content": "x", "old_string": "a", "new_string": "b"});
            let input = if tool == "Write" {
                json!({"file_path": input["file_path"], "content": "x"})
            } else {
                json!({"file_path": input["file_path"], "old_string": "a", "new_string": "b"})
            };
            judged += 1;
            if outcome(tool, input.clone(), CONTEXT) != SafeguardOutcome::Flagged {
                passed.push(format!("{tool} {input}"));
            }
        }
        for how in 0..3 {
            let quoted = quote(path, how);
            for slot in OUTSIDE_ZSH_SLOTS {
                let command = slot.replace("{}", &quoted);
                judged += 1;
                if outcome("Bash", json!({"command": command}), CONTEXT_ZSH)
                    != SafeguardOutcome::Flagged
                {
                    passed.push(format!("zsh: {command}"));
                }
            }
            for before in BEFORE {
                for slot in OUTSIDE_SLOTS {
                    let command = format!("{before}{}", slot.replace("{}", &quoted));
                    for context in [CONTEXT, CONTEXT_ZSH] {
                        judged += 1;
                        if outcome("Bash", json!({"command": command}), context)
                            != SafeguardOutcome::Flagged
                        {
                            passed.push(command.clone());
                        }
                    }
                }
            }
        }
    }
    assert!(judged > 10_000, "only {judged} calls");
    // The control: with a path inside, most slots pass, so the flags above are about the path.
    let inside = OUTSIDE_SLOTS
        .iter()
        .filter(|slot| {
            let command = slot.replace("{}", "out/x");
            outcome("Bash", json!({"command": command}), CONTEXT) == SafeguardOutcome::NotFlagged
        })
        .count();
    assert!(inside >= 35, "only {inside} slots pass with a path inside");
    assert!(
        passed.is_empty(),
        "{} of {judged} calls passed:\n{}",
        passed.len(),
        passed.join("\n")
    );
}
