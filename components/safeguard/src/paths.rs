//! Lexical path resolution and the path lists: trusted directories, sensitive names,
//! protected configuration.
//!
//! Invariants:
//! - Resolution is textual only. `.`, `..` and repeated `/` are folded (never above `/`); the
//!   filesystem is never consulted, so a symlink inside a trusted directory is followed by the
//!   tool and not by the judge (documented limit).
//! - A path the judge cannot read with certainty is [`Problem::Unresolvable`], never "inside":
//!   one holding `$`, a backtick or a control character, `~user`, a relative path without a
//!   working directory, `~` without a home directory, or more than [`MAX_PATH_BYTES`].
//! - "Inside" means equal to a trusted directory or below it at a `/` boundary, and everything
//!   after that directory is ASCII (a Unicode look-alike can only be trusted when it is part of
//!   the directory the user trusts, byte for byte).
//! - Sensitive and protected names are compared ASCII-case-insensitively: the default macOS
//!   filesystem does not distinguish `.SSH` from `.ssh`.

use crate::context::Context;
pub(crate) use crate::pathname::normalize;
use crate::verdict::show;

/// Longest path the judge resolves (Linux `PATH_MAX`); longer ones are unresolvable.
pub(crate) const MAX_PATH_BYTES: usize = 4096;

/// Most components of a resolved path; deeper ones are unresolvable (this bounds the cost of
/// matching the user's path rules).
pub(crate) const MAX_PATH_DEPTH: usize = 128;

/// Longest name in a path (Linux `NAME_MAX`): no file can have a longer one.
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// Why a path does not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    Unresolvable(&'static str),
    Outside(String),
    /// Inside, but with a non-ASCII character after the trusted directory.
    NonAscii(String),
    Sensitive(String, &'static str),
    Protected(String, &'static str),
}

/// What a call does with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    /// Handed on to code the judge does not see, which may read or write it.
    HandOn,
}

impl Problem {
    /// One sentence for the explanation.
    pub(crate) fn sentence(&self, access: Access) -> String {
        let verb = match access {
            Access::Read => "reads",
            Access::Write => "writes",
            Access::HandOn => "hands on",
        };
        match self {
            Problem::Unresolvable(why) => format!("{verb} a path the judge cannot resolve: {why}"),
            Problem::Outside(path) => {
                let what = if access == Access::HandOn {
                    " a path"
                } else {
                    ""
                };
                format!(
                    "{verb}{what} outside the trusted directories: {}",
                    show(path)
                )
            }
            Problem::NonAscii(path) => format!(
                "{verb} a path with a non-ASCII character (a possible look-alike): {}",
                show(path)
            ),
            Problem::Sensitive(path, what) => {
                format!("{verb} a sensitive file ({what}): {}", show(path))
            }
            Problem::Protected(path, what) => format!(
                "{} {what}, which changes what runs later without asking: {}",
                if access == Access::HandOn {
                    "hands on"
                } else {
                    "writes"
                },
                show(path)
            ),
        }
    }
}

/// Resolves a path as the shell gave it: `tilde` says the word began with an unquoted `~`
/// (then `text` is what followed it: empty or starting with `/`).
pub(crate) fn resolve(
    text: &str,
    tilde: bool,
    cwd: Option<&str>,
    home: Option<&str>,
) -> Result<String, Problem> {
    if text.len() > MAX_PATH_BYTES {
        return Err(Problem::Unresolvable("it is longer than 4096 bytes"));
    }
    if text.contains('$') {
        return Err(Problem::Unresolvable("it contains `$`"));
    }
    if text.contains('`') {
        return Err(Problem::Unresolvable("it contains a backtick"));
    }
    if text.chars().any(char::is_control) {
        return Err(Problem::Unresolvable("it contains a control character"));
    }
    let path = if tilde {
        let home = home.ok_or(Problem::Unresolvable(
            "it starts with `~` and the home directory is unknown",
        ))?;
        normalize(&format!("{home}/{text}"))
    } else if text.starts_with('~') {
        return Err(Problem::Unresolvable(
            "it starts with `~` that is not a home directory",
        ));
    } else if text.starts_with('/') {
        normalize(text)
    } else {
        let cwd = cwd.ok_or(Problem::Unresolvable(
            "it is relative and the working directory is unknown",
        ))?;
        normalize(&format!("{cwd}/{text}"))
    };
    let mut depth = 0;
    for name in path.split('/').filter(|name| !name.is_empty()) {
        depth += 1;
        if depth > MAX_PATH_DEPTH {
            return Err(Problem::Unresolvable(
                "it is more than 128 directories deep",
            ));
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(Problem::Unresolvable("it has a name longer than 255 bytes"));
        }
    }
    Ok(path)
}

/// Resolves a path given to a tool (`file_path`, `path`): `~` and `~/x` are the home
/// directory (the client expands them), `~user` is unresolvable, everything else is literal.
pub(crate) fn resolve_tool_path(raw: &str, ctx: &Context) -> Result<String, Problem> {
    match raw.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            resolve(rest, true, ctx.cwd.as_deref(), ctx.home.as_deref())
        }
        Some(_) => Err(Problem::Unresolvable(
            "it names another user's home (`~user`)",
        )),
        None => resolve(raw, false, ctx.cwd.as_deref(), ctx.home.as_deref()),
    }
}

/// The trusted directory `path` is in, if any.
pub(crate) fn trusted_root<'c>(ctx: &'c Context, path: &str) -> Option<&'c str> {
    ctx.trusted
        .iter()
        .map(String::as_str)
        .find(|root| is_within(path, root))
}

/// `path` equals `root` or lies below it at a `/` boundary (`/proj-evil` is not in `/proj`).
pub(crate) fn is_within(path: &str, root: &str) -> bool {
    if root == "/" {
        return path.starts_with('/');
    }
    match path.strip_prefix(root) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// Inside a trusted directory, with an ASCII remainder.
pub(crate) fn check_inside(ctx: &Context, path: &str) -> Result<(), Problem> {
    let root = trusted_root(ctx, path).ok_or_else(|| Problem::Outside(path.to_owned()))?;
    let rest = path.get(root.len()..).unwrap_or("");
    if rest.is_ascii() {
        Ok(())
    } else {
        Err(Problem::NonAscii(path.to_owned()))
    }
}

/// A resolved path a call reads: inside and not sensitive.
pub(crate) fn check_read(ctx: &Context, path: &str) -> Result<(), Problem> {
    check_inside(ctx, path)?;
    // bash opens a network connection for these names, whatever the trusted directories.
    if ["/dev/tcp", "/dev/udp"]
        .iter()
        .any(|net| is_within(path, net))
    {
        return Err(Problem::Sensitive(path.to_owned(), "a network connection"));
    }
    if let Some(what) = sensitive(path) {
        return Err(Problem::Sensitive(path.to_owned(), what));
    }
    Ok(())
}

/// A resolved path a call writes: inside, not sensitive, not protected.
pub(crate) fn check_write(ctx: &Context, path: &str) -> Result<(), Problem> {
    check_read(ctx, path)?;
    if let Some(what) = protected(path) {
        return Err(Problem::Protected(path.to_owned(), what));
    }
    Ok(())
}

/// File and directory names that hold secrets, matched against every component of a path.
/// Kept in step with the table in `docs/safeguard.md`.
pub(crate) const SENSITIVE_NAMES: [&str; 27] = [
    ".env",
    ".envrc",
    ".dev.vars",
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".my.cnf",
    ".git-credentials",
    ".vault-token",
    ".htpasswd",
    ".terraformrc",
    "terraform.rc",
    "credentials",
    "credentials.json",
    ".credentials.json",
    "serviceaccountkey.json",
    "secrets.toml",
    "secrets.yml",
    "secrets.yaml",
    "secrets.json",
    "key.properties",
    "keystore.properties",
];

/// Name prefixes of environment files with a variant (`.env.local`, `.dev.vars.production`).
const ENV_PREFIXES: [&str; 2] = [".env.", ".dev.vars."];

/// Name suffixes of key stores, certificates and infrastructure state.
pub(crate) const KEY_SUFFIXES: [&str; 13] = [
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".jks",
    ".keystore",
    ".p8",
    ".ppk",
    ".kdbx",
    ".tfstate",
    ".tfstate.backup",
    ".tfvars",
    ".tfvars.json",
];

/// Suffixes of templates: a sensitive name with one of these last (`.env.example`,
/// `secrets.yml.sample`) holds placeholders, not secrets, and is readable.
pub(crate) const TEMPLATE_SUFFIXES: [&str; 4] = [".example", ".sample", ".template", ".dist"];

/// Directory + name pairs that hold secrets.
const SENSITIVE_PAIRS: [(&str, &str); 4] = [
    (".docker", "config.json"),
    (".kube", "config"),
    (".config", "gcloud"),
    (".config", "gh"),
];

/// An SSH key (`id_rsa`, `id_ed25519_sk`, `id_deploy`, and their `.pub` halves): `id_`
/// followed by letters, digits, `_` or `-` only.
fn ssh_key(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("id_") else {
        return false;
    };
    let rest = rest.strip_suffix(".pub").unwrap_or(rest);
    !rest.is_empty()
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Which sensitive name `path` (normalized, absolute) contains, if any.
pub(crate) fn sensitive(path: &str) -> Option<&'static str> {
    let parts = lower_parts(path);
    for (i, part) in parts.iter().enumerate() {
        if TEMPLATE_SUFFIXES
            .iter()
            .any(|suffix| part.ends_with(suffix))
        {
            continue;
        }
        if let Some(name) = SENSITIVE_NAMES.iter().find(|name| **name == part) {
            return Some(name);
        }
        if let Some(prefix) = ENV_PREFIXES
            .iter()
            .find(|prefix| part.starts_with(**prefix))
        {
            return Some(if *prefix == ".env." {
                ".env.*"
            } else {
                ".dev.vars.*"
            });
        }
        if ssh_key(part) {
            return Some("an SSH key, id_*");
        }
        if part.starts_with("service-account") && part.ends_with(".json") {
            return Some("service-account*.json");
        }
        if let Some(suffix) = KEY_SUFFIXES.iter().find(|suffix| part.ends_with(**suffix)) {
            return Some(suffix);
        }
        if let Some(next) = parts.get(i + 1) {
            if let Some((dir, _)) = SENSITIVE_PAIRS
                .iter()
                .find(|(dir, name)| dir == part && name == next)
            {
                return Some(match *dir {
                    ".docker" => ".docker/config.json",
                    ".kube" => ".kube/config",
                    _ => ".config/gcloud or .config/gh",
                });
            }
        }
    }
    None
}

/// Shell and git start-up files: writing one changes what runs in the user's next shell.
pub(crate) const STARTUP_FILES: [&str; 12] = [
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".gitconfig",
    ".inputrc",
];

/// Which protected location `path` (normalized, absolute) is in, if any: writes there change
/// what later runs without asking (git hooks and config, the client's settings, hooks and MCP
/// servers, the agent's own configuration, shell start-up files).
///
/// A file named `HEAD` is protected because it is what makes a directory a (bare) git
/// repository: with it, `config`, `objects/` and `refs/` the agent could write anywhere, a
/// later `git status` there would obey that `config` (`core.fsmonitor` runs a program).
pub(crate) fn protected(path: &str) -> Option<&'static str> {
    let parts = lower_parts(path);
    for (i, part) in parts.iter().enumerate() {
        match part.as_str() {
            ".git" => return Some("inside .git/ (hooks, config)"),
            name if name.ends_with(".git") => {
                return Some("inside a git repository directory (*.git/)")
            }
            "head" if i + 1 == parts.len() => {
                return Some("a git HEAD file (it makes its directory a repository)")
            }
            ".husky" => return Some("inside .husky/ (git hooks)"),
            ".devin" => return Some("inside .devin/"),
            ".mcp.json" => return Some(".mcp.json"),
            ".claude" => {
                if let Some(next) = parts.get(i + 1) {
                    if next.starts_with("settings") && next.ends_with(".json") {
                        return Some(".claude/settings*.json");
                    }
                    // The client runs a hook its settings name at its own next event: a
                    // rewritten hook would run with no call left to judge.
                    if next == "hooks" {
                        return Some("inside .claude/hooks/ (scripts the client runs itself)");
                    }
                }
            }
            ".vscode"
                if parts
                    .get(i + 1)
                    .is_some_and(|next| next == "settings.json" || next == "tasks.json") =>
            {
                return Some("the editor's workspace settings or tasks (.vscode/)")
            }
            ".config" if parts.get(i + 1).is_some_and(|next| next == "git") => {
                return Some("git's configuration (.config/git/)")
            }
            name if STARTUP_FILES.contains(&name) => return Some("a shell or git start-up file"),
            _ => {}
        }
    }
    None
}

fn lower_parts(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|part| !part.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(trusted: &[&str]) -> Context {
        Context {
            cwd: Some("/proj".to_owned()),
            home: Some("/home/u".to_owned()),
            trusted: trusted.iter().map(|t| (*t).to_owned()).collect(),
            ..Context::default()
        }
    }

    #[test]
    fn normalize_folds_dots_and_slashes() {
        for (input, want) in [
            ("/", "/"),
            ("//etc/passwd", "/etc/passwd"),
            ("/proj/../etc/passwd", "/etc/passwd"),
            ("/proj/./../x", "/x"),
            ("/../../..", "/"),
            ("/a/b/./c/", "/a/b/c"),
            ("/a//b///c", "/a/b/c"),
            ("/a/b/../../../c", "/c"),
        ] {
            assert_eq!(normalize(input), want, "{input}");
        }
    }

    #[test]
    fn resolve_relative_tilde_and_refusals() {
        let home = Some("/home/u");
        assert_eq!(
            resolve("src/x", false, Some("/proj"), home).unwrap(),
            "/proj/src/x"
        );
        assert_eq!(
            resolve("../../x", false, Some("/proj/a"), home).unwrap(),
            "/x"
        );
        assert_eq!(resolve("/x", true, None, home).unwrap(), "/home/u/x");
        assert_eq!(resolve("", true, None, home).unwrap(), "/home/u");
        assert!(matches!(
            resolve("x", false, None, home),
            Err(Problem::Unresolvable(_))
        ));
        assert!(matches!(
            resolve("", true, None, None),
            Err(Problem::Unresolvable(_))
        ));
        for bad in ["$HOME/x", "a`b`", "a\nb", "a\0b", "~/x", "~root"] {
            assert!(
                matches!(
                    resolve(bad, false, Some("/proj"), home),
                    Err(Problem::Unresolvable(_))
                ),
                "{bad:?}"
            );
        }
        assert!(resolve(&"a/".repeat(3000), false, Some("/p"), home).is_err());
        assert!(resolve(&"a/".repeat(200), false, Some("/p"), home).is_err());
        assert!(resolve(&"a/".repeat(100), false, Some("/p"), home).is_ok());
        assert!(resolve(&"n".repeat(256), false, Some("/p"), home).is_err());
        assert!(
            resolve(&"../".repeat(300), false, Some("/p"), home).is_ok(),
            "folded first"
        );
    }

    #[test]
    fn tool_paths_expand_only_the_own_home() {
        let ctx = ctx(&["/proj"]);
        assert_eq!(
            resolve_tool_path("~/.bashrc", &ctx).unwrap(),
            "/home/u/.bashrc"
        );
        assert_eq!(resolve_tool_path("~", &ctx).unwrap(), "/home/u");
        assert!(resolve_tool_path("~other/x", &ctx).is_err());
        assert_eq!(resolve_tool_path("a/b", &ctx).unwrap(), "/proj/a/b");
    }

    #[test]
    fn inside_is_at_a_slash_boundary() {
        let ctx = ctx(&["/proj", "/data/shared"]);
        assert!(check_inside(&ctx, "/proj").is_ok());
        assert!(check_inside(&ctx, "/proj/src/a.rs").is_ok());
        assert!(check_inside(&ctx, "/data/shared/x").is_ok());
        assert!(check_inside(&ctx, "/proj-evil/x").is_err());
        assert!(check_inside(&ctx, "/projx").is_err());
        assert!(check_inside(&ctx, "/etc/passwd").is_err());
        assert!(check_inside(&ctx, "/data").is_err());
        let root = self::ctx(&["/"]);
        assert!(check_inside(&root, "/anything").is_ok());
    }

    #[test]
    fn non_ascii_only_inside_the_trusted_prefix() {
        let ctx = ctx(&["/home/jos\u{e9}/proj"]);
        assert!(check_inside(&ctx, "/home/jos\u{e9}/proj/src/a.rs").is_ok());
        assert_eq!(
            check_inside(&ctx, "/home/jos\u{e9}/proj/\u{441}at"),
            Err(Problem::NonAscii(
                "/home/jos\u{e9}/proj/\u{441}at".to_owned()
            ))
        );
    }

    #[test]
    fn network_devices_are_never_read_or_written() {
        let ctx = ctx(&["/"]);
        assert!(check_read(&ctx, "/dev/tcp/evil.example/80").is_err());
        assert!(check_write(&ctx, "/dev/udp/1.2.3.4/53").is_err());
        assert!(check_read(&ctx, "/dev/tcpx").is_ok());
    }

    #[test]
    fn sensitive_names() {
        for path in [
            "/p/.env",
            "/p/.env.local",
            "/p/.ENV",
            "/home/u/.ssh/id_rsa",
            "/p/keys/id_ed25519",
            "/p/cert.pem",
            "/p/server.key",
            "/home/u/.aws/credentials",
            "/p/credentials.json",
            "/home/u/.docker/config.json",
            "/home/u/.kube/config",
            "/p/.netrc",
            "/p/.npmrc",
            "/p/.git-credentials",
        ] {
            assert!(sensitive(path).is_some(), "{path}");
        }
        for path in [
            "/p/src/env.rs",
            "/p/.environment",
            "/p/config.json",
            "/p/keys.rs",
            "/p/kube/config",
            "/p/src/id_generator.rs",
            "/p/.env.example",
            "/p/.env.sample",
            "/p/.env.template",
            "/p/.env.dist",
            "/p/secrets.yml.example",
            "/p/terraform.tfvars.example",
            "/p/src/secrets.rs",
            "/p/main.tf",
        ] {
            assert_eq!(sensitive(path), None, "{path}");
        }
    }

    /// One path per entry of every sensitive list, each flagged (case-insensitively), and
    /// each entry named in the user documentation.
    #[test]
    fn every_sensitive_entry_is_flagged_and_documented() {
        let docs = include_str!("../../../docs/safeguard.md");
        for name in SENSITIVE_NAMES {
            let path = format!("/p/sub/{name}");
            assert_eq!(sensitive(&path), Some(name), "{path}");
            assert!(
                sensitive(&path.to_ascii_uppercase()).is_some(),
                "{path} in capitals"
            );
            assert!(
                docs.contains(&format!("`{name}`")),
                "{name} is not documented"
            );
        }
        for suffix in KEY_SUFFIXES {
            let path = format!("/p/deploy/prod{suffix}");
            assert!(sensitive(&path).is_some(), "{path}");
            assert!(
                docs.contains(&format!("`*{suffix}`")),
                "*{suffix} is not documented"
            );
            let template = format!("{path}.example");
            assert_eq!(sensitive(&template), None, "{template}");
        }
        for prefix in ENV_PREFIXES {
            assert!(sensitive(&format!("/p/{prefix}production")).is_some());
            assert!(
                docs.contains(&format!("`{prefix}*`")),
                "{prefix}* is not documented"
            );
        }
        for path in [
            "/p/ci/service-account.json",
            "/p/ci/service-account-prod.json",
            "/p/keys/id_rsa",
            "/p/keys/id_ed25519_sk.pub",
            "/p/keys/id_deploy",
            "/home/u/.docker/config.json",
            "/home/u/.kube/config",
            "/home/u/.config/gcloud/x",
            "/home/u/.config/gh/hosts.yml",
        ] {
            assert!(sensitive(path).is_some(), "{path}");
        }
        for suffix in TEMPLATE_SUFFIXES {
            assert!(
                docs.contains(&format!("`{suffix}`")),
                "{suffix} is not documented"
            );
            assert_eq!(sensitive(&format!("/p/.env{suffix}")), None);
        }
    }

    #[test]
    fn protected_names() {
        for path in [
            "/p/.git/hooks/pre-commit",
            "/p/.git/config",
            "/p/.GIT/hooks/x",
            "/p/.git",
            "/p/.claude/settings.json",
            "/p/.claude/settings.local.json",
            "/p/.claude/hooks/post-edit.sh",
            "/p/.CLAUDE/Hooks/x.py",
            "/p/.mcp.json",
            "/p/.devin/config.yml",
            "/home/u/.bashrc",
            "/p/evil/HEAD",
            "/p/fixtures/repo.git/config",
            "/p/.husky/pre-commit",
            "/home/u/.config/git/config",
            "/p/.vscode/tasks.json",
            "/p/.vscode/settings.json",
        ] {
            assert!(protected(path).is_some(), "{path}");
        }
        for path in [
            "/p/.gitignore",
            "/p/.claude/commands/x.md",
            "/p/src/git/x",
            "/p/.github/x",
            "/p/src/Head.tsx",
            "/p/head/x.rs",
            "/p/.config/app.toml",
            "/p/.vscode/extensions.json",
        ] {
            assert_eq!(protected(path), None, "{path}");
        }
    }
}
