//! Rust source read as text, for the checks of `cargo xtask modules`: comments and literals
//! blanked out, test-only items removed, and the functions found with their length.
//!
//! Every function here keeps the text's lines where they were (what it blanks becomes spaces,
//! newlines stay), so a line number in the result is the line number in the file. The reading
//! is lexical, not a parse: it knows comments (nested block comments too), string, raw string,
//! byte string and character literals, and tells a character literal from a lifetime. That is
//! all the checks need, it needs no compiler, and it runs in milliseconds.

/// `text` with every comment and the contents of every string and character literal replaced
/// by spaces (newlines kept), so that no brace, `fn` or path inside them is seen as code.
pub(crate) fn mask(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut at = 0;
    while at < bytes.len() {
        let end = match literal_or_comment_end(bytes, at) {
            Some(end) => end,
            None => {
                at += 1;
                continue;
            }
        };
        for byte in &mut out[at..end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
        at = end;
    }
    // Only ASCII bytes were replaced, by ASCII spaces, and only whole literals and comments:
    // a multi-byte character is either untouched or blanked entirely.
    String::from_utf8(out).unwrap_or_else(|error| {
        String::from_utf8_lossy(error.as_bytes())
            .chars()
            .map(|c| if c.is_ascii() { c } else { ' ' })
            .collect()
    })
}

/// Where the comment or literal starting at `at` ends (exclusive); `None` when none starts
/// there.
fn literal_or_comment_end(bytes: &[u8], at: usize) -> Option<usize> {
    let rest = &bytes[at..];
    let after_identifier = at > 0 && is_identifier_byte(bytes[at - 1]);
    if rest.starts_with(b"//") {
        return Some(find_from(bytes, at, b"\n").unwrap_or(bytes.len()));
    }
    if rest.starts_with(b"/*") {
        return Some(block_comment_end(bytes, at));
    }
    if !after_identifier {
        // `r"..."`, `r#"..."#`, `br"..."`: no escapes, ended by the quote and as many `#`.
        let raw_start = if rest.starts_with(b"br") { 2 } else { 1 };
        if rest.first() == Some(&b'r') || rest.starts_with(b"br") {
            let hashes = rest[raw_start..]
                .iter()
                .take_while(|&&byte| byte == b'#')
                .count();
            if rest.get(raw_start + hashes) == Some(&b'"') {
                let open = at + raw_start + hashes + 1;
                let mut close = vec![b'"'];
                close.extend(std::iter::repeat_n(b'#', hashes));
                return Some(
                    find_from(bytes, open, &close).map_or(bytes.len(), |end| end + close.len()),
                );
            }
        }
        if rest.starts_with(b"b\"") {
            return Some(quoted_end(bytes, at + 2, b'"'));
        }
        if rest.starts_with(b"b'") {
            return Some(quoted_end(bytes, at + 2, b'\''));
        }
    }
    match rest.first() {
        Some(b'"') => Some(quoted_end(bytes, at + 1, b'"')),
        // A character literal (`'x'`, `'\n'`, `'\u{7f}'`), not a lifetime (`'a`).
        Some(b'\'') if rest.get(1) == Some(&b'\\') => Some(quoted_end(bytes, at + 1, b'\'')),
        Some(b'\'') => {
            let width = rest.get(1).map_or(1, |&first| utf8_width(first)).max(1);
            (rest.get(1 + width) == Some(&b'\'')).then_some(at + 2 + width)
        }
        _ => None,
    }
}

/// The end of a literal whose contents start at `from`, with `\` escapes, closed by `quote`.
fn quoted_end(bytes: &[u8], from: usize, quote: u8) -> usize {
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            byte if byte == quote => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// The end of the block comment at `at`; block comments nest in Rust.
fn block_comment_end(bytes: &[u8], at: usize) -> usize {
    let mut depth = 0usize;
    let mut at = at;
    while at < bytes.len() {
        if bytes[at..].starts_with(b"/*") {
            depth += 1;
            at += 2;
        } else if bytes[at..].starts_with(b"*/") {
            depth -= 1;
            at += 2;
            if depth == 0 {
                return at;
            }
        } else {
            at += 1;
        }
    }
    bytes.len()
}

fn find_from(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|offset| from + offset)
}

fn utf8_width(first: u8) -> usize {
    match first {
        0xf0.. => 4,
        0xe0.. => 3,
        0xc0.. => 2,
        _ => 1,
    }
}

fn is_identifier_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// Masked text (see [`mask`]) without its test-only items: every item under `#[cfg(test)]`
/// (a `mod tests { ... }`, a `mod tests;`, a helper module or function, a `use`) is blanked
/// from its attribute to its end, newlines kept.
pub(crate) fn without_test_items(masked: &str) -> String {
    let mut out = masked.as_bytes().to_vec();
    let mut from = 0;
    while let Some(at) = find_from(masked.as_bytes(), from, b"#[cfg(test)]") {
        let end = item_end(masked.as_bytes(), at + "#[cfg(test)]".len());
        for byte in &mut out[at..end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
        from = end;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The end (exclusive) of the item whose text continues at `from`: its first `;` outside
/// parentheses and brackets, or the brace that closes its first `{`.
fn item_end(bytes: &[u8], from: usize) -> usize {
    let mut nesting = 0usize;
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'(' | b'[' => nesting += 1,
            b')' | b']' => nesting = nesting.saturating_sub(1),
            b';' if nesting == 0 => return at + 1,
            b'{' if nesting == 0 => {
                return matching_brace(bytes, at).map_or(bytes.len(), |end| end + 1)
            }
            _ => {}
        }
        at += 1;
    }
    bytes.len()
}

/// The index of the `}` that closes the `{` at `open`.
fn matching_brace(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, &byte) in bytes[open..].iter().enumerate() {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + offset);
                }
            }
            _ => {}
        }
    }
    None
}

/// A function with a body, as [`functions`] finds it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Function {
    pub(crate) name: String,
    /// The line of `fn` (1-based).
    pub(crate) line: usize,
    /// Lines from `fn` to the closing brace, both included.
    pub(crate) lines: usize,
}

/// Every function with a body in masked text (see [`mask`]): `fn name` up to its closing
/// brace. A function without a body (a trait's required method) is none; a function inside
/// another is found as well as the one around it.
pub(crate) fn functions(masked: &str) -> Vec<Function> {
    let bytes = masked.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = find_from(bytes, from, b"fn") {
        from = at + 2;
        let keyword = (at == 0 || !is_identifier_byte(bytes[at - 1]))
            && bytes
                .get(at + 2)
                .is_some_and(|byte| byte.is_ascii_whitespace());
        if !keyword {
            continue;
        }
        let name_start = at
            + 2
            + bytes[at + 2..]
                .iter()
                .take_while(|byte| byte.is_ascii_whitespace())
                .count();
        let name_length = bytes[name_start..]
            .iter()
            .take_while(|&&byte| is_identifier_byte(byte))
            .count();
        // `fn(u8) -> u8` is a type, and `fn $name` a macro's template.
        if name_length == 0 {
            continue;
        }
        let end = item_end(bytes, name_start);
        if bytes.get(end - 1) != Some(&b'}') {
            continue;
        }
        let line = line_of(bytes, at);
        found.push(Function {
            name: masked[name_start..name_start + name_length].to_owned(),
            line,
            lines: line_of(bytes, end - 1) - line + 1,
        });
    }
    found
}

fn line_of(bytes: &[u8], at: usize) -> usize {
    bytes[..at].iter().filter(|&&byte| byte == b'\n').count() + 1
}

/// The doc comment (`///` lines) of the item whose first line is `line` (1-based) in the
/// original `text`, reading up over the attributes between them.
pub(crate) fn doc_above(text: &str, line: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut doc = Vec::new();
    for above in lines[..line.saturating_sub(1).min(lines.len())]
        .iter()
        .rev()
    {
        let above = above.trim_start();
        if let Some(comment) = above.strip_prefix("///") {
            doc.push(comment.trim());
        } else if !above.starts_with("#[") {
            break;
        }
    }
    doc.reverse();
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_strings_and_characters_are_blanked_lifetimes_and_lines_are_kept() {
        let text = "fn a<'x>(s: &'x str) -> char { // {\n    let _ = \"{ fn b() {\";\n    \
                    let _ = r#\"}\"#; /* { /* } */ } */ '{' }\n";
        let masked = mask(text);
        assert_eq!(masked.len(), text.len());
        assert_eq!(masked.lines().count(), text.lines().count());
        assert!(
            masked.contains("<'x>") && masked.contains("&'x str"),
            "{masked}"
        );
        assert_eq!(masked.matches('{').count(), 1, "{masked}");
        assert_eq!(masked.matches('}').count(), 1, "{masked}");
        assert!(!masked.contains("fn b"), "{masked}");
    }

    #[test]
    fn test_items_are_removed_whatever_their_name_or_form() {
        let text = "use a::b;\n#[cfg(test)]\nuse crate::x;\nfn keep() {}\n#[cfg(test)]\n\
                    pub(crate) mod reference {\n    use super::Json;\n    fn f() { {} }\n}\n\
                    fn also() {}\n#[cfg(test)]\nmod tests;\n";
        let stripped = without_test_items(&mask(text));
        assert_eq!(stripped.lines().count(), text.lines().count());
        for kept in ["use a::b;", "fn keep()", "fn also()"] {
            assert!(stripped.contains(kept), "{kept} in {stripped}");
        }
        for gone in ["crate::x", "reference", "super::Json", "mod tests"] {
            assert!(!stripped.contains(gone), "{gone} in {stripped}");
        }
    }

    #[test]
    fn functions_are_measured_from_fn_to_their_closing_brace() {
        let text = "trait T {\n    fn required(&self);\n    fn provided(&self) {\n    }\n}\n\
                    type F = fn(u8) -> u8;\n\
                    /// State machine: a doc.\n#[inline]\nasync fn outer(\n    a: [u8; 2],\n) \
                    -> u8 {\n    fn inner() {}\n    a[0]\n}\n";
        let masked = mask(text);
        let found = functions(&masked);
        let summary: Vec<(&str, usize, usize)> = found
            .iter()
            .map(|f| (f.name.as_str(), f.line, f.lines))
            .collect();
        assert_eq!(
            summary,
            [("provided", 3, 2), ("outer", 9, 6), ("inner", 12, 1)]
        );
        assert_eq!(doc_above(text, 9), ["State machine: a doc."]);
        assert!(doc_above(text, 3).is_empty());
    }
}
