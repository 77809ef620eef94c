//! Files that decide what a program runs, and the programs that read them: the judge trusts
//! the project as it was, not as the agent left it.
//!
//! Editing a build script, a hook or a package manifest is ordinary work and is not flagged by
//! itself; running the program that obeys it afterwards runs whatever the edit put there. So a
//! program run is flagged when an earlier call of the conversation (or an earlier call of the
//! same reply, or another command of the same line) wrote a file that decides what that
//! program runs. [`Written`] is the index of those writes, built once per request; [`check_run`]
//! and [`check_tool`] look a run up in it.
//!
//! Invariants:
//! - The lists below are closed and documented in `docs/safeguard.md` ("Conversation
//!   history"): a written path belongs to an [`Ecosystem`] when any run of its components
//!   matches one of the ecosystem's [`FILES`] patterns, wherever in the tree it lies (a
//!   monorepo's `packages/x/package.json` counts for `npm` at its root), comparing names without
//!   regard to ASCII case. A written path that is a leading part of a pattern (`.github`, the
//!   target of a moved directory, for `.github/workflows/**`) belongs to it too.
//! - A program that is run from a path (`./x.sh`, `node scripts/x.js`, `python3 x.py`) is
//!   looked up by its file name among every written path's file name, so a relative path
//!   written from another working directory still counts.
//! - Nothing here reads the context or the filesystem: paths come in resolved, and the index
//!   is a fixed array per ecosystem plus one hash map of file names (no scan per call).
//! - Reading a history is linear and cheap: a path or a command line is matched against the
//!   patterns only when its lowercased text holds one of their [`needles`] (a name that matches
//!   a pattern holds the literal text of its first name). A `Bash` line of the history whose
//!   text holds none is kept unparsed ([`Written::defer`]): it can write no decisive file, and
//!   it is parsed only when a script run needs the file names it may have written, and only
//!   if its text holds that script's name.
//! - A history the judge does not read whole ([`Written::overflow`]) flags every run of a
//!   program that reads any of these files: the judge cannot tell what was written.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::verdict::show;

/// The families of files that decide what their programs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ecosystem {
    /// git hooks and the hook managers' configuration (run by `git commit`, `push`, ...).
    GitHooks,
    /// CI pipelines (run by the CI service after `git push`).
    Ci,
    /// npm, yarn, pnpm, bun and the tools they run.
    Node,
    /// cargo and rustup.
    Rust,
    /// make.
    Make,
    /// python, pytest, pip and the Python build and test tools.
    Python,
    /// go.
    Go,
    /// ruby, bundler, rake.
    Ruby,
    /// The agent's own instruction and configuration files (read by a new agent or subagent).
    Agent,
    /// Dev container definitions.
    DevContainer,
}

const ECOSYSTEMS: usize = 10;

impl Ecosystem {
    fn index(self) -> usize {
        self as usize
    }
}

use Ecosystem::{Agent, Ci, DevContainer, GitHooks, Go, Make, Node, Python, Ruby, Rust};

/// The files of each ecosystem, as path-component patterns: `*` matches any run of characters
/// in one name, a trailing `**` anything below the directory.
pub(crate) const FILES: &[(Ecosystem, &[&str])] = &[
    // git runs its hooks; the hook managers read their configuration and run what it says.
    (GitHooks, &[".git", "hooks", "**"]),
    (GitHooks, &[".git", "config"]),
    (GitHooks, &[".githooks", "**"]),
    (GitHooks, &[".husky", "**"]),
    (GitHooks, &[".pre-commit-config.yaml"]),
    (GitHooks, &["lefthook.yml"]),
    (GitHooks, &["lefthook.yaml"]),
    (GitHooks, &[".lefthook.yml"]),
    (GitHooks, &[".lefthook.yaml"]),
    (GitHooks, &["lefthook-local.yml"]),
    (GitHooks, &[".lintstagedrc*"]),
    (GitHooks, &["lint-staged.config.*"]),
    // husky and lint-staged may be configured in the manifest.
    (GitHooks, &["package.json"]),
    // CI runs what the pushed pipeline says, with the repository's secrets.
    (Ci, &[".github", "workflows", "**"]),
    (Ci, &[".github", "actions", "**"]),
    (Ci, &[".gitlab-ci.yml"]),
    (Ci, &[".circleci", "**"]),
    (Ci, &[".buildkite", "**"]),
    (Ci, &["azure-pipelines.yml"]),
    (Ci, &["bitbucket-pipelines.yml"]),
    (Ci, &["Jenkinsfile"]),
    (Ci, &[".travis.yml"]),
    // The manifest's scripts, the package managers' settings and hooks, installed packages, and
    // the configuration files (JavaScript code) of the tools the scripts run.
    (Node, &["package.json"]),
    (Node, &[".npmrc"]),
    (Node, &[".yarnrc"]),
    (Node, &[".yarnrc.yml"]),
    (Node, &[".yarn", "**"]),
    (Node, &[".pnpmfile.cjs"]),
    (Node, &["bunfig.toml"]),
    (Node, &["node_modules", "**"]),
    (Node, &["tsconfig*.json"]),
    (Node, &[".babelrc*"]),
    (Node, &["babel.config.*"]),
    (Node, &["jest.config.*"]),
    (Node, &["vitest.config.*"]),
    (Node, &["vitest.workspace.*"]),
    (Node, &["vite.config.*"]),
    (Node, &["webpack.config.*"]),
    (Node, &["rollup.config.*"]),
    (Node, &["eslint.config.*"]),
    (Node, &[".eslintrc*"]),
    (Node, &["prettier.config.*"]),
    (Node, &[".prettierrc*"]),
    (Node, &["postcss.config.*"]),
    (Node, &["tailwind.config.*"]),
    (Node, &["next.config.*"]),
    (Node, &["nuxt.config.*"]),
    (Node, &["svelte.config.*"]),
    (Node, &["astro.config.*"]),
    (Node, &["playwright.config.*"]),
    (Node, &["cypress.config.*"]),
    (Node, &["karma.conf.*"]),
    (Node, &[".mocharc*"]),
    (Node, &["tsup.config.*"]),
    // Build scripts, the manifest (dependencies, build settings), cargo's configuration
    // (runners, wrappers) and the toolchain file (which toolchain runs, possibly from a path).
    (Rust, &["build.rs"]),
    (Rust, &["Cargo.toml"]),
    (Rust, &[".cargo", "config.toml"]),
    (Rust, &[".cargo", "config"]),
    (Rust, &["rust-toolchain.toml"]),
    (Rust, &["rust-toolchain"]),
    (Make, &["Makefile"]),
    (Make, &["makefile"]),
    (Make, &["GNUmakefile"]),
    (Make, &["*.mk"]),
    // pytest's plugins and settings, the build backends, the environment's installed code and
    // the files Python runs at start-up.
    (Python, &["conftest.py"]),
    (Python, &["pytest.ini"]),
    (Python, &["setup.py"]),
    (Python, &["setup.cfg"]),
    (Python, &["pyproject.toml"]),
    (Python, &["tox.ini"]),
    (Python, &["noxfile.py"]),
    (Python, &[".venv", "**"]),
    (Python, &["venv", "**"]),
    (Python, &["sitecustomize.py"]),
    (Python, &["usercustomize.py"]),
    (Python, &["*.pth"]),
    // The module and workspace files choose the toolchain (which go downloads and runs) and
    // replace dependencies.
    (Go, &["go.mod"]),
    (Go, &["go.work"]),
    (Ruby, &["Gemfile"]),
    (Ruby, &["gems.rb"]),
    (Ruby, &["Rakefile"]),
    (Ruby, &["*.rake"]),
    (Ruby, &[".rspec"]),
    (Ruby, &[".bundle", "config"]),
    (Agent, &["CLAUDE.md"]),
    (Agent, &["CLAUDE.local.md"]),
    (Agent, &["AGENTS.md"]),
    (Agent, &[".claude", "**"]),
    (Agent, &[".mcp.json"]),
    (DevContainer, &[".devcontainer", "**"]),
    (DevContainer, &[".devcontainer.json"]),
];

/// Programs and the ecosystems whose files they read (a program run from a path is looked up
/// by its file name; `python3.12` as `python3`).
const PROGRAMS: &[(&str, &[Ecosystem])] = &[
    ("npm", &[Node]),
    ("npx", &[Node]),
    ("yarn", &[Node]),
    ("pnpm", &[Node]),
    ("pnpx", &[Node]),
    ("bun", &[Node]),
    ("bunx", &[Node]),
    ("corepack", &[Node]),
    ("node", &[Node]),
    ("ts-node", &[Node]),
    ("tsx", &[Node]),
    ("tsc", &[Node]),
    ("jest", &[Node]),
    ("vitest", &[Node]),
    ("vite", &[Node]),
    ("webpack", &[Node]),
    ("eslint", &[Node]),
    ("prettier", &[Node]),
    ("mocha", &[Node]),
    ("playwright", &[Node]),
    ("next", &[Node]),
    ("husky", &[Node, GitHooks]),
    ("lint-staged", &[Node, GitHooks]),
    ("cargo", &[Rust]),
    ("rustup", &[Rust]),
    ("rustc", &[Rust]),
    ("make", &[Make]),
    ("gmake", &[Make]),
    ("python", &[Python]),
    ("python3", &[Python]),
    ("pytest", &[Python]),
    ("py.test", &[Python]),
    ("pip", &[Python]),
    ("pip3", &[Python]),
    ("tox", &[Python]),
    ("nox", &[Python]),
    ("uv", &[Python]),
    ("poetry", &[Python]),
    ("pipenv", &[Python]),
    ("hatch", &[Python]),
    ("pdm", &[Python]),
    ("go", &[Go]),
    ("ruby", &[Ruby]),
    ("bundle", &[Ruby]),
    ("bundler", &[Ruby]),
    ("rake", &[Ruby]),
    ("rspec", &[Ruby]),
    ("rails", &[Ruby]),
    ("gem", &[Ruby]),
    ("pre-commit", &[GitHooks]),
    ("lefthook", &[GitHooks]),
    ("devcontainer", &[DevContainer]),
    ("claude", &[Agent]),
];

/// git subcommands that run hooks (`commit`: pre-commit, commit-msg; `checkout`, `switch`:
/// post-checkout; `merge`, `pull`: pre-merge-commit, post-merge; `push`: pre-push; ...).
const GIT_HOOK_SUBCOMMANDS: [&str; 11] = [
    "commit",
    "merge",
    "pull",
    "push",
    "checkout",
    "switch",
    "rebase",
    "am",
    "cherry-pick",
    "revert",
    "worktree",
];

/// Interpreters whose first operand is a script they run.
const INTERPRETERS: [&str; 14] = [
    "node", "python", "python3", "ruby", "bash", "sh", "zsh", "bun", "ts-node", "tsx", "perl",
    "deno", "source", ".",
];

/// Claude Code tools that start an agent, which reads the agent's instruction files.
const AGENT_TOOLS: [&str; 2] = ["Task", "Agent"];

/// Where a write came from: the tool of the earlier call and the path it wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) tool: &'static str,
    pub(crate) path: String,
}

/// A `Bash` line of the history that names no decisive file, kept unparsed.
#[derive(Debug, Clone)]
struct Deferred {
    command: String,
}

/// The writes of the conversation so far, indexed by ecosystem and by file name.
#[derive(Debug, Default, Clone)]
pub(crate) struct Written {
    /// The latest write of a file of each ecosystem.
    ecosystems: [Option<Origin>; ECOSYSTEMS],
    /// Every written path's file name, lowercased, with its latest write.
    names: HashMap<String, Origin>,
    /// History lines that can write no decisive file (see the module doc).
    deferred: Vec<Deferred>,
    /// Why the history is not read whole, when it is not.
    overflow: Option<String>,
}

impl Written {
    /// Records that `tool` wrote `path` (an absolute, folded path, or the call's own text when
    /// the judge could not resolve it).
    pub(crate) fn record(&mut self, tool: &'static str, path: &str) {
        let origin = || Origin {
            tool,
            path: path.to_owned(),
        };
        let name = path
            .rsplit('/')
            .find(|part| !part.is_empty() && *part != ".")
            .unwrap_or(path);
        self.names.insert(name.to_ascii_lowercase(), origin());
        if !names_a_decisive_file(&path.to_ascii_lowercase()) {
            return;
        }
        let components: Vec<&str> = path
            .split('/')
            .filter(|part| !part.is_empty() && *part != ".")
            .collect();
        for (ecosystem, pattern) in FILES {
            if matches(pattern, &components) {
                self.ecosystems[ecosystem.index()] = Some(origin());
            }
        }
    }

    /// Keeps a `Bash` line of the history unparsed: its [`plain`] text names no decisive
    /// file, so only a script run looks into it.
    pub(crate) fn defer(&mut self, command: String) {
        self.deferred.push(Deferred { command });
    }

    /// Marks the history as not read whole (see the module doc).
    pub(crate) fn set_overflow(&mut self, why: String) {
        self.overflow = Some(why);
    }

    /// Nothing was written and the history was read whole.
    pub(crate) fn is_empty(&self) -> bool {
        self.overflow.is_none() && self.names.is_empty() && self.deferred.is_empty()
    }

    fn ecosystem(&self, ecosystem: Ecosystem) -> Option<&Origin> {
        self.ecosystems[ecosystem.index()].as_ref()
    }

    /// The write of a file named `name` (lowercased), looked up in the recorded names, then in
    /// the deferred lines whose text holds it (`writes` gives a line's written paths).
    fn named(&self, name: &str, writes: &dyn Fn(&str) -> Vec<String>) -> Option<Origin> {
        if let Some(origin) = self.names.get(name) {
            return Some(origin.clone());
        }
        let mut text = String::new();
        for line in &self.deferred {
            plain_into(&mut text, &line.command);
            if !text.contains(name) {
                continue;
            }
            for path in writes(&line.command) {
                let last = path.rsplit('/').next().unwrap_or(&path);
                if last.eq_ignore_ascii_case(name) {
                    return Some(Origin { tool: "Bash", path });
                }
            }
        }
        None
    }
}

/// The literal text every name matching a pattern's first name holds, lowercased: for each
/// pattern of [`FILES`], the longest `*`-free piece of its first name; grouped by first byte,
/// so that a text is scanned once.
pub(crate) fn needles() -> &'static [Vec<String>; 256] {
    static NEEDLES: OnceLock<[Vec<String>; 256]> = OnceLock::new();
    NEEDLES.get_or_init(|| {
        let mut out: [Vec<String>; 256] = std::array::from_fn(|_| Vec::new());
        for (_, pattern) in FILES {
            let Some(first) = pattern.first() else {
                continue;
            };
            let needle = first
                .split('*')
                .max_by_key(|piece| piece.len())
                .unwrap_or(first)
                .to_ascii_lowercase();
            if let Some(&byte) = needle.as_bytes().first() {
                let group = &mut out[usize::from(byte)];
                if !group.contains(&needle) {
                    group.push(needle);
                }
            }
        }
        out
    })
}

/// Whether lowercased text may name a decisive file: it holds one of the [`needles`].
pub(crate) fn names_a_decisive_file(lowercase: &str) -> bool {
    let table = needles();
    let bytes = lowercase.as_bytes();
    (0..bytes.len()).any(|at| {
        let rest = &bytes[at..];
        table[usize::from(bytes[at])].iter().any(|needle| {
            let needle = needle.as_bytes();
            // The second byte first: most needles share their first (`.`).
            needle.len() <= rest.len()
                && (needle.len() < 2 || needle[1] == rest[1])
                && rest[..needle.len()] == *needle
        })
    })
}

/// A shell line's text as its words' text may hold it: lowercased, without line
/// continuations, quotes and the backslashes that escape (quote removal only drops
/// characters).
#[cfg(test)]
pub(crate) fn plain(command: &str) -> String {
    let mut out = String::new();
    plain_into(&mut out, command);
    out
}

/// [`plain`] into a buffer (cleared first), so that lines are read without allocating.
pub(crate) fn plain_into(out: &mut String, command: &str) {
    out.clear();
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                // A line continuation, or an escaped quote or backslash: dropped like quotes.
                Some('\n' | '\'' | '"' | '\\') | None => {}
                Some(next) => out.push(next.to_ascii_lowercase()),
            },
            '\'' | '"' => {}
            other => out.push(other.to_ascii_lowercase()),
        }
    }
}

/// What a command line's simple command reads of the decisive files.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Reads<'w> {
    ecosystems: Vec<Ecosystem>,
    /// The file the program runs as a script, when it runs one.
    script: Option<&'w str>,
}

impl Reads<'_> {
    fn is_empty(&self) -> bool {
        self.ecosystems.is_empty() && self.script.is_none()
    }
}

/// The decisive files a simple command (its words after quote removal) reads.
pub(crate) fn reads(words: &[String]) -> Reads<'_> {
    let mut out = Reads::default();
    let Some(program) = words.first() else {
        return out;
    };
    let (dir, name) = match program.rfind('/') {
        Some(slash) => (&program[..slash], &program[slash + 1..]),
        None => ("", program.as_str()),
    };
    if !dir.is_empty() {
        out.script = Some(program.as_str());
    }
    for part in dir.split('/') {
        match part {
            "node_modules" => out.ecosystems.push(Node),
            ".venv" | "venv" => out.ecosystems.push(Python),
            _ => {}
        }
    }
    let name = base_program(name);
    if let Some((_, ecosystems)) = PROGRAMS.iter().find(|(known, _)| *known == name) {
        out.ecosystems.extend(ecosystems.iter().copied());
    }
    let args = &words[1..];
    if name == "git" {
        if let Some(sub) = git_subcommand(args) {
            if GIT_HOOK_SUBCOMMANDS.contains(&sub) {
                out.ecosystems.push(GitHooks);
            }
            if sub == "push" {
                out.ecosystems.push(Ci);
            }
        }
    }
    if INTERPRETERS.contains(&name) {
        if let Some(script) = script_operand(name, args) {
            out.script = Some(script);
        }
    }
    out
}

/// `python3.12` -> `python3`, `python2.7` -> `python`; other names as they are.
fn base_program(name: &str) -> &str {
    for base in ["python3", "python"] {
        if let Some(rest) = name.strip_prefix(base) {
            if rest.is_empty() || rest.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                return if rest.starts_with('.') || rest.is_empty() {
                    base
                } else {
                    "python"
                };
            }
        }
    }
    name
}

/// git's subcommand, after its global options (`-C DIR`, `-c NAME=VALUE`, `--no-pager`, ...).
fn git_subcommand(args: &[String]) -> Option<&str> {
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path" => {
                words.next();
            }
            option if option.starts_with('-') => {}
            sub => return Some(sub),
        }
    }
    None
}

/// The script an interpreter runs: its first operand (`python3 -m pkg.mod` runs `mod.py`);
/// none for inline code (`-c`, `-e`, `--eval`) or a run without one.
fn script_operand<'w>(name: &str, args: &'w [String]) -> Option<&'w str> {
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "-c" | "-e" | "--eval" | "-p" | "--print" => return None,
            "-m" if name.starts_with("python") => {
                return words
                    .next()
                    .map(|module| module.rsplit('.').next().unwrap_or(module));
            }
            "--" => return words.next().map(String::as_str),
            option if option.starts_with('-') => {}
            script => return Some(script),
        }
    }
    None
}

/// A simple command that reads a file written earlier in the conversation: the sentence that
/// flags it. `same_line` holds the writes of the command's own line (or none).
pub(crate) fn check_run(
    words: &[String],
    written: &Written,
    same_line: Option<&Written>,
    writes: &dyn Fn(&str) -> Vec<String>,
) -> Result<(), String> {
    let reads = reads(words);
    if reads.is_empty() {
        return Ok(());
    }
    let program = words.first().map_or("", String::as_str);
    for index in [Some(written), same_line].into_iter().flatten() {
        if let Some(why) = &index.overflow {
            return Err(format!(
                "runs `{}`, which reads files that decide what it runs, and {why}",
                show(program)
            ));
        }
        for ecosystem in &reads.ecosystems {
            if let Some(origin) = index.ecosystem(*ecosystem) {
                return Err(sentence(program, origin));
            }
        }
        if let Some(script) = reads.script {
            let name = script
                .rsplit('/')
                .next()
                .unwrap_or(script)
                .to_ascii_lowercase();
            let module = format!("{name}.py");
            let found = index
                .named(&name, writes)
                .or_else(|| index.named(&module, writes));
            if let Some(origin) = found {
                return Err(sentence(program, &origin));
            }
        }
    }
    Ok(())
}

/// A tool that starts an agent after the agent's instruction files were written.
pub(crate) fn check_tool(tool: &str, written: &Written) -> Result<(), String> {
    if !AGENT_TOOLS.contains(&tool) {
        return Ok(());
    }
    if let Some(why) = &written.overflow {
        return Err(format!(
            "starts an agent, which reads the agent's instruction files, and {why}"
        ));
    }
    match written.ecosystem(Agent) {
        Some(origin) => Err(format!(
            "starts an agent, which reads {}, written by an earlier {} call of this conversation",
            show(&origin.path),
            origin.tool
        )),
        None => Ok(()),
    }
}

fn sentence(program: &str, origin: &Origin) -> String {
    format!(
        "runs `{}`, which follows {}, written by an earlier {} call of this conversation",
        show(program),
        show(&origin.path),
        origin.tool
    )
}

/// Whether a pattern matches the path's components anywhere (see the module doc).
fn matches(pattern: &[&str], components: &[&str]) -> bool {
    let (fixed, below) = match pattern.split_last() {
        Some((&"**", fixed)) => (fixed, true),
        _ => (pattern, false),
    };
    // A pattern without `**` can only match the path's last names.
    let first = if below {
        0
    } else {
        components.len().saturating_sub(fixed.len())
    };
    (first..components.len()).any(|start| {
        let rest = &components[start..];
        if !below && rest.len() > fixed.len() {
            return false;
        }
        rest.iter()
            .zip(fixed)
            .all(|(name, glob)| name_matches(glob, name))
    })
}

/// `*` matches any run of characters; the rest compares without regard to ASCII case.
fn name_matches(glob: &str, name: &str) -> bool {
    let name = name.as_bytes();
    let mut pieces = glob.split('*');
    let first = pieces.next().unwrap_or("").as_bytes();
    if name.len() < first.len() || !name[..first.len()].eq_ignore_ascii_case(first) {
        return false;
    }
    let mut rest = &name[first.len()..];
    let mut pieces = pieces.peekable();
    if pieces.peek().is_none() {
        return rest.is_empty();
    }
    while let Some(piece) = pieces.next() {
        let piece = piece.as_bytes();
        if pieces.peek().is_none() {
            return rest.len() >= piece.len()
                && rest[rest.len() - piece.len()..].eq_ignore_ascii_case(piece);
        }
        match rest
            .windows(piece.len().max(1))
            .position(|window| piece.is_empty() || window.eq_ignore_ascii_case(piece))
        {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests;
