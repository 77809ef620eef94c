//! What an ordinary coding session does: every row must be `not_flagged`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{bash, bash_with, bashes, check, demo_context, macos_context, tool, zsh_context, Row};
use devin_bridge_safeguard::judge;
use devin_bridge_types::{CallVerdict, SafeguardOutcome, SafeguardStatus, ToolCall};
use serde_json::json;

fn shell() -> Vec<Row> {
    vec![
        bash("pwd", "pwd"),
        bash("ls", "ls"),
        bash("ls -la src", "ls -la src"),
        bash("ls quiet errors", "ls -la 2>/dev/null"),
        bash("git status", "git status"),
        bash("git status short", "git status --short --branch"),
        bash("git diff", "git diff"),
        bash("git diff staged stat", "git diff --cached --stat"),
        bash("git log oneline", "git log --oneline -5"),
        bash("git log path", "git log -p -- src/main.rs"),
        bash("git show", "git show HEAD~1 --stat"),
        bash("git show file at rev", "git show HEAD:src/main.rs"),
        bash("git diff range", "git diff main..HEAD"),
        bash("git diff | head", "git diff | head -50"),
        bash("git branch list", "git branch -a"),
        bash("git branch current", "git branch --show-current"),
        bash("git remote -v", "git remote -v"),
        bash("git tag list", "git tag -l"),
        bash("git stash list", "git stash list"),
        bash("git ls-files", "git ls-files"),
        bash("git rev-parse", "git rev-parse HEAD"),
        bash("git blame", "git blame src/main.rs"),
        bash("git grep", "git grep -n foo"),
        bash("git -C inside", "git -C /proj status"),
        bash("git no pager", "git --no-pager log -3"),
        bash("git add", "git add src/lib.rs"),
        bash("git commit", "git commit -m \"fix: off by one\""),
        bash("git add and commit", "git add -A && git commit -am 'wip'"),
        bash("cat package.json", "cat package.json"),
        bash("grep -rn TODO src", "grep -rn TODO src"),
        bash("grep -e", "grep -n -e foo -e bar src/main.rs"),
        bash("rg foo", "rg foo"),
        bash("rg with type", "rg -n 'fn main' --type rust src"),
        bash("find by name", "find . -name '*.rs'"),
        bash("find pipe head", "find src -type f -name '*.ts' | head"),
        bash("npm test", "npm test"),
        bash("npm t", "npm t"),
        bash("npm run test", "npm run test"),
        bash("npm run test:unit", "npm run test:unit"),
        bash("npm run lint", "npm run lint"),
        bash("npm run build", "npm run build"),
        bash("npm test with args", "npm test -- --watch=false"),
        bash("npm test tail", "npm test 2>&1 | tail -20"),
        bash("CI npm test", "CI=1 npm test"),
        bash("yarn test", "yarn test"),
        bash("pnpm test", "pnpm test"),
        bash("cargo test", "cargo test"),
        bash(
            "cargo test filtered",
            "cargo test -p devin-bridge-safeguard parse -- --nocapture",
        ),
        bash("cargo clippy", "cargo clippy --all-targets -- -D warnings"),
        bash("cargo fmt check", "cargo fmt --check"),
        bash("cargo build release", "cargo build --release"),
        bash("RUST_BACKTRACE cargo test", "RUST_BACKTRACE=1 cargo test"),
        bash("cd then npm test", "cd /proj && npm test"),
        bash("cd src then ls", "cd src && ls"),
        bash("cd sub then relative up", "cd src && cat ../Cargo.toml"),
        bash("node test file", "node math.test.js"),
        bash("node --test", "node --test"),
        bash("go test", "go test ./..."),
        bash("go vet", "go vet ./..."),
        bash("pytest node id", "pytest tests/test_x.py::test_a -q"),
        bash("python -m pytest", "python -m pytest -x"),
        bash(
            "python3 -m unittest",
            "python3 -m unittest discover -s tests",
        ),
        bash("make test", "make test"),
        bash("tsc noEmit", "tsc --noEmit"),
        bash("eslint", "eslint src"),
        bash("prettier check", "prettier --check 'src/**/*.ts'"),
        bash("jest filter", "jest -t parser"),
        bash("vitest run", "vitest run"),
        bash("head", "head -n 20 src/main.rs"),
        bash("tail", "tail -50 log.txt"),
        bash("wc", "wc -l src/main.rs"),
        bash("sort uniq", "sort data.txt | uniq -c"),
        bash("cut", "cut -d, -f1 data.csv"),
        bash("tr", "cat a.txt | tr a-z A-Z"),
        bash("jq", "jq '.scripts' package.json"),
        bash("sed print range", "sed -n '1,20p' src/main.rs"),
        bash("echo", "echo done"),
        bash("printf", "printf '%s\\n' x"),
        bash("date", "date +%Y-%m-%d"),
        bash("which", "which node"),
        bash("diff", "diff -u a.txt b.txt"),
        bash("cmp", "cmp a.bin b.bin"),
        bash("stat", "stat src"),
        bash("du", "du -sh src"),
        bash("tree", "tree -L 2"),
        bash("file", "file src/main.rs"),
        bash("realpath", "realpath src"),
        bash(
            "dirname basename",
            "dirname /proj/a/b && basename /proj/a.rs",
        ),
        bash("id whoami", "id; whoami"),
        bash("write inside", "echo x > out.txt"),
        bash("count lines", "ls | wc -l"),
        bash("comment", "ls # list"),
        bash("newline list", "git status\ngit diff"),
        bash("other trusted dir", "cat /shared/lib/README.md"),
        bash("make deploy cites allow", "make deploy").cites("auto_mode.allow.1"),
        bash(
            "make deploy in a line cites allow",
            "git status && make deploy prod",
        )
        .cites("auto_mode.allow.1"),
        bash(
            "redirect into generated cites allow",
            "echo x > /proj/generated/x.rs",
        ),
    ]
}

fn tools() -> Vec<Row> {
    vec![
        tool(
            "Read inside",
            "Read",
            json!({"file_path": "/proj/src/main.rs"}),
        ),
        tool(
            "Read relative",
            "Read",
            json!({"file_path": "src/main.rs", "offset": 1, "limit": 20}),
        ),
        tool(
            "Read other trusted dir",
            "Read",
            json!({"file_path": "/shared/lib/a.ts"}),
        ),
        tool(
            "Read .env.example is not passed? no: README",
            "Read",
            json!({"file_path": "/proj/README.md"}),
        ),
        tool(
            "Edit inside",
            "Edit",
            json!({"file_path": "/proj/src/main.rs", "old_string": "a", "new_string": "b"}),
        ),
        tool(
            "MultiEdit inside",
            "MultiEdit",
            json!({"file_path": "/proj/src/lib.rs", "edits": []}),
        ),
        tool(
            "Write inside",
            "Write",
            json!({"file_path": "/proj/src/new.rs", "content": "x"}),
        ),
        tool(
            "Write .gitignore",
            "Write",
            json!({"file_path": "/proj/.gitignore", "content": "target\n"}),
        ),
        tool(
            "NotebookRead inside",
            "NotebookRead",
            json!({"notebook_path": "/proj/a.ipynb"}),
        ),
        tool(
            "NotebookEdit inside",
            "NotebookEdit",
            json!({"notebook_path": "/proj/a.ipynb", "new_source": "x"}),
        ),
        tool("Glob", "Glob", json!({"pattern": "**/*.rs"})),
        tool(
            "Glob with path",
            "Glob",
            json!({"pattern": "src/**/*.{ts,tsx}", "path": "/proj"}),
        ),
        tool(
            "Glob absolute inside",
            "Glob",
            json!({"pattern": "/proj/src/*.rs"}),
        ),
        tool(
            "Grep",
            "Grep",
            json!({"pattern": "TODO", "path": "/proj/src", "glob": "*.rs"}),
        ),
        tool("Grep default path", "Grep", json!({"pattern": "fn main"})),
        tool("LS", "LS", json!({"path": "/proj"})),
        tool(
            "TodoWrite",
            "TodoWrite",
            json!({"todos": [{"content": "x", "status": "pending"}]}),
        ),
        tool("ExitPlanMode", "ExitPlanMode", json!({"plan": "x"})),
        tool("EnterPlanMode", "EnterPlanMode", json!({})),
        tool(
            "AskUserQuestion",
            "AskUserQuestion",
            json!({"questions": [{"question": "Which test runner?", "options": []}]}),
        ),
        tool("Task", "Task", json!({"description": "x", "prompt": "y"})),
        tool("BashOutput", "BashOutput", json!({"bash_id": "1"})),
        tool("KillShell", "KillShell", json!({"shell_id": "1"})),
        tool(
            "Edit generated cites allow",
            "Edit",
            json!({"file_path": "/proj/generated/x.rs", "old_string": "a", "new_string": "b"}),
        )
        .cites("auto_mode.allow.4"),
        tool(
            "WebFetch allowed domain",
            "WebFetch",
            json!({"url": "https://docs.rs/serde", "prompt": "x"}),
        )
        .cites("auto_mode.allow.2"),
        tool(
            "mcp server allowed",
            "mcp__github__get_issue",
            json!({"number": 1}),
        )
        .cites("auto_mode.allow.3"),
    ]
}

fn files_and_directories() -> Vec<Row> {
    bashes(
        "files",
        &[
            "mkdir -p src/utils",
            "mkdir build",
            "mkdir -p tests/fixtures/a tests/fixtures/b",
            "mkdir -pv out/reports",
            "touch src/new.rs",
            "touch -c README.md",
            "cp src/a.rs src/b.rs",
            "cp -r fixtures fixtures-copy",
            "cp config.example.toml config.toml",
            "cp -v .env.example .env.template",
            "mv old.rs new.rs",
            "mv src/a.rs src/lib/",
            "mv -v tmp.txt out/",
            "mv old_dir/ new_dir",
            "cp -a assets dist/",
            "mkdir -p .github/workflows",
            "cp src/*.rs backup/",
        ],
    )
}

fn branches_and_stash() -> Vec<Row> {
    bashes(
        "branch or stash",
        &[
            "git checkout -b feature/parser",
            "git checkout -b fix-123",
            "git switch -c wip",
            "git switch --create release/1.2",
            "git checkout -b spike.try-2",
            "git stash",
            "git stash -u",
            "git stash push -m 'wip: parser'",
            "git stash push -u",
            "git stash push --keep-index",
            "git stash push -- src/a.rs",
            "git stash list",
            "git stash show",
            "git stash show -p",
            "git stash show --stat",
            "git stash save before-rebase",
        ],
    )
}

fn project_scripts() -> Vec<Row> {
    bashes(
        "script",
        &[
            "npm run typecheck",
            "npm run format:check",
            "npm run dev",
            "npm start",
            "npm run build --silent",
            "npm run lint -- --fix src",
            "npm run test:e2e -- --grep login",
            "yarn lint",
            "yarn typecheck",
            "yarn build",
            "yarn run lint --fix",
            "yarn test:unit",
            "pnpm run x",
            "pnpm lint",
            "pnpm test -- --coverage",
            "pnpm run typecheck:strict",
            "yarn run db:migrate",
            "python3 scripts/x.py",
            "python scripts/gen.py --out build/gen.rs",
            "python3 -u tools/report.py data/input.csv",
            "node scripts/build.js",
            "node scripts/check.mjs --strict",
            "cargo run -- --help",
            "cargo run --bin tool -- input.txt",
            "make",
            "make -j8",
            "make clean",
            "make -j4 all",
            "make -C sub",
        ],
    )
}

fn npx_and_installed_tools() -> Vec<Row> {
    bashes(
        "installed tool",
        &[
            "npx tsc",
            "npx tsc --noEmit",
            "npx tsc -b",
            "npx jest",
            "npx jest -t parser",
            "npx eslint src",
            "npx eslint --max-warnings=0 src",
            "npx prettier --check .",
            "npx vitest run",
            "npx --no-install tsc -p tsconfig.json",
            "node_modules/.bin/jest",
            "./node_modules/.bin/tsc --noEmit",
            "node node_modules/jest/bin/jest.js -t parser",
            "node node_modules/typescript/bin/tsc --noEmit",
            "node_modules/.bin/eslint src",
            "node_modules/.bin/prettier --check .",
            "node_modules/.bin/vitest run",
            ".venv/bin/pytest -q",
            "venv/bin/python -m pytest",
            ".venv/bin/python scripts/x.py",
        ],
    )
}

fn versions() -> Vec<Row> {
    bashes(
        "version",
        &[
            "node --version",
            "npm -v",
            "cargo --version",
            "rustc -V",
            "go version",
            "python3 --version",
            "git --version",
            "terraform --version",
            "java --version",
            "gcc --version",
            "make --version",
            "psql --version",
            "curl -V",
            "jq --version",
            "tsc -v",
            "yarn -v",
        ],
    )
}

fn globs_in_the_project() -> Vec<Row> {
    bashes(
        "glob",
        &[
            "wc -l src/*.rs",
            "ls src/*.ts",
            "cat docs/*.md",
            "head -n 5 src/*.py",
            "grep -n TODO src/*.rs",
            "git add src/*.rs",
            "rg foo src/*.ts",
            "du -sh target/*",
            "ls -la ./*.json",
            "cat tests/fixtures/*.json",
            "stat src/*.rs",
            "wc -l ./*.md",
            "sort data/*.csv",
            "jq . src/*.json",
            "ls src/[a-m]*.rs",
            "tail -n 3 logs/app-?.log",
            "ls -d ./.*ignore",
        ],
    )
}

fn wrappers() -> Vec<Row> {
    bashes(
        "wrapper",
        &[
            "find . -name '*.ts' -print0 | xargs -0 grep -l TODO",
            "find src -type f -print0 | xargs -0 wc -l",
            "find tests -name '*.py' -print0 | xargs -0 -n 10 head -3",
            "timeout 120 cargo test",
            "timeout 60 npm test",
            "timeout -k 5 300 make test",
            "timeout 2m go test ./...",
            "nice cargo build",
            "nice -n 10 npm run build",
            "time cargo build",
            "time -p npm test",
            "cargo test 2>&1 | tee test.log",
            "npm test | tee out/test.log",
            "git diff | tee -a changes.patch",
        ],
    )
}

fn builds_and_tests() -> Vec<Row> {
    bashes(
        "build",
        &[
            "go build -o bin/x",
            "go build -o bin/server ./cmd/server",
            "gofmt -l .",
            "gofmt -d src",
            "gofmt -w main.go",
            "pytest --cov=src",
            "pytest --cov=src --cov-report=term-missing",
            "pytest --cov=app --cov-report=html:htmlcov",
            "pytest --junitxml=reports/junit.xml",
            "pytest -p no:cacheprovider -q",
            "tsc",
            "tsc -p tsconfig.build.json",
            "tsc --outDir dist",
            "cargo test -- --test-threads=1",
            "cargo fmt -- --check",
            "jest src/parser",
            "vitest run src/parser.test.ts",
            "go test ./... -args -update",
        ],
    )
}

fn templates_and_filters() -> Vec<Row> {
    let mut rows = bashes(
        "template or filter",
        &[
            "cat .env.example",
            "cat .env.sample",
            "cat config/secrets.yml.example",
            "cat .dev.vars.example",
            "diff .env.example .env.template",
            "head terraform.tfvars.example",
            "grep KEY .env.example",
            "cat credentials.json.sample",
            "grep -r TODO --include='*.rs' .",
            "grep -r x --exclude-dir=node_modules .",
            "rg -g '*.ts' foo",
            "rg -g '!dist' foo",
            "find . -name '*.rs'",
            "find . -iname readme.md",
            "find . -type f ! -name '*.min.js'",
            "git ls-files ':(glob)src/**/*.rs'",
            "git log -- ':!vendor'",
            "git grep foo -- '*.py'",
            "grep -rn x '--include=*.{ts,tsx}' src",
            "grep -rn TODO --include=*.rs .",
        ],
    );
    rows.push(tool(
        "template: Read .env.example",
        "Read",
        json!({"file_path": "/proj/.env.example"}),
    ));
    rows.push(tool(
        "template: Read .env.dist",
        "Read",
        json!({"file_path": "/proj/.env.dist"}),
    ));
    rows
}

fn bounded_output() -> Vec<Row> {
    bashes(
        "bounded",
        &[
            "seq 10",
            "seq 1 100",
            "seq -w 1 12",
            "printf '%-20s|\\n' name",
            "printf '%05d\\n' 42",
            "jq -n '[range(10)]'",
            "jq -n '[range(0; 100)]'",
            "jq '.items | length' data.json",
            "jq '[..|numbers]' data.json",
            "jq 'recurse' tree.json",
        ],
    )
}

fn fields_and_shells() -> Vec<Row> {
    let mut rows = bash_with(
        "field",
        &[
            ("cargo test", json!({"timeout": 120_000})),
            (
                "npm test",
                json!({"timeout": 600_000, "description": "Run the tests"}),
            ),
            ("git status", json!({"dangerouslyDisableSandbox": false})),
            ("git log --oneline -20", json!({"run_in_background": true})),
            ("grep -rn TODO src", json!({"run_in_background": true})),
            ("ls", json!({"run_in_background": false, "timeout": 1000})),
        ],
    );
    for (name, input) in [
        (
            "Read",
            json!({"file_path": "/proj/doc.pdf", "pages": "1-3"}),
        ),
        (
            "Grep",
            json!({"pattern": "x", "output_mode": "content", "-n": true, "-i": true, "type": "rust", "head_limit": 20, "multiline": false, "-C": 2}),
        ),
        (
            "Edit",
            json!({"file_path": "/proj/src/a.rs", "old_string": "a", "new_string": "b", "replace_all": true}),
        ),
        (
            "NotebookEdit",
            json!({"notebook_path": "/proj/a.ipynb", "new_source": "x", "cell_type": "code", "edit_mode": "insert", "cell_id": "c1"}),
        ),
        (
            "Task",
            json!({"description": "x", "prompt": "y", "subagent_type": "explore", "model": "haiku"}),
        ),
        ("LS", json!({"path": "/proj", "ignore": ["target"]})),
        ("BashOutput", json!({"bash_id": "1", "filter": "error"})),
        (
            "Write",
            json!({"file_path": "/proj/src/x.rs", "content": "x"}),
        ),
    ] {
        rows.push(tool(&format!("field: {name} {input}"), name, input));
    }
    for line in [
        "ls -la",
        "git status",
        "echo x >| out.txt",
        "npm test 2>&1 | tail",
        "cargo test &> test.log",
        "echo hi >! notes.txt",
        "echo x >>! log.txt",
        "cat <<< hi",
        "wc -l src/*.rs",
        "cd src && ls",
    ] {
        rows.push(bash(&format!("zsh: {line}"), line).in_ctx(macos_context()));
    }
    rows.push(
        bash("zsh by name: npm test &>| log.txt", "npm test &>| log.txt").in_ctx(zsh_context()),
    );
    rows
}

/// Every class of the table, by name.
fn classes() -> Vec<(&'static str, Vec<Row>)> {
    vec![
        ("shell", shell()),
        ("tools", tools()),
        ("files and directories", files_and_directories()),
        ("branches and stash", branches_and_stash()),
        ("project scripts", project_scripts()),
        ("npx and installed tools", npx_and_installed_tools()),
        ("versions", versions()),
        ("globs in the project", globs_in_the_project()),
        ("wrappers", wrappers()),
        ("builds and tests", builds_and_tests()),
        ("templates and filters", templates_and_filters()),
        ("bounded output", bounded_output()),
        ("fields and shells", fields_and_shells()),
    ]
}

/// The table cannot silently shrink: at least 250 rows, and at least 10 in each class.
#[test]
fn the_ordinary_table_keeps_its_size() {
    let classes = classes();
    let total: usize = classes.iter().map(|(_, rows)| rows.len()).sum();
    assert!(total >= 250, "only {total} ordinary rows");
    for (name, rows) in &classes {
        assert!(
            rows.len() >= 10,
            "the class {name} has only {} rows",
            rows.len()
        );
    }
}

#[test]
fn ordinary_session_is_not_flagged() {
    let rows: Vec<Row> = classes().into_iter().flat_map(|(_, rows)| rows).collect();
    let failures = check(&rows, SafeguardOutcome::NotFlagged);
    assert!(
        failures.is_empty(),
        "{} of {} ordinary rows were not passed as expected:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

/// The offline agent's demo, as one reply per step and as one reply with every call.
#[test]
fn offline_agent_demo_runs_without_asking() {
    let calls = [
        (
            "Bash",
            json!({"command": "pwd", "description": "Show the working directory"}),
        ),
        ("Read", json!({"file_path": "/w/math.js"})),
        ("Read", json!({"file_path": "/w/math.test.js"})),
        (
            "Edit",
            json!({"file_path": "/w/math.js", "old_string": "a - b", "new_string": "a + b"}),
        ),
        (
            "Bash",
            json!({"command": "npm test", "description": "Run the tests"}),
        ),
    ];
    let ctx = demo_context();
    for (tool, input) in &calls {
        let evaluation = common::evaluate(tool, input, &ctx);
        assert_eq!(
            evaluation.outcome,
            SafeguardOutcome::NotFlagged,
            "{tool} {input}: {}",
            evaluation.explanation
        );
        assert_eq!(evaluation.cited_rule, None);
    }
    let calls: Vec<ToolCall> = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, input))| ToolCall {
            id: format!("toolu_{i:02}"),
            name: (*tool).to_owned(),
            input: input.to_string(),
        })
        .collect();
    let SafeguardStatus::Available(verdicts) = judge(&calls, &ctx.to_string()) else {
        panic!("not available");
    };
    let ids: Vec<&str> = verdicts.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(
        ids,
        vec!["toolu_00", "toolu_01", "toolu_02", "toolu_03", "toolu_04"]
    );
    assert!(verdicts.iter().all(|v| matches!(
        &v.verdict,
        CallVerdict::Evaluated(e) if e.outcome == SafeguardOutcome::NotFlagged
    )));
}

#[test]
fn eight_ordinary_calls_take_microseconds() {
    let ctx = common::context().to_string();
    let calls: Vec<ToolCall> = (0..8)
        .map(|i| ToolCall {
            id: format!("toolu_{i}"),
            name: if i % 2 == 0 { "Bash" } else { "Read" }.to_owned(),
            input: if i % 2 == 0 {
                json!({"command": "git diff --stat && npm test 2>&1 | tail -20"}).to_string()
            } else {
                json!({"file_path": "/proj/src/main.rs"}).to_string()
            },
        })
        .collect();
    let start = std::time::Instant::now();
    let rounds = 200;
    for _ in 0..rounds {
        assert!(matches!(judge(&calls, &ctx), SafeguardStatus::Available(_)));
    }
    let per_call = start.elapsed() / rounds;
    // Generous for an unoptimised test build on a loaded machine; a release build is far
    // below it.
    assert!(
        per_call < std::time::Duration::from_millis(5),
        "{per_call:?} per judge call"
    );
}
