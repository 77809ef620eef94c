//! The request's tools array, as the serializer passes it on.
//!
//! The whole text is checked on every call (a JSON array of objects, each with a distinct string
//! `name`, no duplicate key anywhere), but it is not turned into values: a Claude Code request
//! declares a couple of dozen tools with long descriptions, and building all of them would
//! dominate the cost of a turn. A single validating pass (see [`scan`]) records each tool's name
//! and where its `input_schema` is; only the called tools' schemas are parsed (and compiled).
//!
//! The pass is deliberately conservative: whatever it is not certain the strict parser accepts
//! (a lone surrogate escape, a huge exponent, very deep nesting, anything malformed) sends the
//! text to the strict parser instead, which either accepts it or produces the same
//! `invalid_tools` failure, message included, as it always has.

use crate::{failure, json};
use devin_bridge_types::Failure;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The declared tools, by name.
pub(crate) struct Catalog<'t> {
    declarations: Declarations<'t>,
}

enum Declarations<'t> {
    /// Found by the scan, sorted by name.
    Scanned(Vec<Entry<'t>>),
    /// Parsed whole, for a text the scan could not vouch for but the strict parser accepts:
    /// each tool's `input_schema`, if it has one.
    Parsed(BTreeMap<String, Option<Value>>),
}

/// One tool as the scan found it.
struct Entry<'t> {
    name: Cow<'t, str>,
    /// The JSON text of its `input_schema` value, if it has one.
    input_schema: Option<&'t str>,
}

/// One declared tool.
pub(crate) struct Tool<'a> {
    pub(crate) name: &'a str,
    input_schema: Option<Cow<'a, Value>>,
}

impl<'t> Catalog<'t> {
    /// Checks the tools JSON text. Failures are non-repairable 400s: this is host input.
    pub(crate) fn parse(tools: &'t str) -> Result<Self, Failure> {
        match scan(tools) {
            Some(mut entries) => {
                entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
                if entries.windows(2).all(|pair| pair[0].name != pair[1].name) {
                    return Ok(Self {
                        declarations: Declarations::Scanned(entries),
                    });
                }
                // A repeated name: the strict parser reports it with the index it has always
                // named (the second occurrence in document order).
                parse_whole(tools)
            }
            None => parse_whole(tools),
        }
    }

    /// The tool declared under exactly `name`, if any.
    pub(crate) fn get(&self, name: &str) -> Result<Option<Tool<'_>>, Failure> {
        match &self.declarations {
            Declarations::Scanned(entries) => {
                let Ok(found) = entries.binary_search_by(|entry| entry.name.as_ref().cmp(name))
                else {
                    return Ok(None);
                };
                let entry = &entries[found];
                // The scan vouched for this text, so parsing cannot fail; if it ever did, the
                // failure is still the host's, reported as such rather than as a panic.
                let input_schema = entry
                    .input_schema
                    .map(json::parse_strict)
                    .transpose()
                    .map_err(|error| {
                        failure::invalid_tools(&format!("not valid JSON ({error})"))
                    })?;
                Ok(Some(Tool {
                    name: &entry.name,
                    input_schema: input_schema.map(Cow::Owned),
                }))
            }
            Declarations::Parsed(by_name) => {
                Ok(by_name
                    .get_key_value(name)
                    .map(|(name, input_schema)| Tool {
                        name,
                        input_schema: input_schema.as_ref().map(Cow::Borrowed),
                    }))
            }
        }
    }
}

impl Tool<'_> {
    /// The declared `input_schema`, if any.
    pub(crate) fn input_schema(&self) -> Option<&Value> {
        self.input_schema.as_deref()
    }
}

/// The whole text through the strict parser: the authority on what is accepted, and the source
/// of every `invalid_tools` message.
fn parse_whole(tools: &str) -> Result<Catalog<'static>, Failure> {
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
        by_name.insert(name, declaration.remove("input_schema"));
    }
    Ok(Catalog {
        declarations: Declarations::Parsed(by_name),
    })
}

/// Nesting the scan follows before it defers to the strict parser, whose own limit (128
/// levels) is what finally decides; this stays well below it so the scan never accepts what
/// the parser would refuse.
const MAX_DEPTH: usize = 100;

/// Number tokens longer than this are left to the strict parser, which alone knows whether
/// they overflow; anything shorter with a small exponent is finite.
const MAX_NUMBER_CHARS: usize = 300;

/// One validating pass over the tools text: each tool in document order, or `None` when the text
/// is not certainly a strict-parser-valid array of objects that each have a string `name`.
///
/// Work is linear in the text, apart from sorting each object's keys to find duplicates.
fn scan(text: &str) -> Option<Vec<Entry<'_>>> {
    let mut scanner = Scanner {
        text,
        bytes: text.as_bytes(),
        at: 0,
        keys: Vec::with_capacity(64),
        open: Vec::with_capacity(16),
    };
    let mut entries = Vec::with_capacity(32);
    scanner.skip_whitespace();
    scanner.expect(b'[')?;
    scanner.skip_whitespace();
    if !scanner.eat(b']') {
        loop {
            scanner.skip_whitespace();
            entries.push(scanner.entry()?);
            scanner.skip_whitespace();
            if scanner.eat(b']') {
                break;
            }
            scanner.expect(b',')?;
        }
    }
    scanner.skip_whitespace();
    (scanner.at == text.len()).then_some(entries)
}

struct Scanner<'t> {
    text: &'t str,
    bytes: &'t [u8],
    at: usize,
    /// The keys of the objects being scanned, innermost last.
    keys: Vec<Cow<'t, str>>,
    /// The containers open inside the value being skipped, innermost last.
    open: Vec<Open>,
}

/// An open container during [`Scanner::value`].
struct Open {
    object: bool,
    /// Where this object's keys start in `Scanner::keys`.
    keys_from: usize,
}

impl<'t> Scanner<'t> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// One tool: an object whose `name` is a string.
    fn entry(&mut self) -> Option<Entry<'t>> {
        self.expect(b'{')?;
        let keys_from = self.keys.len();
        let mut name = None;
        let mut input_schema = None;
        self.skip_whitespace();
        if !self.eat(b'}') {
            loop {
                self.skip_whitespace();
                let key = self.string()?;
                self.skip_whitespace();
                self.expect(b':')?;
                self.skip_whitespace();
                if key == "name" {
                    name = Some(self.string()?);
                } else {
                    let start = self.at;
                    self.value()?;
                    if key == "input_schema" {
                        input_schema = Some(&self.text[start..self.at]);
                    }
                }
                self.keys.push(key);
                self.skip_whitespace();
                if self.eat(b'}') {
                    break;
                }
                self.expect(b',')?;
            }
        }
        self.close_object(keys_from)?;
        Some(Entry {
            name: name?,
            input_schema,
        })
    }

    /// Skips one value of any kind, checking it as the strict parser would.
    fn value(&mut self) -> Option<()> {
        self.open.clear();
        loop {
            // A value starts here.
            match self.peek()? {
                b'{' | b'[' => {
                    let object = self.peek() == Some(b'{');
                    self.at += 1;
                    if self.open.len() >= MAX_DEPTH {
                        return None;
                    }
                    self.open.push(Open {
                        object,
                        keys_from: self.keys.len(),
                    });
                    self.skip_whitespace();
                    let closer = if object { b'}' } else { b']' };
                    if self.peek() == Some(closer) {
                        // Empty: fall through to closing it below.
                    } else {
                        if object {
                            self.key()?;
                        }
                        continue;
                    }
                }
                b'"' => {
                    self.skip_string()?;
                }
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                _ => self.number()?,
            }
            // A value ended: close containers, or move to the next member.
            loop {
                let Some(innermost) = self.open.last() else {
                    return Some(());
                };
                let object = innermost.object;
                self.skip_whitespace();
                if self.eat(b',') {
                    self.skip_whitespace();
                    if object {
                        self.key()?;
                    }
                    break;
                }
                self.expect(if object { b'}' } else { b']' })?;
                let closed = self.open.pop()?;
                if closed.object {
                    self.close_object(closed.keys_from)?;
                }
            }
        }
    }

    /// An object key and its colon; the key is kept for the duplicate check.
    fn key(&mut self) -> Option<()> {
        let key = self.string()?;
        self.keys.push(key);
        self.skip_whitespace();
        self.expect(b':')?;
        self.skip_whitespace();
        Some(())
    }

    /// Ends an object: `None` if two of its keys are equal (the strict parser rejects that).
    fn close_object(&mut self, keys_from: usize) -> Option<()> {
        let keys = &mut self.keys[keys_from..];
        // Schema objects have a handful of keys: comparing every pair (most differ in length)
        // is cheaper than sorting; a large object is sorted, so the work stays O(n log n).
        let distinct = if keys.len() <= 8 {
            (1..keys.len()).all(|index| !keys[..index].contains(&keys[index]))
        } else {
            keys.sort_unstable();
            keys.windows(2).all(|pair| pair[0] != pair[1])
        };
        self.keys.truncate(keys_from);
        distinct.then_some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let found = self.bytes[self.at..].starts_with(word);
        self.at += word.len();
        found.then_some(())
    }

    /// A string; its decoded value, borrowed unless it has escapes.
    fn string(&mut self) -> Option<Cow<'t, str>> {
        let start = self.at;
        let escaped = self.skip_string()?;
        let literal = &self.text[start..self.at];
        if escaped {
            serde_json::from_str::<String>(literal).ok().map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(&literal[1..literal.len() - 1]))
        }
    }

    /// Skips a string, checking its escapes; true if it has any. Values are only skipped: most
    /// of a tools list is descriptions, and decoding them would cost more than the scan.
    fn skip_string(&mut self) -> Option<bool> {
        self.expect(b'"')?;
        let mut escaped = false;
        loop {
            self.at += plain_run(&self.bytes[self.at..])?;
            match self.bytes[self.at] {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    self.at += 1;
                    self.escape()?;
                }
                // Raw control characters are not allowed in JSON strings.
                _ => return None,
            }
        }
        self.at += 1;
        Some(escaped)
    }

    /// The rest of an escape sequence, after its backslash.
    fn escape(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 1,
            b'u' => {
                self.at += 1;
                let unit = self.hex4()?;
                if (0xD800..0xDC00).contains(&unit) {
                    // A high surrogate must be followed by an escaped low one.
                    if !self.bytes[self.at..].starts_with(b"\\u") {
                        return None;
                    }
                    self.at += 2;
                    let low = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                } else if (0xDC00..0xE000).contains(&unit) {
                    return None;
                }
            }
            _ => return None,
        }
        Some(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.at..self.at + 4)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    /// A number in JSON syntax that is certainly finite as an `f64`.
    fn number(&mut self) -> Option<()> {
        let start = self.at;
        self.eat(b'-');
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.') {
            self.digit_run()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            let exponent_start = self.at;
            self.digit_run()?;
            // Two exponent digits keep any short mantissa far from f64 overflow.
            if self.at - exponent_start > 2 {
                return None;
            }
        }
        (self.at - start <= MAX_NUMBER_CHARS).then_some(())
    }

    /// At least one digit.
    fn digit_run(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }
}

use devin_bridge_types::text::plain_run;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::robustness::XorShift;
    use serde_json::json;

    fn catalog(tools: &str) -> Catalog<'_> {
        Catalog::parse(tools).unwrap_or_else(|failure| panic!("{tools}: {failure}"))
    }

    fn schema_of(tools: &str, name: &str) -> Option<Value> {
        catalog(tools)
            .get(name)
            .expect("declared tools parse")
            .map(|tool| tool.input_schema().cloned().unwrap_or(Value::Null))
    }

    fn scanned(tools: &str) -> bool {
        matches!(catalog(tools).declarations, Declarations::Scanned(_))
    }

    #[test]
    fn looks_up_tools_by_exact_name() {
        let tools = r#"[{"name":"Read","input_schema":{"type":"object"}},{"name":"Bash"}]"#;
        let catalog = catalog(tools);
        let read = catalog.get("Read").expect("ok").expect("declared");
        assert_eq!(read.name, "Read");
        assert_eq!(read.input_schema(), Some(&json!({"type":"object"})));
        let bash = catalog.get("Bash").expect("ok").expect("declared");
        assert!(bash.input_schema().is_none());
        assert!(catalog.get("read").expect("ok").is_none(), "case-sensitive");
        assert!(catalog.get("Write").expect("ok").is_none(), "missing");
        assert!(scanned(tools));
    }

    #[test]
    fn empty_array_is_a_valid_catalog() {
        for tools in ["[]", " [ ] ", "\n[\r\n\t]\n"] {
            assert!(catalog(tools).get("Read").expect("ok").is_none());
            assert!(scanned(tools), "{tools:?}");
        }
    }

    #[test]
    fn escaped_names_are_decoded() {
        let tools = r#"[{"name":"say \"hi\"\\\u00e9\ud83d\ude00","input_schema":{"type":"object"}},
                        {"name":"Re\u0061d","input_schema":{"type":"string"}}]"#;
        assert!(scanned(tools));
        assert_eq!(
            schema_of(tools, "say \"hi\"\\é😀"),
            Some(json!({"type":"object"}))
        );
        assert_eq!(schema_of(tools, "Read"), Some(json!({"type":"string"})));
        assert_eq!(schema_of(tools, "Re\\u0061d"), None);
    }

    #[test]
    fn nested_schemas_and_tricky_strings_do_not_confuse_the_scan() {
        // Keys named "name" below the top level, braces and quotes inside strings, every kind
        // of value: only each tool's own top-level "name" counts.
        let bash_schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "a } ] \" \\ { [ , : name"},
                "nested": {"type": "array", "items": {"type": "object", "properties": {"name": {"const": "Read"}}}},
                "n": {"enum": [0, -1.5, 2e10, 1E-3, true, false, null, [], {}, [[{}]], "x"]}
            }
        });
        let tools = json!([
            {"description": "{\"name\":\"Fake\"}", "input_schema": bash_schema, "name": "Bash"},
            {"name": "Read", "input_schema": {"type": "object"}, "extra": {"name": "Write"}}
        ])
        .to_string();
        assert!(scanned(&tools));
        assert_eq!(schema_of(&tools, "Bash"), Some(bash_schema));
        assert_eq!(schema_of(&tools, "Read"), Some(json!({"type": "object"})));
        assert_eq!(schema_of(&tools, "Fake"), None);
        assert_eq!(schema_of(&tools, "Write"), None);
        assert_eq!(schema_of(&tools, "name"), None);
    }

    #[test]
    fn pretty_printed_tools_are_scanned_too() {
        let tools = serde_json::to_string_pretty(&json!([
            {"name": "A", "input_schema": {"type": "object", "properties": {}}},
            {"name": "B"}
        ]))
        .expect("serialises");
        assert!(scanned(&tools));
        let many_keys = r#"[{"name":"A","input_schema":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":0}}]"#;
        assert!(scanned(many_keys));
        assert_eq!(
            schema_of(&tools, "A"),
            Some(json!({"type": "object", "properties": {}}))
        );
    }

    #[test]
    fn text_the_scan_cannot_vouch_for_goes_to_the_strict_parser() {
        // Valid for the strict parser, but outside what the scan certifies: still accepted.
        let deep = "[".repeat(110) + &"]".repeat(110);
        for schema in ["1e400000", "123e100", &deep] {
            let tools = format!(r#"[{{"name":"T","input_schema":{{"x":{schema}}}}}]"#);
            let catalog = Catalog::parse(&tools);
            let strict = json::parse_strict(&tools);
            assert_eq!(catalog.is_ok(), strict.is_ok(), "{tools}");
            if let Ok(catalog) = catalog {
                assert!(matches!(catalog.declarations, Declarations::Parsed(_)));
                assert!(catalog.get("T").expect("ok").is_some());
            }
        }
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
            r#"[{"name":"A"},{"name":"\u0041"}]"#,
            r#"[{"name":"A","name":"B"}]"#,
            r#"[{"name":"A"}] x"#,
            r#"[{"name":"A"},]"#,
            r#"[{"name":"A"}"#,
            "[{\"name\":\"A\u{1f}\"}]",
        ] {
            let failure = rejection(tools);
            assert_eq!(failure.code, "invalid_tools", "{tools}");
            assert_eq!(failure.status, 400);
            assert!(!failure.repairable);
        }
    }

    #[test]
    fn the_whole_list_is_checked_not_only_the_called_entry() {
        // Broken after, or inside another tool than, the one that is looked up: the list is
        // host input and is refused whole, exactly as when it was parsed whole.
        for tools in [
            r#"[{"name":"A","input_schema":{}},{"name":"B","input_schema":{"a":1,"a":2}}]"#,
            r#"[{"name":"A","input_schema":{"k":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"c":0}}}]"#,
            r#"[{"name":"A","input_schema":{}},{"name":"B","input_schema":{"a":[1,}}}]"#,
            r#"[{"name":"A","input_schema":{}},{"name":"B","description":"\x"}]"#,
            r#"[{"name":"A","input_schema":{}},{"name":"B","input_schema":{"a":01}}]"#,
            r#"[{"name":"A","input_schema":{}},{"name":"B","description":"\ud800"}]"#,
            r#"[{"name":"A","input_schema":{}},{"name":"B","input_schema":{"a":tru}}]"#,
            r#"[{"name":"A","input_schema":{}},{"name":"B"},{"name":"A"}]"#,
            r#"[{"name":"A","input_schema":{}},7]"#,
            r#"[{"name":"A","input_schema":{}},{"name":"B"}"#,
        ] {
            let failure = rejection(tools);
            let strict = parse_whole(tools)
                .err()
                .expect("the strict parser rejects it too");
            assert_eq!(failure, strict, "{tools}");
        }
    }

    #[test]
    fn messages_are_those_of_the_strict_parser() {
        assert_eq!(
            rejection(r#"[{"name":"Bash""#).message,
            "the tools list is invalid: not valid JSON (EOF while parsing an object at line 1 column 15)"
        );
        assert_eq!(
            rejection(r#"[{"name":"A"},{"name":"B"},{"name":"A"}]"#).message,
            "the tools list is invalid: tool 2 repeats the name \"A\""
        );
        assert_eq!(
            rejection(r#"[{"name":"A"},{"title":"B"}]"#).message,
            "the tools list is invalid: tool 1 has no string \"name\""
        );
    }

    #[test]
    fn scan_and_strict_parser_agree_on_mutated_lists() {
        // Byte-level mutations of a valid list: whenever the scan accepts, the strict parser
        // must accept the same text and know the same tools with the same declarations.
        let base = json!([
            {"name": "Bash", "input_schema": {"type": "object", "properties": {"c": {"type": "string", "enum": ["a\"b", 1.5e3, -0, null]}}}},
            {"name": "Re\u{e9}d", "description": "x\ny\\z", "input_schema": {"type": "object", "required": ["a"]}}
        ])
        .to_string();
        let alphabet: &[u8] = b"{}[]\":,\\ 0e-.tnu\x01\x1fa";
        let mut rng = XorShift(0x5eed_cafe);
        for _ in 0..20_000 {
            let mut bytes = base.clone().into_bytes();
            for _ in 0..1 + rng.next() % 3 {
                let at = rng.next() % bytes.len();
                match rng.next() % 3 {
                    0 => bytes[at] = alphabet[rng.next() % alphabet.len()],
                    1 => {
                        bytes.remove(at);
                    }
                    _ => bytes.insert(at, alphabet[rng.next() % alphabet.len()]),
                }
            }
            let Ok(text) = String::from_utf8(bytes) else {
                continue;
            };
            let Some(entries) = scan(&text) else {
                continue;
            };
            let Ok(Value::Array(items)) = json::parse_strict(&text) else {
                panic!("the scan accepted what the strict parser refuses: {text}");
            };
            assert_eq!(entries.len(), items.len(), "{text}");
            for (entry, item) in entries.iter().zip(&items) {
                assert_eq!(item.get("name"), Some(&json!(entry.name)), "{text}");
                let schema = entry.input_schema.map(|text| json::parse_strict(text).ok());
                assert_eq!(
                    schema,
                    item.get("input_schema").map(|s| Some(s.clone())),
                    "{text}"
                );
            }
        }
    }
}
