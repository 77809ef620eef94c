//! What distinguishes the two agents of this binary, as data. The summarizer
//! (`acp --agent-type summarizer`) and the full agent (`acp`) share one reading loop
//! ([`crate::server`]) and one turn loop ([`crate::turn`]); every way they differ is a field of
//! [`Profile`], filled from argv and the environment at start-up, and never read from anywhere
//! else.

use std::path::PathBuf;
use std::time::Duration;

use crate::full::{catalog, markers};
use crate::scenario::{self, Scenario};

/// The summarizer agent's models, `(ACP id, label)`, in the order `session/new` offers them
/// (the catalog of `policies/models.json`, with `.` and `_` spelled `-`).
pub(crate) const SUMMARIZER_MODELS: [(&str, &str); 8] = [
    ("swe-1-7", "SWE-1.7"),
    ("swe-1-7-lightning", "SWE-1.7 Lightning"),
    ("swe-1-6", "SWE-1.6"),
    ("swe-1-6-fast", "SWE-1.6 Fast"),
    ("swe-2", "SWE-2"),
    ("kimi-k3", "Kimi K3"),
    ("glm-5-2", "GLM 5.2"),
    ("muse-wonder", "Muse Wonder"),
];
/// The summarizer's model unless `--model` says otherwise.
pub(crate) const SUMMARIZER_DEFAULT_MODEL: &str = "swe-1-7";
/// With `MOCK_DEVIN_EFFORT_VARIANTS=1`, the summarizer also takes this effort variant of
/// `swe-2`, listed right after it, as the full agent's catalog and the recorded CLIs offer it.
pub(crate) const SUMMARIZER_EFFORT_VARIANT: (&str, &str) = ("swe-2-high", "SWE-2 High");

/// Which agent argv asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AgentType {
    /// `acp --agent-type summarizer`.
    Summarizer,
    /// `acp`.
    Full,
}

impl AgentType {
    /// The name in the `start` log line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Summarizer => "summarizer",
            Self::Full => "full",
        }
    }

    /// The arguments after the global ones that select this agent.
    pub(crate) fn args(self) -> &'static [&'static str] {
        match self {
            Self::Summarizer => &["acp", "--agent-type", "summarizer"],
            Self::Full => &["acp"],
        }
    }

    /// The models sessions offer, `(ACP id, label)`, and the one they start with.
    pub(crate) fn models(self) -> (Vec<(String, &'static str)>, &'static str) {
        match self {
            Self::Summarizer => (
                SUMMARIZER_MODELS
                    .iter()
                    .map(|(id, label)| ((*id).to_owned(), *label))
                    .collect(),
                SUMMARIZER_DEFAULT_MODEL,
            ),
            Self::Full => (
                catalog::offered()
                    .map(|(id, variant)| (id, variant.label))
                    .collect(),
                catalog::DEFAULT_MODEL,
            ),
        }
    }
}

/// Where sessions live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// In this process only: ids `mock-session-N`; `session/load` finds one of them and replays
    /// nothing; `session/list` lists them; deleting one cancels its running turn.
    Process,
    /// In the session database ([`crate::full::store`]): ids `mock-<16 hex>`, stored after every
    /// change and turn; `session/load` reopens a stored session in a workspace (the checks of
    /// `session/new`) and replays its transcript; a session with a running turn may be neither
    /// loaded nor deleted.
    Disk,
}

/// Which `cwd` a session may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workspace {
    /// `/home/bridge` or a directory under a `.sandbox` directory, and the agent's own working
    /// directory (the bridge starts the summarizer in the sandbox it names).
    SandboxHome,
    /// Any existing directory (companion mode names the user's project).
    Directory,
}

/// How many prompt turns run at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Concurrency {
    /// One per session; sessions run theirs in parallel.
    PerSession,
    /// One in the whole process.
    PerProcess,
}

/// How a signed-out process fails: the CLI's versions differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogoutStyle {
    /// Older versions: `session/new` (and `session/load`) answer -32000 "ACP host has not
    /// authenticated ...".
    SessionNew,
    /// Newer versions: sessions open, and `session/prompt` answers -32603 "Authentication
    /// failed: ...".
    Prompt,
}

impl LogoutStyle {
    /// `MOCK_DEVIN_LOGOUT_STYLE`: `session_new` or `prompt` (the default: the newer behaviour,
    /// which the versions closest to the one this mock reports show).
    fn from_env() -> Result<Self, String> {
        match std::env::var("MOCK_DEVIN_LOGOUT_STYLE").as_deref() {
            Err(_) | Ok("") | Ok("prompt") => Ok(Self::Prompt),
            Ok("session_new") => Ok(Self::SessionNew),
            Ok(other) => Err(format!(
                "MOCK_DEVIN_LOGOUT_STYLE must be session_new or prompt, not {other:?}"
            )),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::SessionNew => "session_new",
            Self::Prompt => "prompt",
        }
    }
}

/// How a prompt's text decides its turn.
#[derive(Debug)]
pub(crate) enum Dialect {
    /// The summarizer's: bridge-framed traces, one scenario per prompt ([`crate::bridge`]).
    Bridge {
        /// `MOCK_DEVIN_SCENARIO`: the scenario of prompts without a marker.
        default: Option<Scenario>,
        /// `MOCK_DEVIN_SLOW_MS`: the delay between `[mock:slow]` chunks.
        slow: Duration,
    },
    /// The full agent's: markers anywhere in the text, combined ([`crate::full::markers`]).
    Markers {
        /// `MOCK_DEVIN_SCENARIO`: the marker text of prompts without a marker.
        default: Option<String>,
    },
}

/// Everything that makes one agent differ from the other.
#[derive(Debug)]
pub(crate) struct Profile {
    pub agent: AgentType,
    /// The offered models, `(ACP id, label)`.
    pub models: Vec<(String, &'static str)>,
    /// The model new sessions start with (`--model`, else the default); it may be one the
    /// agent does not offer, and then every `session/new` fails.
    pub start_model: String,
    /// Sessions offer the `model` option (the full agent; the summarizer has none, so only
    /// `--model` picks its model).
    pub model_option: bool,
    /// Sessions offer a `thought_level` option (either agent, `MOCK_DEVIN_THOUGHT_LEVEL=1`).
    pub thought_level: bool,
    /// Image prompts are advertised and accepted (summarizer, `MOCK_DEVIN_IMAGES=1`).
    pub images: bool,
    /// Signed in without credentials or a key (the summarizer unless `MOCK_DEVIN_LOGGED_OUT=1`).
    pub signed_in_by_default: bool,
    /// How a signed-out process fails (`MOCK_DEVIN_LOGOUT_STYLE`).
    pub logout_style: LogoutStyle,
    pub workspace: Workspace,
    /// `config.json` must be readable at start-up and for every new or loaded session (exit 78
    /// otherwise); its rules govern `[mock:write]` (the full agent).
    pub config_file: bool,
    pub persistence: Persistence,
    /// The mode is fixed: `session/set_mode` and the `mode` option are refused (summarizer).
    pub fixed_mode: bool,
    pub concurrency: Concurrency,
    pub dialect: Dialect,
    /// `MOCK_DEVIN_STARTUP_MS`: the sleep before reading stdin.
    pub startup: Duration,
    pub log: Option<PathBuf>,
}

/// Milliseconds from the environment.
pub(crate) fn millis(name: &str, default: u64) -> Result<Duration, String> {
    match std::env::var_os(name) {
        None => Ok(Duration::from_millis(default)),
        Some(value) => value
            .to_str()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
            .ok_or_else(|| format!("{name} must be a whole number of milliseconds, not {value:?}")),
    }
}

/// A `0`/`1` switch from the environment (unset or empty: off).
pub(crate) fn switch(name: &str) -> Result<bool, String> {
    match std::env::var(name).as_deref() {
        Err(_) | Ok("") | Ok("0") => Ok(false),
        Ok("1") => Ok(true),
        Ok(other) => Err(format!("{name} must be 0 or 1, not {other:?}")),
    }
}

/// `MOCK_DEVIN_SCENARIO`, when set and not empty.
fn scenario_setting() -> Result<Option<String>, String> {
    match std::env::var_os("MOCK_DEVIN_SCENARIO").filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(value) => value
            .into_string()
            .map(Some)
            .map_err(|_| "MOCK_DEVIN_SCENARIO is not UTF-8".to_owned()),
    }
}

impl Profile {
    /// The profile of `agent` starting with `model`; each agent reads only its own variables.
    /// The error is the message of exit status 64.
    pub(crate) fn new(agent: AgentType, model: Option<String>) -> Result<Self, String> {
        let (models, default_model) = agent.models();
        let start_model = model.unwrap_or_else(|| default_model.to_owned());
        let logout_style = LogoutStyle::from_env()?;
        let startup = millis("MOCK_DEVIN_STARTUP_MS", 0)?;
        let log = crate::log::path();
        Ok(match agent {
            AgentType::Summarizer => {
                let default = match scenario_setting()? {
                    None => None,
                    Some(value) => Some(Scenario::from_setting(&value).ok_or_else(|| {
                        format!(
                            "MOCK_DEVIN_SCENARIO {value:?} is not a scenario; use one of: \
                             script, {}",
                            scenario::MARKERS.join(", ")
                        )
                    })?),
                };
                let mut models = models;
                if switch("MOCK_DEVIN_EFFORT_VARIANTS")? {
                    let (id, label) = SUMMARIZER_EFFORT_VARIANT;
                    let after = models
                        .iter()
                        .position(|(model, _)| model == "swe-2")
                        .map_or(models.len(), |at| at + 1);
                    models.insert(after, (id.to_owned(), label));
                }
                Self {
                    agent,
                    models,
                    start_model,
                    model_option: false,
                    thought_level: switch("MOCK_DEVIN_THOUGHT_LEVEL")?,
                    images: switch("MOCK_DEVIN_IMAGES")?,
                    signed_in_by_default: !switch("MOCK_DEVIN_LOGGED_OUT")?,
                    logout_style,
                    workspace: Workspace::SandboxHome,
                    config_file: false,
                    persistence: Persistence::Process,
                    fixed_mode: true,
                    concurrency: Concurrency::PerSession,
                    dialect: Dialect::Bridge {
                        default,
                        slow: millis("MOCK_DEVIN_SLOW_MS", 500)?,
                    },
                    startup,
                    log,
                }
            }
            AgentType::Full => Self {
                agent,
                models,
                start_model,
                model_option: true,
                thought_level: switch("MOCK_DEVIN_THOUGHT_LEVEL")?,
                images: false,
                signed_in_by_default: false,
                logout_style,
                workspace: Workspace::Directory,
                config_file: true,
                persistence: Persistence::Disk,
                fixed_mode: false,
                concurrency: Concurrency::PerProcess,
                dialect: Dialect::Markers {
                    default: scenario_setting()?
                        .map(|value| markers::default_markers(&value))
                        .transpose()?,
                },
                startup,
                log,
            },
        })
    }

    /// Whether `id` is an offered model.
    pub(crate) fn offers(&self, id: &str) -> bool {
        self.models.iter().any(|(model, _)| model == id)
    }

    /// The label of model `id` (its id when it is not offered).
    pub(crate) fn label<'a>(&'a self, id: &'a str) -> &'a str {
        self.models
            .iter()
            .find(|(model, _)| model == id)
            .map_or(id, |(_, label)| label)
    }

    /// The name of the default scenario, for the `start` log line.
    pub(crate) fn default_scenario(&self) -> Option<&'static str> {
        match &self.dialect {
            Dialect::Bridge { default, .. } => default.map(Scenario::name),
            Dialect::Markers { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogs_and_labels() {
        let (models, default) = AgentType::Summarizer.models();
        assert_eq!(models.len(), 8);
        assert_eq!(default, "swe-1-7");
        let (models, default) = AgentType::Full.models();
        assert_eq!(models[0], ("swe-2".to_owned(), "SWE-2"));
        assert_eq!(default, "swe-2");
        let profile = Profile::new(AgentType::Full, Some("kimi-k3".into())).expect("profile");
        assert_eq!(profile.start_model, "kimi-k3");
        assert_eq!(profile.label("glm-5-2"), "GLM-5.2");
        assert_eq!(profile.label("nope"), "nope");
        assert!(profile.offers("swe-2-high") && !profile.offers("adaptive"));
        assert!(profile.model_option);
        // The summarizer offers no model option: only --model picks its model.
        let summarizer =
            Profile::new(AgentType::Summarizer, Some("swe-1-6".into())).expect("profile");
        assert!(!summarizer.model_option);
        assert_eq!(summarizer.start_model, "swe-1-6");
    }
}
