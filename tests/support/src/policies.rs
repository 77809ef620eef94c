//! The policies the tests and benchmarks run the bridge on: a summarizer policy naming the
//! built components by absolute path, and `policies/offline.toml` with settings changed.

use std::path::{Path, PathBuf};

use devin_bridge_engine::TransformKind;
use devin_bridge_policy::ModePolicy as _;
use devin_bridge_summarizer::policy::SummarizerPolicy;

use crate::artifacts::{components_dir, workspace_root};

/// The default model catalog of the checkout (`policies/models.json`).
pub fn catalog() -> PathBuf {
    workspace_root().join("policies").join("models.json")
}

/// A summarizer policy whose components are those in `components`, given as absolute paths,
/// followed by `extra`.
pub fn summarizer_policy(components: &Path, extra: &str) -> String {
    let mut text = String::from("mode = \"summarizer\"\n");
    for kind in TransformKind::ALL {
        text.push_str(&format!(
            "[components.{kind}]\npath = {:?}\n",
            components.join(kind.file_name()).display().to_string()
        ));
    }
    text.push_str(extra);
    text
}

/// A policy whose components are the built ones, given as absolute paths.
pub fn policy_text(extra: &str) -> String {
    summarizer_policy(&components_dir(), extra)
}

pub fn policy(extra: &str) -> SummarizerPolicy {
    SummarizerPolicy::parse(
        &policy_text(extra),
        Path::new("test-policy.toml"),
        Path::new("/"),
    )
    .expect("test policy")
}

/// `policies/offline.toml` as a TOML table, to change settings in and write elsewhere.
pub struct OfflinePolicy {
    table: toml::Table,
}

impl OfflinePolicy {
    pub fn load() -> Result<OfflinePolicy, String> {
        let file = workspace_root().join("policies").join("offline.toml");
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let table = text
            .parse()
            .map_err(|e| format!("{}: {e}", file.display()))?;
        Ok(OfflinePolicy { table })
    }

    /// A path as a TOML string.
    pub fn path(path: &Path) -> toml::Value {
        toml::Value::String(path.display().to_string())
    }

    /// Sets `[table] key = value` (creating the table).
    pub fn set(&mut self, table: &str, key: &str, value: impl Into<toml::Value>) -> &mut Self {
        self.table
            .entry(table)
            .or_insert_with(|| toml::Table::new().into())
            .as_table_mut()
            .unwrap_or_else(|| panic!("[{table}] is a table"))
            .insert(key.into(), value.into());
        self
    }

    /// Names each built component in `components` by absolute path.
    pub fn components(&mut self, components: &Path) -> &mut Self {
        for kind in TransformKind::ALL {
            let wasm = components.join(kind.file_name());
            let source = toml::Table::from_iter([("path".to_owned(), Self::path(&wasm))]);
            self.set("components", kind.name(), source);
        }
        self
    }

    pub fn write(&self, file: &Path) -> Result<(), String> {
        let text = toml::to_string(&self.table).map_err(|e| format!("policy: {e}"))?;
        std::fs::write(file, text).map_err(|e| format!("{}: {e}", file.display()))
    }
}
