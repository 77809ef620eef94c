//! JSON string literals written straight into the output, byte for byte as `serde_json` writes
//! them.
//!
//! A reply's text can be a megabyte, and it is the one large thing this crate writes.
//! `serde_json` looks at every byte through a table and hands each run of plain bytes to its
//! writer; this writer instead finds the next byte that needs an escape eight bytes at a time
//! and copies the plain run before it in one `push_str`. Prose needs an escape every few dozen
//! bytes (line breaks, quotes), so runs are short but still several words long.
//!
//! The same word-at-a-time scan, for `"` and `\` alone, lets the tool input's compaction skip
//! over the text inside JSON strings.
//!
//! The output must not differ from `serde_json`'s in any byte: the unit tests compare the two
//! on every ASCII byte at every offset within a word and on long mixed texts. `serde_json`
//! escapes `"`, `\` and the control characters below U+0020 (as `\b`, `\t`, `\n`, `\f`, `\r`,
//! or `\u00XX` with lowercase hex digits) and writes everything else as it is: `/`, DEL and
//! non-ASCII characters included.

/// Appends `text` to `out` as a JSON string literal, quotes included.
pub(crate) fn push_json_string(out: &mut String, text: &str) {
    // The literal is at least the text and its quotes; escapes may need more, which `String`
    // grows for, but the common case allocates at most once.
    out.reserve(text.len().saturating_add(2));
    out.push('"');
    let bytes = text.as_bytes();
    let mut run_start = 0;
    while let Some(at) = next_escape(bytes, run_start) {
        // `at` is the index of an ASCII byte and `run_start` is 0 or one past an ASCII byte,
        // so both are character boundaries and `get` always succeeds; `get` rather than
        // indexing keeps this function free of any panicking path.
        out.push_str(text.get(run_start..at).unwrap_or_default());
        push_escape(out, bytes.get(at).copied().unwrap_or_default());
        run_start = at + 1;
    }
    out.push_str(text.get(run_start..).unwrap_or_default());
    out.push('"');
}

/// The two characters `\x` that stand for a byte, or `u` where the byte is written `\u00XX`;
/// 0 for bytes written as they are. Same table as `serde_json`'s, so the same choices.
const SHORT_ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

fn push_escape(out: &mut String, byte: u8) {
    let short = SHORT_ESCAPE[usize::from(byte)];
    out.push('\\');
    if short == b'u' {
        out.push_str("u00");
        out.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(HEX_DIGITS[usize::from(byte & 0x0f)]));
    } else {
        out.push(char::from(short));
    }
}

/// Whether `serde_json` escapes this byte.
fn needs_escape(byte: u8) -> bool {
    SHORT_ESCAPE[usize::from(byte)] != 0
}

/// Bytes 0x01 in every lane of a word; multiplied by a byte, that byte in every lane.
const LANES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// A word whose lowest flagged lane (the high bit of a byte, little-endian) is the first byte
/// of `word` that needs an escape; 0 when no byte does.
///
/// Two tests, eight lanes at once, without branches:
/// - `y = byte ^ 0x02` maps 0x00..=0x1f onto itself and `"` (0x22) onto 0x20, so "control
///   character or quote" is `y < 0x21`;
/// - `z = byte ^ b'\\'` is zero exactly for a backslash.
///
/// "Lane below n" is `(v - n·LANES) & !v & HIGH_BITS`. A lane at or above 0x80 never flags
/// (its `!v` high bit is clear), so non-ASCII bytes pass. The subtraction's borrow can only
/// start in a lane that really is below n, so lanes above the first true one may flag
/// falsely, but the lowest flagged lane is always right, and only that one is used.
fn escape_lanes(word: u64) -> u64 {
    let y = word ^ (LANES * 0x02);
    let control_or_quote = y.wrapping_sub(LANES * 0x21) & !y;
    let z = word ^ (LANES * u64::from(b'\\'));
    let backslash = z.wrapping_sub(LANES) & !z;
    (control_or_quote | backslash) & HIGH_BITS
}

/// The index of the first byte at or after `from` that needs an escape.
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let (words, tail) = rest.as_chunks::<8>();
    for (number, word) in words.iter().enumerate() {
        let flagged = escape_lanes(u64::from_le_bytes(*word));
        if flagged != 0 {
            // Little-endian: lane k is bits 8k..8k+8, so the lowest flagged bit names the lane.
            let lane = (flagged.trailing_zeros() / 8) as usize;
            return Some(from + number * 8 + lane);
        }
    }
    let tail_start = from + words.len() * 8;
    tail.iter()
        .position(|&byte| needs_escape(byte))
        .map(|offset| tail_start + offset)
}

/// The index of the first `"` or `\` at or after `from`: where a JSON string ends or an escape
/// inside it starts. Lets the tool input's compaction skip a string's plain text in words.
pub(crate) fn next_quote_or_backslash(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let (words, tail) = rest.as_chunks::<8>();
    for (number, word) in words.iter().enumerate() {
        let word = u64::from_le_bytes(*word);
        // "Lane is zero" for `byte ^ b'"'` and for `byte ^ b'\\'`; the same borrow argument
        // as in `escape_lanes` makes the lowest flagged lane exact.
        let quote = word ^ (LANES * u64::from(b'"'));
        let backslash = word ^ (LANES * u64::from(b'\\'));
        let flagged = ((quote.wrapping_sub(LANES) & !quote)
            | (backslash.wrapping_sub(LANES) & !backslash))
            & HIGH_BITS;
        if flagged != 0 {
            let lane = (flagged.trailing_zeros() / 8) as usize;
            return Some(from + number * 8 + lane);
        }
    }
    let tail_start = from + words.len() * 8;
    tail.iter()
        .position(|&byte| byte == b'"' || byte == b'\\')
        .map(|offset| tail_start + offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literal(text: &str) -> String {
        let mut out = String::new();
        push_json_string(&mut out, text);
        out
    }

    fn assert_like_serde(text: &str) {
        let expected = serde_json::to_string(text).unwrap();
        assert_eq!(literal(text), expected, "text {text:?}");
    }

    #[test]
    fn every_ascii_byte_at_every_lane_and_in_the_tail() {
        // Lengths 1..=24 put the byte in each lane of the first words and in the tail that
        // is scanned byte by byte.
        for byte in 0u8..=0x7f {
            let special = char::from(byte);
            for len in 1..=24 {
                for at in 0..len {
                    let text: String = (0..len)
                        .map(|i| if i == at { special } else { 'a' })
                        .collect();
                    assert_like_serde(&text);
                }
            }
        }
    }

    #[test]
    fn lanes_next_to_a_flagged_lane_are_not_confused() {
        // A borrow out of a flagged lane must not hide or invent the first escape: bytes just
        // above each threshold right after and right before an escaped byte.
        for first in [0x00u8, 0x1f, b'"', b'\\', 0x01] {
            for second in [0x20u8, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x00, 0x1f] {
                for gap in 0..10 {
                    let mut text = String::from("xy");
                    text.push(char::from(first));
                    text.extend(std::iter::repeat_n('z', gap));
                    text.push(char::from(second));
                    text.push_str("tail text");
                    assert_like_serde(&text);
                }
            }
        }
    }

    #[test]
    fn control_characters_use_the_short_forms_and_lowercase_hex() {
        let all: String = (0u8..0x20).map(char::from).collect();
        assert_eq!(
            literal(&all),
            "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\
             \\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\
             \\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\""
        );
        assert_like_serde(&all);
    }

    #[test]
    fn slash_del_and_non_ascii_are_written_as_they_are() {
        for text in [
            "</script>",
            "\u{7f}",
            "é中✓😀",
            "\u{2028}\u{2029}",
            "\u{80}\u{ffff}",
        ] {
            assert_eq!(literal(text), format!("\"{text}\""));
            assert_like_serde(text);
        }
    }

    #[test]
    fn multibyte_characters_around_escapes() {
        for text in [
            "é\"é",
            "中\n中\n中",
            "😀\\😀",
            "ab😀\u{1}cdefgh😀\"",
            "\"é",
            "é\"",
            "ééééééé\té",
        ] {
            assert_like_serde(text);
        }
    }

    #[test]
    fn empty_and_plain_runs() {
        assert_eq!(literal(""), "\"\"");
        let long = "plain words only ".repeat(10_000);
        assert_like_serde(&long);
        assert_like_serde(&"\"".repeat(1_000));
        assert_like_serde(&"\\\n".repeat(1_000));
    }

    #[test]
    fn appends_to_what_is_already_there() {
        let mut out = String::from("{\"k\":");
        push_json_string(&mut out, "v\n");
        assert_eq!(out, "{\"k\":\"v\\n\"");
    }

    #[test]
    fn pseudo_random_mixed_texts() {
        // A fixed generator (no dependency): characters drawn from a pool that mixes plain
        // ASCII, every escaped class and multi-byte characters, at many lengths.
        let pool: Vec<char> =
            "abc XYZ 019 /<>{}[]\"\\\n\r\t\u{0}\u{8}\u{b}\u{c}\u{1f}\u{7f}é中😀\u{2028}"
                .chars()
                .collect();
        let mut state: u32 = 0x9e37_79b9;
        for round in 0..2_000 {
            let len = round % 97;
            let text: String = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    pool[state as usize % pool.len()]
                })
                .collect();
            assert_like_serde(&text);
        }
    }

    #[test]
    fn quote_or_backslash_scan_matches_a_plain_search() {
        // Every byte value at every lane and in the tail, with bytes on either side that a
        // borrow could confuse.
        for special in 0u8..=0xff {
            for len in 1..=20 {
                for at in 0..len {
                    let text: Vec<u8> = (0..len)
                        .map(|i| {
                            if i == at {
                                special
                            } else {
                                [0x23, 0x5d, 0x00, 0x21][i % 4]
                            }
                        })
                        .collect();
                    for from in 0..=len {
                        let expected = text
                            .iter()
                            .skip(from)
                            .position(|&b| b == b'"' || b == b'\\')
                            .map(|offset| from + offset);
                        assert_eq!(
                            next_quote_or_backslash(&text, from),
                            expected,
                            "{text:?} from {from}"
                        );
                    }
                }
            }
        }
        assert_eq!(next_quote_or_backslash(b"abc", 9), None);
    }

    #[test]
    fn the_scan_finds_each_escape_in_order() {
        let text = b"0123456\"89abcdef\\hijklmnopqrstu\nw";
        let mut found = Vec::new();
        let mut from = 0;
        while let Some(at) = next_escape(text, from) {
            found.push(at);
            from = at + 1;
        }
        assert_eq!(found, [7, 16, 31]);
        assert_eq!(next_escape(text, text.len()), None);
        assert_eq!(next_escape(text, text.len() + 5), None);
    }
}
