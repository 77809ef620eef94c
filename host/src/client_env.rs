//! `devin-bridge client-env`: the shell variables that point Claude Code at a bridge.
//!
//! The operator's model settings (`BRIDGE_PRIMARY_MODEL`, `BRIDGE_SONNET_MODEL`,
//! `BRIDGE_OPUS_MODEL`, `BRIDGE_HAIKU_MODEL`, `BRIDGE_SUBAGENT_MODEL`) come from the
//! environment and from an env file (the environment wins). The model-alias component checks
//! each against the catalog and maps it to Claude Code's variable, and adds the auto-compact
//! window from the catalog's context windows. Output is `export NAME='value'` lines for
//! `eval`; on any refusal nothing is printed to stdout, so `eval` sets nothing.
//!
//! The bridge's key goes to Claude Code as `ANTHROPIC_AUTH_TOKEN` (sent as `Authorization:
//! Bearer`, which the bridge accepts), never as `ANTHROPIC_API_KEY`: on a fresh home an API
//! key makes Claude Code ask whether to trust it, with "No" preselected, and reach for
//! Anthropic first; a token starts it offline. `ANTHROPIC_API_KEY` is unset so that a key left
//! in the shell cannot take precedence.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use devin_bridge_engine::{TransformCalls as _, TransformKind};
use devin_bridge_policy::ModePolicy as _;

/// The settings read, in the order they are reported.
const SETTINGS: [&str; 5] = [
    "BRIDGE_PRIMARY_MODEL",
    "BRIDGE_SONNET_MODEL",
    "BRIDGE_OPUS_MODEL",
    "BRIDGE_HAIKU_MODEL",
    "BRIDGE_SUBAGENT_MODEL",
];

/// The env file read from the working directory when `--env-file` is not given.
const DEFAULT_ENV_FILE: &str = ".env.devin-bridge";

/// The bridge's address when neither `--base-url` nor a policy names one.
const DEFAULT_BASE_URL: &str = "http://127.0.0.1:20128";

/// The expected form, said with every refused value.
const EXPECTED: &str = "expected devin-cli-agentic/<model id> naming a model of the catalog";

/// `devin-bridge client-env`.
#[derive(Debug, Args)]
pub(crate) struct ClientEnvArgs {
    /// Read BRIDGE_*_MODEL settings from FILE (NAME=value lines); default `.env.devin-bridge`
    /// in the working directory, when it exists. The environment wins over the file.
    #[arg(long, value_name = "FILE")]
    pub env_file: Option<PathBuf>,
    /// The bridge's URL (default: the policy's listen address, else http://127.0.0.1:20128).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// A summarizer policy: its catalog, model-alias component and listen address.
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<PathBuf>,
    /// Read the bridge's API key from FILE (private to this user, like `[server]
    /// api_key_file`) instead of `BRIDGE_API_KEY`.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Show the bridge's own log lines on stderr (-v: info, -vv: debug).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// The token exported when no key is known: a bridge that requires no key accepts any token,
/// and Claude Code needs one not to ask for an Anthropic login.
const NO_KEY_TOKEN: &str = "devin-bridge-no-key";

/// A refusal: the message (one line) and the exit status.
#[derive(Debug)]
struct Refusal {
    message: String,
    status: u8,
}

impl Refusal {
    fn input(message: String) -> Self {
        Self { message, status: 2 }
    }
}

/// Runs `client-env`; prints the export lines or one line on stderr.
pub(crate) fn run(args: &ClientEnvArgs) -> ExitCode {
    match exports(args, |name| std::env::var(name).ok()) {
        Ok((text, note)) => {
            if let Some(note) = note {
                eprintln!("devin-bridge client-env: {note}");
            }
            crate::report::print_report(&text)
        }
        Err(refusal) => {
            eprintln!("devin-bridge client-env: {}", refusal.message);
            ExitCode::from(refusal.status)
        }
    }
}

/// The whole output, built before anything is printed, and a note for stderr.
fn exports(
    args: &ClientEnvArgs,
    environment: impl Fn(&str) -> Option<String>,
) -> Result<(String, Option<&'static str>), Refusal> {
    let (token, note) = match bridge_key(args.key_file.as_deref(), &environment)? {
        Some(key) => (key, None),
        None => (
            NO_KEY_TOKEN.to_owned(),
            Some("no key (BRIDGE_API_KEY or --key-file): Claude Code gets a placeholder token, which only a bridge without a key accepts"),
        ),
    };
    let settings = model_settings(args.env_file.as_deref(), &environment)?;
    let side = PolicySide::read(args.policy.as_deref())?;
    let base_url = match &args.base_url {
        Some(url) => checked_url(url)?,
        None => side
            .listen
            .as_ref()
            .map(|listen| format!("http://{listen}"))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
    };
    let mapped = mapped_models(&side, &settings)?;
    let mut out = String::new();
    let mut export = |name: &str, value: &str| {
        out.push_str(&format!("export {name}={}\n", shell_quote(value)));
    };
    export("ANTHROPIC_BASE_URL", &base_url);
    export("ANTHROPIC_AUTH_TOKEN", &token);
    for (name, value) in &mapped {
        export(name, value);
    }
    export("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    out.push_str("unset ANTHROPIC_API_KEY\n");
    Ok((out, note))
}

/// The model settings given, each with where it came from (for messages): the env file's
/// (`--env-file`, else the default file when it exists), overridden by the environment's. A
/// `BRIDGE_*_MODEL` name in the file that is no setting is refused.
fn model_settings(
    env_file: Option<&Path>,
    environment: &impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<&'static str, (String, String)>, Refusal> {
    let file = match env_file {
        Some(path) => Some(read_env_file(path, true)?),
        None => read_env_file(Path::new(DEFAULT_ENV_FILE), false).map(Some)?,
    }
    .flatten();
    let mut settings = BTreeMap::new();
    if let Some((path, values)) = &file {
        for (name, value) in values {
            if let Some(setting) = SETTINGS.iter().find(|s| **s == name.as_str()) {
                settings.insert(*setting, (value.clone(), path.display().to_string()));
            } else if name.starts_with("BRIDGE_") && name.ends_with("_MODEL") {
                return Err(Refusal::input(format!(
                    "{}: unknown setting {name} (the model settings are {})",
                    path.display(),
                    SETTINGS.join(", ")
                )));
            }
        }
    }
    for setting in SETTINGS {
        if let Some(value) = environment(setting) {
            settings.insert(setting, (value, "the environment".to_owned()));
        }
    }
    Ok(settings)
}

/// What the policy (`--policy`, else the built-in summarizer policy) gives: its model-alias
/// component, the limits it runs under, the catalog, and the listen address (only a policy
/// file's: the built-in one says nothing of where a bridge listens).
struct PolicySide {
    location: devin_bridge_engine::ComponentLocation,
    limits: devin_bridge_engine::RuntimeLimits,
    catalog: String,
    listen: Option<String>,
}

impl PolicySide {
    fn read(policy: Option<&Path>) -> Result<Self, Refusal> {
        let Some(path) = policy else {
            let policy = devin_bridge_summarizer::policy::SummarizerPolicy::builtin(
                "mode = \"summarizer\"",
                "the built-in summarizer policy",
            )
            .map_err(|error| Refusal::input(error.to_string()))?;
            let config = policy.engine_config();
            return Ok(Self {
                location: config.location(TransformKind::ModelAlias).clone(),
                limits: config.limits,
                catalog: devin_bridge_policy::BUILTIN_CATALOG.to_owned(),
                listen: None,
            });
        };
        let policy = crate::policy::load_summarizer(path, "client-env")
            .map_err(|error| Refusal::input(format!("{error:#}")))?;
        let catalog = match &policy.models.catalog {
            Some(file) => {
                let file = policy.resolve(file);
                std::fs::read_to_string(&file).map_err(|error| {
                    Refusal::input(format!(
                        "cannot read the model catalog {}: {error}",
                        file.display()
                    ))
                })?
            }
            None => devin_bridge_policy::BUILTIN_CATALOG.to_owned(),
        };
        let config = policy.engine_config();
        Ok(Self {
            location: config.location(TransformKind::ModelAlias).clone(),
            limits: config.limits,
            catalog,
            listen: Some(policy.server.listen.clone()),
        })
    }
}

/// Claude Code's variables for the model settings, mapped by the model-alias component. A
/// refused value is named with where it came from.
fn mapped_models(
    side: &PolicySide,
    settings: &BTreeMap<&'static str, (String, String)>,
) -> Result<Vec<(String, String)>, Refusal> {
    let component =
        devin_bridge_engine::load_one(&side.location, side.limits, TransformKind::ModelAlias)
            .map_err(|error| Refusal {
                message: format!("cannot load the model-alias component: {error}"),
                status: 1,
            })?;
    // Claude Code falls back to its own claude-* ids for a role left unset, which the bridge
    // refuses: every unset role takes the primary model.
    let primary = match settings.get("BRIDGE_PRIMARY_MODEL") {
        Some((value, _)) => value.clone(),
        None => first_catalog_model(&component, &side.catalog)?,
    };
    let pairs = SETTINGS
        .iter()
        .map(|setting| {
            let value = settings
                .get(setting)
                .map_or_else(|| primary.clone(), |(value, _)| value.clone());
            ((*setting).to_owned(), value)
        })
        .collect();
    component
        .client_environment(pairs, side.catalog.clone())
        .map_err(|error| Refusal {
            message: format!("the model-alias component failed: {error}"),
            status: 1,
        })?
        .map_err(|failure| {
            // The component names the setting in its message (`BRIDGE_X_MODEL`: ...).
            let source = SETTINGS
                .iter()
                .find(|s| failure.message.contains(&format!("`{s}`")))
                .map(|s| match settings.get(s) {
                    Some((_, source)) => format!(" (from {source})"),
                    None => " (defaulted to BRIDGE_PRIMARY_MODEL)".to_owned(),
                })
                .unwrap_or_default();
            Refusal::input(format!("{}{source}; {EXPECTED}", failure.message))
        })
}

/// The bridge's key: `--key-file`'s, else `BRIDGE_API_KEY`; none when neither is given. A key
/// must be one header value (visible ASCII), or Claude Code could not send it.
fn bridge_key(
    key_file: Option<&Path>,
    environment: &impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, Refusal> {
    let (key, source) = match key_file {
        Some(path) => (
            devin_bridge_summarizer::read_key_file(path)
                .map_err(|error| Refusal::input(error.to_string()))?,
            path.display().to_string(),
        ),
        None => match environment("BRIDGE_API_KEY") {
            Some(key) if !key.trim().is_empty() => {
                (key.trim().to_owned(), "BRIDGE_API_KEY".to_owned())
            }
            _ => return Ok(None),
        },
    };
    if !key.bytes().all(|byte| byte.is_ascii_graphic()) {
        // The key itself is never repeated in a message.
        return Err(Refusal::input(format!(
            "the key in {source} holds spaces or characters a header cannot carry"
        )));
    }
    Ok(Some(key))
}

/// The first model the catalog offers (the `/v1/models` listing's first id).
fn first_catalog_model(
    component: &devin_bridge_engine::Component,
    catalog: &str,
) -> Result<String, Refusal> {
    let listing = component
        .list_models(catalog.to_owned(), false)
        .map_err(|error| Refusal {
            message: format!("the model-alias component failed: {error}"),
            status: 1,
        })?
        .map_err(|failure| Refusal::input(format!("the model catalog: {}", failure.message)))?;
    let listing: serde_json::Value = serde_json::from_str(&listing).map_err(|error| Refusal {
        message: format!("the model listing is not JSON: {error}"),
        status: 1,
    })?;
    listing["data"][0]["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| {
            Refusal::input("the model catalog offers no model: set BRIDGE_PRIMARY_MODEL".to_owned())
        })
}

/// A base URL: `http://` or `https://`, a host, and nothing a shell or a header would read
/// differently.
fn checked_url(url: &str) -> Result<String, Refusal> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    let valid = rest.is_some_and(|rest| {
        !rest.is_empty()
            && !rest.starts_with('/')
            && rest
                .chars()
                .all(|c| c.is_ascii_graphic() && !matches!(c, '\'' | '"' | '\\' | '`' | '$'))
    });
    if valid {
        Ok(url.trim_end_matches('/').to_owned())
    } else {
        Err(Refusal::input(format!(
            "--base-url {url:?} is not a URL; expected http://HOST[:PORT] or https://HOST[:PORT]"
        )))
    }
}

/// An env file that was read: its path and its `NAME=value` pairs, in file order.
type EnvFile = (PathBuf, Vec<(String, String)>);

/// Reads `NAME=value` lines (blank lines and `#` comments skipped, an `export ` prefix and
/// one pair of surrounding quotes allowed). A missing file is `None` unless `required`.
fn read_env_file(path: &Path, required: bool) -> Result<Option<EnvFile>, Refusal> {
    const MAX_BYTES: u64 = 64 * 1024;
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && !required => return Ok(None),
        Err(error) => {
            return Err(Refusal::input(format!(
                "cannot read the env file {}: {error}",
                path.display()
            )))
        }
    };
    if !metadata.is_file() || metadata.len() > MAX_BYTES {
        return Err(Refusal::input(format!(
            "the env file {} is not a regular file of at most {MAX_BYTES} bytes",
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|error| {
        Refusal::input(format!(
            "cannot read the env file {}: {error}",
            path.display()
        ))
    })?;
    let mut values = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((name, value)) = line.split_once('=') else {
            return Err(Refusal::input(format!(
                "{}:{}: expected NAME=value",
                path.display(),
                number + 1
            )));
        };
        let value = value.trim();
        let value = ['"', '\'']
            .iter()
            .find_map(|quote| {
                value
                    .strip_prefix(*quote)
                    .and_then(|inner| inner.strip_suffix(*quote))
            })
            .unwrap_or(value);
        values.push((name.trim().to_owned(), value.to_owned()));
    }
    Ok(Some((path.to_owned(), values)))
}

/// `value` in single quotes for a POSIX shell (a `'` becomes `'\''`).
fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_files_allow_comments_export_and_quotes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("env");
        std::fs::write(
            &path,
            "# models\n\nBRIDGE_PRIMARY_MODEL=devin-cli-agentic/swe-2\nexport BRIDGE_HAIKU_MODEL=\"devin-cli-agentic/swe-1-6\"\nOTHER='x y'\n",
        )
        .expect("write");
        let (_, values) = read_env_file(&path, true).expect("read").expect("present");
        assert_eq!(
            values,
            vec![
                (
                    "BRIDGE_PRIMARY_MODEL".to_owned(),
                    "devin-cli-agentic/swe-2".to_owned()
                ),
                (
                    "BRIDGE_HAIKU_MODEL".to_owned(),
                    "devin-cli-agentic/swe-1-6".to_owned()
                ),
                ("OTHER".to_owned(), "x y".to_owned()),
            ]
        );
    }

    #[test]
    fn a_line_without_equals_is_refused_with_its_number() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("env");
        std::fs::write(&path, "# ok\nBRIDGE_PRIMARY_MODEL\n").expect("write");
        let refusal = read_env_file(&path, true).expect_err("refused");
        assert!(
            refusal.message.ends_with("env:2: expected NAME=value"),
            "{}",
            refusal.message
        );
        assert_eq!(refusal.status, 2);
    }

    #[test]
    fn a_missing_default_file_is_fine_and_a_missing_named_one_is_not() {
        let path = Path::new("/nonexistent/.env.devin-bridge");
        assert!(read_env_file(path, false).expect("fine").is_none());
        assert_eq!(read_env_file(path, true).expect_err("refused").status, 2);
    }

    #[test]
    fn base_urls_are_http_or_https_with_a_host_and_no_shell_characters() {
        assert_eq!(
            checked_url("http://bridge:20128/").expect("valid"),
            "http://bridge:20128"
        );
        assert!(checked_url("https://example.test").is_ok());
        for bad in [
            "bridge:20128",
            "http://",
            "http:///x",
            "http://a b",
            "http://a$(id)",
            "ftp://a",
        ] {
            assert!(checked_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shell_quoting_survives_single_quotes() {
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
    }
}
