//! Reviews: which changes (working tree or branch), the bounded diff, the prompt built from
//! the plugin's `prompts/review.md`, and the validation of the reviewer's JSON answer.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::cli::Scope;
use crate::policy::CompanionPolicy;
use devin_bridge_engine::{EngineError, TransformCalls, TransformKind};

/// Largest diff sent for review.
pub(crate) const MAX_DIFF_BYTES: usize = 1 << 20;

/// The built-in review prompt (the plugin's copy).
pub(crate) const BUILTIN_TEMPLATE: &str = include_str!("../../../plugins/devin/prompts/review.md");

/// Why the changes could not be collected.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReviewError {
    /// `input`.
    #[error("{0}")]
    Input(String),
    /// `resource`.
    #[error("the diff is larger than {MAX_DIFF_BYTES} bytes; narrow the review (--scope, --base)")]
    TooLarge,
    /// `error`.
    #[error("{0}")]
    Git(String),
}

/// The changes to review.
#[derive(Debug, Clone)]
pub(crate) struct Changes {
    /// `working-tree` or `branch <base>...HEAD`.
    pub scope: String,
    pub diff: String,
}

/// Runs git in `workspace`, keeping at most `cap` bytes of stdout (`None` beyond it).
fn git(workspace: &Path, args: &[&str], cap: usize) -> Result<Option<String>, ReviewError> {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| ReviewError::Git(format!("cannot run git: {error}")))?;
    let mut out = Vec::new();
    let read = child
        .stdout
        .take()
        .map(|stdout| stdout.take(cap as u64 + 1).read_to_end(&mut out));
    let too_large = out.len() > cap;
    if too_large {
        let _ = child.kill();
    }
    let status = child
        .wait()
        .map_err(|error| ReviewError::Git(format!("git failed: {error}")))?;
    if too_large {
        return Ok(None);
    }
    if !matches!(read, Some(Ok(_))) || !status.success() {
        return Err(ReviewError::Git(format!("`git {}` failed", args.join(" "))));
    }
    Ok(Some(String::from_utf8_lossy(&out).into_owned()))
}

fn git_small(workspace: &Path, args: &[&str]) -> Option<String> {
    git(workspace, args, 64 << 10)
        .ok()
        .flatten()
        .map(|text| text.trim().to_owned())
}

/// The repository root of `dir`, if it is inside one.
pub(crate) fn toplevel(dir: &Path) -> Option<PathBuf> {
    git_small(dir, &["rev-parse", "--show-toplevel"])
        .filter(|top| !top.is_empty())
        .map(PathBuf::from)
}

fn is_dirty(workspace: &Path) -> Result<bool, ReviewError> {
    let status = git(
        workspace,
        &["status", "--porcelain", "--untracked-files=normal"],
        MAX_DIFF_BYTES,
    )?;
    Ok(status.is_none_or(|text| !text.trim().is_empty()))
}

/// The base of a branch review: `--base`, else origin's HEAD, else `main`, else `master`.
fn default_base(workspace: &Path) -> Result<String, ReviewError> {
    if let Some(origin) = git_small(
        workspace,
        &[
            "symbolic-ref",
            "--quiet",
            "--short",
            "refs/remotes/origin/HEAD",
        ],
    )
    .filter(|s| !s.is_empty())
    {
        return Ok(origin);
    }
    for candidate in ["main", "master"] {
        if git_small(
            workspace,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{candidate}^{{commit}}"),
            ],
        )
        .is_some_and(|s| !s.is_empty())
        {
            return Ok(candidate.to_owned());
        }
    }
    Err(ReviewError::Input(
        "cannot find a base branch (no origin HEAD, main or master); pass --base".into(),
    ))
}

/// Collects the diff of `scope`. An empty diff is `input` ("nothing to review").
pub(crate) fn collect(
    workspace: &Path,
    scope: Scope,
    base: Option<&str>,
) -> Result<Changes, ReviewError> {
    if toplevel(workspace).is_none() {
        return Err(ReviewError::Input(
            "the workspace is not inside a git repository".into(),
        ));
    }
    let working_tree = match scope {
        Scope::WorkingTree => true,
        Scope::Branch => false,
        Scope::Auto => base.is_none() && is_dirty(workspace)?,
    };
    let changes = if working_tree {
        let mut diff = git(
            workspace,
            &["diff", "HEAD", "--no-color", "--no-ext-diff"],
            MAX_DIFF_BYTES,
        )?
        .ok_or(ReviewError::TooLarge)?;
        let untracked = git(
            workspace,
            &["ls-files", "--others", "--exclude-standard"],
            MAX_DIFF_BYTES,
        )?
        .ok_or(ReviewError::TooLarge)?;
        if !untracked.trim().is_empty() {
            diff.push_str("\n# Untracked files (not shown in the diff; read them if relevant):\n");
            for name in untracked.lines() {
                diff.push_str("#   ");
                diff.push_str(name);
                diff.push('\n');
            }
        }
        Changes {
            scope: "working-tree".into(),
            diff,
        }
    } else {
        let base = match base {
            Some(base) => {
                if base.starts_with('-') {
                    return Err(ReviewError::Input(format!("--base {base} is not a ref")));
                }
                base.to_owned()
            }
            None => default_base(workspace)?,
        };
        let range = format!("{base}...HEAD");
        let diff = git(
            workspace,
            &["diff", "--no-color", "--no-ext-diff", &range, "--"],
            MAX_DIFF_BYTES,
        )
        .map_err(|_| ReviewError::Input(format!("cannot diff {range}: is {base} a ref?")))?
        .ok_or(ReviewError::TooLarge)?;
        Changes {
            scope: format!("branch {range}"),
            diff,
        }
    };
    if changes.diff.trim().is_empty() {
        return Err(ReviewError::Input(format!(
            "nothing to review ({} has no changes)",
            changes.scope
        )));
    }
    if changes.diff.len() > MAX_DIFF_BYTES {
        return Err(ReviewError::TooLarge);
    }
    Ok(changes)
}

/// The review template: `$CLAUDE_PLUGIN_ROOT/prompts/review.md`, else the built-in copy.
pub(crate) fn template() -> String {
    std::env::var_os("CLAUDE_PLUGIN_ROOT")
        .filter(|root| !root.is_empty())
        .map(|root| PathBuf::from(root).join("prompts/review.md"))
        .and_then(|path| {
            std::fs::File::open(path).ok().and_then(|file| {
                let mut text = String::new();
                file.take(256 << 10).read_to_string(&mut text).ok()?;
                Some(text)
            })
        })
        .unwrap_or_else(|| BUILTIN_TEMPLATE.to_owned())
}

/// Replaces `{{DIFF}}`, `{{FOCUS}}` and `{{SCOPE}}` in one pass: text inserted for one
/// placeholder is never searched for another.
pub(crate) fn interpolate(template: &str, diff: &str, focus: &str, scope: &str) -> String {
    let mut out = String::with_capacity(template.len() + diff.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let replaced = [
            ("{{DIFF}}", diff),
            ("{{FOCUS}}", focus),
            ("{{SCOPE}}", scope),
        ]
        .into_iter()
        .find(|(name, _)| after.starts_with(name));
        match replaced {
            Some((name, value)) => {
                out.push_str(value);
                rest = &after[name.len()..];
            }
            None => {
                out.push_str("{{");
                rest = &after[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Validates the reviewer's reply (its first JSON object) with the envelope component.
/// `Ok(Ok(json))` is the canonical review; `Ok(Err(message))` a missing or invalid one.
pub(crate) fn validate(
    policy: &CompanionPolicy,
    reply: &str,
) -> Result<Result<serde_json::Value, String>, EngineError> {
    let component = super::models::load_component(policy, TransformKind::Envelope)?;
    Ok(match component.parse_review(reply.to_owned())? {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|error| format!("the validated review is not JSON: {error}")),
        Err(failure) => Err(format!("{}: {}", failure.code, failure.message)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_is_single_pass() {
        let text = interpolate(
            "scope={{SCOPE}} focus={{FOCUS}} {{OTHER}}\n{{DIFF}}",
            "+ {{FOCUS}}",
            "errors",
            "working-tree",
        );
        assert_eq!(
            text,
            "scope=working-tree focus=errors {{OTHER}}\n+ {{FOCUS}}"
        );
    }

    #[test]
    fn the_builtin_template_has_every_placeholder() {
        for name in ["{{DIFF}}", "{{FOCUS}}", "{{SCOPE}}"] {
            assert!(BUILTIN_TEMPLATE.contains(name), "{name}");
        }
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = |args: &[&str]| {
            let status = Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@e")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@e")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("git");
            assert!(status.success(), "git {args:?}");
        };
        run(&["init", "-q", "-b", "main"]);
        std::fs::write(dir.path().join("a.rs"), "fn a() {}\n").expect("write");
        run(&["add", "."]);
        run(&["commit", "-q", "-m", "one"]);
        dir
    }

    #[test]
    fn a_clean_tree_has_nothing_to_review_and_a_dirty_one_has_its_diff() {
        let dir = repo();
        let error = collect(dir.path(), Scope::WorkingTree, None).expect_err("clean");
        assert!(matches!(error, ReviewError::Input(ref m) if m.contains("nothing to review")));
        std::fs::write(dir.path().join("a.rs"), "fn a() { b() }\n").expect("write");
        std::fs::write(dir.path().join("new.rs"), "x").expect("write");
        let changes = collect(dir.path(), Scope::Auto, None).expect("dirty");
        assert_eq!(changes.scope, "working-tree");
        assert!(changes.diff.contains("+fn a() { b() }"));
        assert!(changes.diff.contains("new.rs"));
    }
}
