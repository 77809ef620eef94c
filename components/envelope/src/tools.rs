//! The request's tools array, as the serializer passes it on.
//!
//! Parsed once per call. Only the shape is checked here (an array of objects, each with a
//! distinct string `name`); schemas are left as values and compiled only for the tool that is
//! actually called, because a Claude Code request declares a couple of dozen tools and compiling
//! all of them would dominate the cost of a turn.

use crate::{failure, json};
use devin_bridge_types::Failure;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The declared tools, by name.
pub(crate) struct Catalog {
    by_name: BTreeMap<String, Map<String, Value>>,
}

/// One declared tool.
pub(crate) struct Tool<'a> {
    pub(crate) name: &'a str,
    declaration: &'a Map<String, Value>,
}

impl Catalog {
    /// Parses the tools JSON text. Failures are non-repairable 400s: this is host input.
    pub(crate) fn parse(tools: &str) -> Result<Self, Failure> {
        let value = json::parse_strict(tools)
            .map_err(|error| failure::invalid_tools(&format!("not valid JSON ({error})")))?;
        let Value::Array(items) = value else {
            return Err(failure::invalid_tools("not a JSON array"));
        };
        let mut by_name = BTreeMap::new();
        for (index, item) in items.into_iter().enumerate() {
            let Value::Object(mut declaration) = item else {
                return Err(failure::invalid_tools(&format!(
                    "tool {index} is not an object"
                )));
            };
            let Some(Value::String(name)) = declaration.remove("name") else {
                return Err(failure::invalid_tools(&format!(
                    "tool {index} has no string \"name\""
                )));
            };
            if by_name.contains_key(&name) {
                return Err(failure::invalid_tools(&format!(
                    "tool {index} repeats the name {:?}",
                    failure::excerpt(&name, failure::EXCERPT_CHARS)
                )));
            }
            by_name.insert(name, declaration);
        }
        Ok(Self { by_name })
    }

    /// The tool declared under exactly `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Tool<'_>> {
        self.by_name
            .get_key_value(name)
            .map(|(name, declaration)| Tool { name, declaration })
    }
}

impl Tool<'_> {
    /// The declared `input_schema`, if any.
    pub(crate) fn input_schema(&self) -> Option<&Value> {
        self.declaration.get("input_schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_tools_by_exact_name() {
        let catalog =
            Catalog::parse(r#"[{"name":"Read","input_schema":{"type":"object"}},{"name":"Bash"}]"#)
                .expect("valid");
        let read = catalog.get("Read").expect("declared");
        assert_eq!(read.name, "Read");
        assert_eq!(
            read.input_schema(),
            Some(&serde_json::json!({"type":"object"}))
        );
        assert!(catalog
            .get("Bash")
            .expect("declared")
            .input_schema()
            .is_none());
        assert!(catalog.get("read").is_none(), "case-sensitive");
    }

    #[test]
    fn empty_array_is_a_valid_catalog() {
        assert!(Catalog::parse("[]").expect("valid").get("Read").is_none());
    }

    fn rejection(tools: &str) -> Failure {
        match Catalog::parse(tools) {
            Ok(_) => panic!("{tools} should be rejected"),
            Err(failure) => failure,
        }
    }

    #[test]
    fn malformed_catalogs_are_client_errors() {
        for tools in [
            "",
            "{",
            "{}",
            "null",
            "[1]",
            "[{}]",
            r#"[{"name":5}]"#,
            r#"[{"name":"A"},{"name":"A"}]"#,
        ] {
            let failure = rejection(tools);
            assert_eq!(failure.code, "invalid_tools", "{tools}");
            assert_eq!(failure.status, 400);
            assert!(!failure.repairable);
        }
    }
}
