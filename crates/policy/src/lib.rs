//! Policy files: what every mode's policy shares.
//!
//! A policy is one strict TOML file whose `mode` selects a mode; each mode crate owns the type
//! of its own policy (`SummarizerPolicy`, `CompanionPolicy`, `OutpostPolicy`) and the
//! validation of its sections. This crate holds what they share:
//!
//! - reading a file and the [`Origin`] every relative path resolves against;
//! - reading `mode` first ([`read_mode`]) and refusing, by name, a section that belongs to
//!   another mode before the mode's own strict (`deny_unknown_fields`) type parses the rest;
//! - the sections every mode has: `[components]`, `[limits]`, `[engine]` (their types are the
//!   engine's own) and `[log]`, and the [`EngineConfig`] they resolve to; a mode's policy
//!   type is declared with [`mode_policy!`], the one place those fields are spelt, and reads
//!   them for [`ModePolicy`] with [`common_sections_access!`];
//! - the process-wide log filter a policy's `[log]` puts in force (`log`).
//!
//! Every field has a safe default, and relative paths are resolved against the directory of
//! the policy file, so a policy means the same thing whatever the working directory.

pub mod log;

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use devin_bridge_engine::{ComponentLocation, ComponentPlace, EngineConfig, TransformKind};
/// The engine's section types, named here for [`mode_policy!`].
pub use devin_bridge_engine::{ComponentsTable, EngineSection, RuntimeLimits};

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid policy {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid policy {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("policy {path} is not {} policy (mode = \"{found}\"); this command needs `mode = \"{expected}\"`", expected.with_article())]
    WrongMode {
        path: PathBuf,
        expected: Mode,
        found: Mode,
    },
    #[error("invalid policy {path}: [{section}] belongs to the {owner} mode, and this policy's mode is {mode}; remove the section or change `mode`")]
    ForeignSection {
        path: PathBuf,
        section: String,
        owner: Mode,
        mode: Mode,
    },
}

/// The three things the bridge can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Claude Code talks to our Anthropic Messages endpoint; Devin's `summarizer` agent answers.
    Summarizer,
    /// A CLI that delegates tasks and reviews to Devin.
    Companion,
    /// A worker that serves Devin Outposts sessions from a fleet queue.
    Outpost,
}

impl Mode {
    /// The sections only a policy of this mode may carry.
    pub fn own_sections(self) -> &'static [&'static str] {
        match self {
            Mode::Summarizer => &["server", "agent", "models", "safeguards", "control"],
            Mode::Companion => &["companion"],
            Mode::Outpost => &["outpost"],
        }
    }

    /// The mode's name with its indefinite article ("a companion", "an outpost").
    pub fn with_article(self) -> &'static str {
        match self {
            Mode::Summarizer => "a summarizer",
            Mode::Companion => "a companion",
            Mode::Outpost => "an outpost",
        }
    }

    const ALL: [Mode; 3] = [Mode::Summarizer, Mode::Companion, Mode::Outpost];
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Summarizer => "summarizer",
            Mode::Companion => "companion",
            Mode::Outpost => "outpost",
        })
    }
}

/// Where a policy came from: its name in messages and the directory its relative paths
/// resolve against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// Where the policy was read from (for messages).
    pub source: PathBuf,
    /// Directory of the policy file; relative paths are resolved against it.
    pub base_dir: PathBuf,
}

impl Origin {
    /// Resolves a policy-relative path, normalising `.` and `..` lexically (so the result can
    /// be checked component by component, e.g. for the sandbox home).
    pub fn resolve(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            normalize(path)
        } else {
            normalize(&self.base_dir.join(path))
        }
    }

    /// An `Invalid` error naming this policy.
    pub fn invalid(&self, message: impl Into<String>) -> PolicyError {
        PolicyError::Invalid {
            path: self.source.clone(),
            message: message.into(),
        }
    }
}

/// A policy file's text and origin.
pub fn read(path: &Path) -> Result<(String, Origin), PolicyError> {
    let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
        path: path.to_owned(),
        source,
    })?;
    let absolute = std::path::absolute(path).map_err(|source| PolicyError::Read {
        path: path.to_owned(),
        source,
    })?;
    let base_dir = absolute
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    Ok((
        text,
        Origin {
            source: path.to_owned(),
            base_dir,
        },
    ))
}

/// The origin of a policy embedded in the binary (a mode's built-in default, named `name` in
/// messages). A built-in policy has no file and names no relative path; should one ever do,
/// it resolves against the working directory, never against the tree the binary was built in.
pub fn builtin_origin(name: &str) -> Origin {
    Origin {
        source: PathBuf::from(name),
        base_dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
    }
}

/// The default model catalog (`devin models list --format json`), built into the binary: what
/// a policy that names no catalog file uses.
pub const BUILTIN_CATALOG: &str = include_str!("../../../policies/models.json");

/// The mode a policy text declares, read before anything else.
pub fn read_mode(text: &str, origin: &Origin) -> Result<Mode, PolicyError> {
    let table = parse_table(text, origin)?;
    mode_of(&table, origin)
}

/// Parses a policy of mode `expected` into its strict type `T`: the mode is read first (a
/// policy of another mode is [`PolicyError::WrongMode`]), a section of another mode is refused
/// by name, and then `T` (with `deny_unknown_fields`) parses the whole text.
pub fn parse_as<T: DeserializeOwned>(
    text: &str,
    origin: &Origin,
    expected: Mode,
) -> Result<T, PolicyError> {
    let table = parse_table(text, origin)?;
    let found = mode_of(&table, origin)?;
    if found != expected {
        return Err(PolicyError::WrongMode {
            path: origin.source.clone(),
            expected,
            found,
        });
    }
    for owner in Mode::ALL.into_iter().filter(|mode| *mode != found) {
        if let Some(section) = owner
            .own_sections()
            .iter()
            .find(|section| table.contains_key(**section))
        {
            return Err(PolicyError::ForeignSection {
                path: origin.source.clone(),
                section: (*section).to_owned(),
                owner,
                mode: found,
            });
        }
    }
    table
        .try_into()
        .map_err(|error: toml::de::Error| PolicyError::Parse {
            path: origin.source.clone(),
            message: error.to_string(),
        })
}

fn parse_table(text: &str, origin: &Origin) -> Result<toml::Table, PolicyError> {
    text.parse::<toml::Table>()
        .map_err(|error| PolicyError::Parse {
            path: origin.source.clone(),
            message: error.to_string(),
        })
}

fn mode_of(table: &toml::Table, origin: &Origin) -> Result<Mode, PolicyError> {
    let parse_error = |message: String| PolicyError::Parse {
        path: origin.source.clone(),
        message,
    };
    let value = table
        .get("mode")
        .ok_or_else(|| parse_error("missing field `mode`".to_owned()))?;
    Mode::deserialize(value.clone()).map_err(|error| parse_error(error.to_string()))
}

/// The sections every mode's policy has, checked and resolved together.
pub struct CommonSections<'a> {
    pub components: &'a ComponentsTable,
    pub limits: RuntimeLimits,
    pub engine: &'a EngineSection,
    pub log: &'a LogSection,
}

impl CommonSections<'_> {
    /// Range-checks the limits, the pins and the log filter.
    pub fn validate(&self, origin: &Origin) -> Result<(), PolicyError> {
        self.limits
            .validate()
            .map_err(|message| origin.invalid(message))?;
        if let Some(filter) = &self.log.filter {
            if let Err(error) = tracing_subscriber::EnvFilter::try_new(filter) {
                return Err(origin.invalid(format!(
                    "log.filter {filter:?} is not a valid filter: {error}"
                )));
            }
        }
        self.components
            .validate()
            .map_err(|message| origin.invalid(message))
    }

    /// The engine's configuration: every component location resolved against the policy's
    /// directory.
    ///
    /// Without a `[components.<t>]` table the component is `<t>.wasm` in
    /// `DEVIN_BRIDGE_COMPONENTS` when that is set, else the one built into the binary (see
    /// [`devin_bridge_engine::builtin`]).
    pub fn engine_config(&self, origin: &Origin) -> EngineConfig {
        EngineConfig {
            limits: self.limits,
            cache_dir: self
                .engine
                .cache_dir
                .as_ref()
                .map(|dir| origin.resolve(dir)),
            components: TransformKind::ALL.map(|kind| {
                component_location(
                    self.components,
                    kind,
                    origin,
                    components_override_dir().as_deref(),
                )
            }),
        }
    }
}

/// Declares a mode's policy type: the sections every mode has (`mode`, `[components]`,
/// `[limits]`, `[engine]`, then the mode's own sections as given, then `[log]`), and where the
/// policy was read from (`origin`, not read from the file). This is the one place those fields
/// are spelt; [`common_sections_access!`] reads them for [`ModePolicy`]. The type is strict
/// (`deny_unknown_fields`): a misspelt key is an error at load.
///
/// ```text
/// devin_bridge_policy::mode_policy! {
///     /// A whole companion policy file.
///     pub struct CompanionPolicy {
///         #[serde(default)]
///         pub companion: CompanionSection,
///     }
/// }
/// ```
#[macro_export]
macro_rules! mode_policy {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field_vis:vis $field:ident : $field_type:ty
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, ::serde::Deserialize, ::serde::Serialize)]
        #[serde(deny_unknown_fields)]
        $vis struct $name {
            pub mode: $crate::Mode,
            #[serde(default)]
            pub components: $crate::ComponentsTable,
            #[serde(default)]
            pub limits: $crate::RuntimeLimits,
            #[serde(default)]
            pub engine: $crate::EngineSection,
            $(
                $(#[$field_meta])*
                $field_vis $field: $field_type,
            )*
            #[serde(default)]
            pub log: $crate::LogSection,
            /// Where the policy was read from.
            #[serde(skip)]
            pub origin: $crate::Origin,
        }
    };
}

/// The three accessors of [`ModePolicy`] that every mode's policy type writes the same way, for
/// a type whose fields are named `origin`, `components`, `limits`, `engine` and `log`. Use it
/// inside `impl ModePolicy for ...`.
#[macro_export]
macro_rules! common_sections_access {
    () => {
        fn origin(&self) -> &$crate::Origin {
            &self.origin
        }

        fn set_origin(&mut self, origin: $crate::Origin) {
            self.origin = origin;
        }

        fn common(&self) -> $crate::CommonSections<'_> {
            $crate::CommonSections {
                components: &self.components,
                limits: self.limits,
                engine: &self.engine,
                log: &self.log,
            }
        }
    };
}

/// What a mode's policy type provides; the loading, resolving and diffing every mode does
/// the same way come with it.
pub trait ModePolicy: DeserializeOwned + Serialize + Sized {
    /// The mode whose policies this type reads.
    const MODE: Mode;

    /// Where the policy was read from.
    fn origin(&self) -> &Origin;

    /// Records where the policy was read from (called once, after parsing).
    fn set_origin(&mut self, origin: Origin);

    /// The sections every mode has.
    fn common(&self) -> CommonSections<'_>;

    /// The mode's own range checks, after the common ones passed.
    fn validate_own(&self) -> Result<(), PolicyError>;

    /// Reads and validates a policy file of this mode.
    fn load(path: &Path) -> Result<Self, PolicyError> {
        let (text, origin) = read(path)?;
        Self::parse_from(&text, origin)
    }

    /// Parses policy text; `source` names it in messages, `base_dir` anchors relative paths.
    fn parse(text: &str, source: &Path, base_dir: &Path) -> Result<Self, PolicyError> {
        Self::parse_from(
            text,
            Origin {
                source: source.to_owned(),
                base_dir: base_dir.to_owned(),
            },
        )
    }

    /// Parses and validates policy text read from `origin`.
    fn parse_from(text: &str, origin: Origin) -> Result<Self, PolicyError> {
        let mut policy: Self = parse_as(text, &origin, Self::MODE)?;
        policy.set_origin(origin);
        policy.common().validate(policy.origin())?;
        policy.validate_own()?;
        Ok(policy)
    }

    /// Parses a policy embedded in the binary (see [`builtin_origin`]).
    fn builtin(text: &str, name: &str) -> Result<Self, PolicyError> {
        Self::parse_from(text, builtin_origin(name))
    }

    /// Where the policy was read from (for messages).
    fn source(&self) -> &Path {
        &self.origin().source
    }

    /// Resolves a policy-relative path (see [`Origin::resolve`]).
    fn resolve(&self, path: &Path) -> PathBuf {
        self.origin().resolve(path)
    }

    /// The engine's configuration: component locations, limits and compile cache.
    fn engine_config(&self) -> EngineConfig {
        self.common().engine_config(self.origin())
    }

    /// Dotted names of every setting whose value differs between `self` and `other`.
    fn changed_fields(&self, other: &Self) -> Vec<String> {
        changed_fields(self, other)
    }
}

fn component_location(
    components: &ComponentsTable,
    kind: TransformKind,
    origin: &Origin,
    override_dir: Option<&Path>,
) -> ComponentLocation {
    if let Some(source) = components.get(kind) {
        return ComponentLocation::file(
            origin.resolve(&source.path),
            source.sha256.as_ref().map(|pin| pin.to_ascii_lowercase()),
        );
    }
    if let Some(dir) = override_dir {
        return ComponentLocation::file(normalize(&dir.join(kind.file_name())), None);
    }
    ComponentLocation {
        place: match devin_bridge_engine::builtin::get(kind) {
            Some(builtin) => ComponentPlace::BuiltIn(builtin.bytes),
            None => ComponentPlace::NotBuiltIn,
        },
        pin: None,
    }
}

/// `[log]`: what the host logs (on stderr).
///
/// `filter` uses the `tracing` directive syntax (`info`, `devin_bridge=debug,info`, ...); the
/// default is `info`. `DEVIN_BRIDGE_LOG` (or `RUST_LOG`), when set, wins over it. It changes
/// live on SIGHUP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    pub filter: Option<String>,
}

impl LogSection {
    /// The filter when no environment variable overrides it.
    pub fn filter_or_default(&self) -> &str {
        self.filter.as_deref().unwrap_or("info")
    }
}

/// Dotted names of every setting whose value differs between two policies (`server.listen`,
/// `components.sse.path`, ...), in a stable order. A table present in one policy and absent
/// (defaulted) in the other differs field by field.
pub fn changed_fields<T: Serialize>(old: &T, new: &T) -> Vec<String> {
    let mut changed = Vec::new();
    match (serde_json::to_value(old), serde_json::to_value(new)) {
        (Ok(old), Ok(new)) => diff_values("", &old, &new, &mut changed),
        // Cannot happen for policy types; if it did, report the whole policy as changed.
        _ => changed.push("(policy)".to_owned()),
    }
    changed
}

/// Collects the dotted paths of the leaves that differ between two JSON values.
fn diff_values(
    path: &str,
    old: &serde_json::Value,
    new: &serde_json::Value,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (old, new) {
        (Value::Object(old_map), Value::Object(new_map)) => {
            let keys: std::collections::BTreeSet<&String> =
                old_map.keys().chain(new_map.keys()).collect();
            for key in keys {
                let null = Value::Null;
                diff_values(
                    &join(key),
                    old_map.get(key).unwrap_or(&null),
                    new_map.get(key).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Object(map), Value::Null) | (Value::Null, Value::Object(map)) => {
            for key in map.keys() {
                out.push(join(key));
            }
        }
        _ if old != new => out.push(path.to_owned()),
        _ => {}
    }
}

/// Lexical normalisation: drops `.`, and `..` removes the previous component (never above `/`).
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !matches!(
                    out.components().next_back(),
                    None | Some(Component::RootDir)
                ) {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `DEVIN_BRIDGE_COMPONENTS`: a directory whose `<transform>.wasm` files replace the
/// built-in components of a policy that names none (how the tests and `cargo xtask serve` use
/// freshly built components).
pub fn components_override_dir() -> Option<PathBuf> {
    std::env::var_os("DEVIN_BRIDGE_COMPONENTS")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Minimal {
        mode: Mode,
        #[serde(default)]
        log: LogSection,
    }

    fn origin() -> Origin {
        Origin {
            source: PathBuf::from("test.toml"),
            base_dir: PathBuf::from("/etc/bridge"),
        }
    }

    #[test]
    fn the_mode_is_read_first_and_another_mode_is_refused() {
        let error = parse_as::<Minimal>("mode = \"outpost\"", &origin(), Mode::Companion)
            .expect_err("wrong mode");
        assert!(
            error
                .to_string()
                .contains("is not a companion policy (mode = \"outpost\")"),
            "{error}"
        );
        assert_eq!(
            read_mode("mode = \"outpost\"", &origin()).ok(),
            Some(Mode::Outpost)
        );
        let error = read_mode("mode = \"proxy-everything\"", &origin()).expect_err("unknown");
        assert!(error.to_string().contains("unknown variant"), "{error}");
        let error = read_mode("[log]", &origin()).expect_err("no mode");
        assert!(
            error.to_string().contains("missing field `mode`"),
            "{error}"
        );
    }

    #[test]
    fn every_section_of_another_mode_is_refused_by_name() {
        for (text, section) in [
            (
                "mode = \"companion\"\n[safeguards]\ndefault = \"flag\"",
                "safeguards",
            ),
            ("mode = \"companion\"\n[server]\nlisten = \"x\"", "server"),
            ("mode = \"companion\"\n[outpost]\n", "outpost"),
        ] {
            let error = parse_as::<Minimal>(text, &origin(), Mode::Companion)
                .expect_err("another mode's section");
            assert!(
                matches!(&error, PolicyError::ForeignSection { section: found, .. } if found == section),
                "[{section}]: {error}"
            );
        }
        // Every section a mode's own policy type reads is named as that mode's.
        assert!(Mode::Summarizer.own_sections().contains(&"safeguards"));
    }

    crate::mode_policy! {
        /// A mode's policy with one section of its own.
        struct Declared {
            #[serde(default)]
            own: LogSection,
        }
    }

    impl ModePolicy for Declared {
        const MODE: Mode = Mode::Companion;

        crate::common_sections_access!();

        fn validate_own(&self) -> Result<(), PolicyError> {
            Ok(())
        }
    }

    #[test]
    fn a_declared_policy_has_the_common_sections_and_its_own_and_refuses_unknown_keys() {
        let text = "mode = \"companion\"\n[own]\nfilter = \"debug\"\n[log]\nfilter = \"warn\"\n[components.sse]\npath = \"sse.wasm\"\n";
        let policy = Declared::parse(text, Path::new("test.toml"), Path::new("/etc/bridge"))
            .expect("policy");
        assert_eq!(policy.mode, Mode::Companion);
        assert_eq!(policy.own.filter.as_deref(), Some("debug"));
        assert_eq!(policy.log.filter.as_deref(), Some("warn"));
        assert_eq!(policy.origin().base_dir, PathBuf::from("/etc/bridge"));
        assert!(matches!(
            &policy.engine_config().location(TransformKind::Sse).place,
            ComponentPlace::File(path) if path == Path::new("/etc/bridge/sse.wasm")
        ));
        let error = Declared::parse(
            "mode = \"companion\"\n[own]\nfilter = \"x\"\nstray = 1\n",
            Path::new("test.toml"),
            Path::new("/"),
        )
        .expect_err("unknown key");
        assert!(error.to_string().contains("stray"), "{error}");
    }

    #[test]
    fn a_section_of_another_mode_is_refused_by_name() {
        for (text, section, owner) in [
            (
                "mode = \"companion\"\n[outpost]\nmax_sessions = 2",
                "outpost",
                "outpost",
            ),
            (
                "mode = \"companion\"\n[agent]\nprewarm = 1",
                "agent",
                "summarizer",
            ),
            ("mode = \"companion\"\n[server]", "server", "summarizer"),
        ] {
            let error = parse_as::<Minimal>(text, &origin(), Mode::Companion).expect_err("foreign");
            let message = error.to_string();
            assert!(
                message.contains(&format!("[{section}] belongs to the {owner} mode")),
                "{message}"
            );
        }
        assert!(
            parse_as::<Minimal>("mode = \"companion\"\n[log]", &origin(), Mode::Companion).is_ok()
        );
    }

    #[test]
    fn relative_component_paths_resolve_against_the_policy_directory() {
        let components: ComponentsTable = toml::from_str(&format!(
            "[envelope]\npath = \"c/e.wasm\"\nsha256 = \"{}\"",
            "AB".repeat(32)
        ))
        .expect("table");
        let common = CommonSections {
            components: &components,
            limits: RuntimeLimits::default(),
            engine: &EngineSection::default(),
            log: &LogSection::default(),
        };
        let config = common.engine_config(&origin());
        let location = config.location(TransformKind::Envelope);
        assert_eq!(location.path(), Some(Path::new("/etc/bridge/c/e.wasm")));
        assert_eq!(location.pin.as_deref(), Some("ab".repeat(32).as_str()));
    }

    #[test]
    fn a_transform_without_a_table_is_the_override_file_else_built_in_else_not_built_in() {
        static SERIALIZER: &[u8] = b"\0asm serializer";
        let mut set = [None; TransformKind::COUNT];
        // Index 0 is the serializer (`TransformKind::ALL` order).
        set[0] = Some(devin_bridge_engine::builtin::BuiltInComponent {
            bytes: SERIALIZER,
            sha256: "00",
        });
        assert!(devin_bridge_engine::builtin::install(set));
        let table = ComponentsTable::default();
        let serializer = component_location(&table, TransformKind::Serializer, &origin(), None);
        assert_eq!(serializer.place, ComponentPlace::BuiltIn(SERIALIZER));
        let sse = component_location(&table, TransformKind::Sse, &origin(), None);
        assert_eq!(sse.place, ComponentPlace::NotBuiltIn);
        let overridden = component_location(
            &table,
            TransformKind::Serializer,
            &origin(),
            Some(Path::new("/opt/c")),
        );
        assert_eq!(overridden.path(), Some(Path::new("/opt/c/serializer.wasm")));
        // A policy's own table wins over both.
        let table: ComponentsTable =
            toml::from_str("[serializer]\npath = \"mine.wasm\"").expect("table");
        let own = component_location(
            &table,
            TransformKind::Serializer,
            &origin(),
            Some(Path::new("/opt/c")),
        );
        assert_eq!(own.path(), Some(Path::new("/etc/bridge/mine.wasm")));
    }

    #[test]
    fn a_built_in_policy_resolves_nothing_against_the_build_tree() {
        let origin = builtin_origin("built-in companion policy");
        assert_eq!(
            Some(origin.base_dir.as_path()),
            std::env::current_dir().ok().as_deref()
        );
        assert!(!origin.base_dir.ends_with("policies"));
    }

    #[test]
    fn the_built_in_catalog_lists_model_families() {
        let catalog: serde_json::Value =
            serde_json::from_str(BUILTIN_CATALOG).expect("the built-in catalog is JSON");
        assert!(catalog["families"]
            .as_array()
            .is_some_and(|f| !f.is_empty()));
    }

    #[test]
    fn normalisation_is_lexical_and_stops_at_the_root() {
        assert_eq!(
            normalize(Path::new("/a/b/../.sandbox/./h")),
            PathBuf::from("/a/.sandbox/h")
        );
        assert_eq!(normalize(Path::new("/../../etc")), PathBuf::from("/etc"));
    }
}
