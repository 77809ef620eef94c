//! Rule 7: the arguments against the called tool's full input schema, with the `jsonschema` crate.
//!
//! Arguments that plainly satisfy a plain schema are accepted without building a validator
//! (`simple_schema.rs` says why and how that stays exact); everything else, every rejection
//! included, is decided here.
//!
//! - Draft: from `$schema` when it names a known draft (Claude Code declares draft-07), draft
//!   2020-12 when `$schema` is absent (what the Messages API and MCP assume). A `$schema` naming
//!   anything else would need its meta-schema fetched, so that tool's schema is invalid.
//! - No resolution outside the schema: the validator is built `offline()` (the crate's network
//!   and file resolvers are also compiled out), so a `$ref` to anything but the schema itself or
//!   the bundled draft meta-schemas makes the schema invalid rather than fetching it.
//! - `format` is asserted for every draft: the client declared it, and catching a bad value here
//!   lets the agent repair it instead of the client failing the call.
//! - Errors are reported with the instance path and a message that masks the offending value
//!   (it may be megabytes long), sorted by path then message, so the order never depends on the
//!   crate's evaluation order. Every error is counted; the first [`MAX_LISTED`] are listed.
//! - A reply may call one tool several times: a [`Checker`] per tool builds its validator at
//!   most once and reuses it for every call of that tool in the reply.

use crate::{failure, simple_schema, tools::Tool};
use devin_bridge_types::Failure;
use jsonschema::Draft;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write;

/// How many validation errors a failure message lists; the rest are counted.
pub(crate) const MAX_LISTED: usize = 100;

/// The longest single error line (path or message) quoted, in characters.
const MAX_LINE_CHARS: usize = 200;

/// Checks `arguments` for `tool`; arguments must be a JSON object.
#[cfg(test)]
pub(crate) fn check_arguments(tool: Tool<'_>, arguments: &Value) -> Result<(), Failure> {
    Checker::new(tool).check(arguments)
}

/// One declared tool, checking the calls of one reply. Its validator, when the shortcut does
/// not decide, is built once and reused by every later call of the same tool in the reply.
pub(crate) struct Checker<'a> {
    tool: Tool<'a>,
    validator: Option<jsonschema::Validator>,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(tool: Tool<'a>) -> Self {
        Self {
            tool,
            validator: None,
        }
    }

    /// Checks one call's `arguments`; they must be a JSON object.
    pub(crate) fn check(&mut self, arguments: &Value) -> Result<(), Failure> {
        let Self { tool, validator } = self;
        if !arguments.is_object() {
            return Err(failure::arguments_not_object(tool.name, arguments));
        }
        let schema = tool
            .input_schema()
            .ok_or_else(|| failure::invalid_schema(tool.name, "is missing"))?;
        let draft =
            draft_of(schema).map_err(|reason| failure::invalid_schema(tool.name, reason))?;
        if simple_schema::certainly_valid(schema, draft, arguments) {
            return Ok(());
        }
        let validator = match validator {
            Some(built) => built,
            None => validator.insert(build(tool.name, schema, draft)?),
        };

        let mut errors = Errors::default();
        for error in validator.iter_errors(arguments) {
            errors.add(error.instance_path().as_str(), &error.masked().to_string());
        }
        match errors.listing() {
            None => Ok(()),
            Some(listing) => Err(failure::invalid_arguments(tool.name, &listing)),
        }
    }
}

/// The validator of the tool `name`, or the `invalid_tool_schema` failure its schema causes.
fn build(name: &str, schema: &Value, draft: Draft) -> Result<jsonschema::Validator, Failure> {
    jsonschema::options()
        .offline()
        .with_draft(draft)
        .should_validate_formats(true)
        .build(schema)
        .map_err(|error| {
            // The schema is the client's own text: its values are quoted (bounded), not masked,
            // and the location says where in the schema the problem is.
            let at = error.instance_path().as_str();
            let location = if at.is_empty() {
                String::new()
            } else {
                format!(" at {}", line(at))
            };
            let reason = format!(
                "is not a valid JSON Schema{location}: {}",
                line(&error.to_string())
            );
            failure::invalid_schema(name, &reason)
        })
}

/// The draft a schema is written in; see the module documentation.
fn draft_of(schema: &Value) -> Result<Draft, &'static str> {
    let declared = match schema {
        Value::Object(object) => object.get("$schema"),
        // `true` and `false` are schemas too, in every draft that matters here.
        Value::Bool(_) => None,
        _ => return Err("is not a JSON object"),
    };
    match declared {
        None => Ok(Draft::Draft202012),
        Some(Value::String(uri)) => match Draft::from_schema_uri(uri) {
            Draft::Unknown => Err("declares an unknown \"$schema\""),
            draft => Ok(draft),
        },
        Some(_) => Err("has a \"$schema\" that is not a string"),
    }
}

/// The validation errors of one call, kept sorted and bounded.
#[derive(Default)]
struct Errors {
    /// The smallest `(path, message)` pairs seen, at most `MAX_LISTED` of them.
    listed: BTreeSet<(String, String)>,
    total: usize,
}

impl Errors {
    fn add(&mut self, pointer: &str, message: &str) {
        self.total += 1;
        let path = if pointer.is_empty() {
            "(root)".to_owned()
        } else {
            line(pointer)
        };
        self.listed.insert((path, line(message)));
        if self.listed.len() > MAX_LISTED {
            self.listed.pop_last();
        }
    }

    /// The message tail: `None` without errors, else a count and one line per listed error.
    fn listing(&self) -> Option<String> {
        if self.total == 0 {
            return None;
        }
        let plural = if self.total == 1 { "" } else { "s" };
        let mut out = format!(" ({} error{plural}):", self.total);
        for (path, message) in &self.listed {
            let _ = write!(out, "\n- {path}: {message}");
        }
        // Identical errors collapse in the set, so count what is not shown from the total.
        let hidden = self.total.saturating_sub(self.listed.len());
        if self.total > MAX_LISTED && hidden > 0 {
            let _ = write!(out, "\n- and {hidden} more");
        }
        Some(out)
    }
}

/// One line of a message: newlines flattened, length bounded.
fn line(text: &str) -> String {
    let flat: String = text
        .chars()
        .take(MAX_LINE_CHARS + 1)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    failure::excerpt(&flat, MAX_LINE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Catalog;
    use serde_json::json;

    fn check(schema: Value, arguments: Value) -> Result<(), Failure> {
        let tools = json!([{"name": "T", "input_schema": schema}]).to_string();
        let catalog = Catalog::parse(&tools).expect("valid catalog");
        let tool = catalog.get("T").expect("parses").expect("declared");
        check_arguments(tool, &arguments)
    }

    fn message(schema: Value, arguments: Value) -> String {
        let failure = check(schema, arguments).expect_err("should fail");
        assert_eq!(failure.code, "invalid_tool_arguments");
        assert_eq!(failure.status, 502);
        assert!(failure.repairable);
        failure.message
    }

    fn schema_failure(schema: Value) -> Failure {
        let failure = check(schema, json!({})).expect_err("schema should be rejected");
        assert_eq!(failure.code, "invalid_tool_schema");
        assert_eq!(failure.status, 400);
        assert!(!failure.repairable);
        failure
    }

    #[test]
    fn valid_arguments_pass() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"command": {"type": "string"}, "timeout": {"type": "number", "maximum": 600000}},
            "required": ["command"],
            "additionalProperties": false
        });
        assert_eq!(
            check(schema, json!({"command": "ls", "timeout": 1000})),
            Ok(())
        );
    }

    #[test]
    fn lists_every_error_sorted_by_path() {
        let schema = json!({
            "type": "object",
            "properties": {
                "b": {"type": "string", "minLength": 3, "pattern": "^x"},
                "a": {"type": "integer", "minimum": 1}
            },
            "required": ["c"],
            "additionalProperties": false
        });
        let text = message(schema, json!({"a": 0, "b": "yy", "z": 1}));
        assert_eq!(
            text,
            "the arguments of tool \"T\" do not match its input schema (5 errors):\n\
             - (root): \"c\" is a required property\n\
             - (root): Additional properties are not allowed ('z' was unexpected)\n\
             - /a: value is less than the minimum of 1\n\
             - /b: value does not match \"^x\"\n\
             - /b: value is shorter than 3 characters"
        );
    }

    #[test]
    fn composition_and_references_are_checked() {
        let schema = json!({
            "$defs": {"mode": {"enum": ["fast", "slow"]}},
            "type": "object",
            "properties": {
                "mode": {"$ref": "#/$defs/mode"},
                "target": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "kind": {"const": "file"},
                "n": {"oneOf": [{"multipleOf": 2}, {"multipleOf": 3}]},
                "all": {"allOf": [{"minimum": 0}, {"maximum": 10}]}
            }
        });
        assert_eq!(
            check(
                schema.clone(),
                json!({"mode": "fast", "target": 3, "kind": "file", "n": 4, "all": 5})
            ),
            Ok(())
        );
        let text = message(
            schema,
            json!({"mode": "medium", "target": [], "kind": "dir", "n": 6, "all": 11}),
        );
        assert!(text.contains("(5 errors)"), "{text}");
        assert!(
            text.contains("- /all: value is greater than the maximum of 10"),
            "{text}"
        );
        assert!(text.contains("- /kind: \"file\" was expected"), "{text}");
        assert!(text.contains("- /mode: value is not one of"), "{text}");
        assert!(
            text.contains("- /n: value is valid under more than one"),
            "{text}"
        );
        assert!(
            text.contains("- /target: value is not valid under any"),
            "{text}"
        );
    }

    #[test]
    fn draft_07_definitions_refs_work() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"path": {"type": "string", "pattern": "^/"}},
            "type": "object",
            "properties": {"file": {"$ref": "#/definitions/path"}}
        });
        assert_eq!(check(schema.clone(), json!({"file": "/etc/hosts"})), Ok(()));
        let text = message(schema, json!({"file": "relative"}));
        assert!(
            text.ends_with("- /file: value does not match \"^/\""),
            "{text}"
        );
    }

    #[test]
    fn formats_are_asserted() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"url": {"type": "string", "format": "uri"}}
        });
        assert_eq!(
            check(schema.clone(), json!({"url": "https://example.com/"})),
            Ok(())
        );
        let text = message(schema, json!({"url": "not a uri"}));
        assert!(text.ends_with("- /url: value is not a \"uri\""), "{text}");
    }

    #[test]
    fn boolean_schemas_are_schemas() {
        assert_eq!(check(json!(true), json!({"a": 1})), Ok(()));
        let text = message(json!(false), json!({}));
        assert!(
            text.contains("(root): False schema does not allow value"),
            "{text}"
        );
    }

    #[test]
    fn external_references_are_never_resolved() {
        for target in [
            "https://example.com/schema.json",
            "http://127.0.0.1:1/x.json",
            "file:///etc/passwd",
            "other.json#/x",
        ] {
            let failure =
                schema_failure(json!({"type": "object", "properties": {"a": {"$ref": target}}}));
            assert!(
                failure.message.contains("is not a valid JSON Schema"),
                "{}",
                failure.message
            );
        }
    }

    #[test]
    fn meta_schema_references_are_not_fetched_either() {
        let failure = schema_failure(json!({
            "type": "object",
            "properties": {"s": {"$ref": "http://json-schema.org/draft-07/schema#"}}
        }));
        assert!(
            failure.message.contains("not present in a registry"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn broken_schemas_are_client_errors() {
        schema_failure(json!({"type": "banana"}));
        schema_failure(json!({"type": "object", "properties": {"a": {"pattern": "("}}}));
        schema_failure(json!({"$schema": "https://example.com/custom-meta"}));
        schema_failure(json!({"$schema": 7}));
        schema_failure(json!("object"));
        schema_failure(json!({"$ref": "#/$defs/missing"}));
    }

    #[test]
    fn missing_schema_is_a_client_error() {
        let catalog = Catalog::parse(r#"[{"name":"T"}]"#).expect("valid");
        let failure = check_arguments(
            catalog.get("T").expect("parses").expect("declared"),
            &json!({}),
        )
        .expect_err("no schema");
        assert_eq!(failure.code, "invalid_tool_schema");
        assert_eq!(failure.message, "the input schema of tool \"T\" is missing");
    }

    #[test]
    fn arguments_must_be_an_object() {
        let failure = check(json!({}), json!([1])).expect_err("array");
        assert_eq!(failure.code, "invalid_tool_arguments");
        assert_eq!(
            failure.message,
            "the arguments of tool \"T\" are an array, not a JSON object"
        );
    }

    #[test]
    fn listing_is_bounded_but_counts_everything() {
        let schema = json!({"type": "object", "additionalProperties": {"type": "string"}});
        let arguments: serde_json::Map<String, Value> =
            (0..250).map(|i| (format!("k{i:03}"), json!(i))).collect();
        let text = message(schema, Value::Object(arguments));
        assert!(text.contains("(250 errors):"), "{text}");
        assert_eq!(text.matches("\n- /k").count(), MAX_LISTED);
        assert!(text.contains("\n- /k000: value is not of type \"string\""));
        assert!(
            !text.contains("/k100:"),
            "only the smallest paths are listed"
        );
        assert!(text.ends_with("\n- and 150 more"), "{text}");
    }

    #[test]
    fn huge_values_are_masked() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let text = message(schema, json!({"a": "x".repeat(1_000_000)}));
        assert!(text.len() < 200, "{text}");
    }
}
