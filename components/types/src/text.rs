//! Text scans the transforms share: finding where a run of plain JSON string text ends, and
//! counting characters. Both read eight bytes at a time with integer arithmetic, as fast in wasm
//! as natively (the standard library's word-at-a-time loops work on four-byte words there):
//! prompts and tool lists are long texts whose line breaks (escapes, in JSON) are a few dozen
//! bytes apart.

const ONES: u64 = u64::from_le_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);

/// The position of the first byte of `bytes` that ends a run of plain JSON string text: a quote,
/// a backslash or a control character (below 0x20). `None` when there is none.
pub fn plain_run(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    /// Flags (high bit) the bytes of `word` below `n` (n <= 0x80). A flag can be spurious only
    /// above a genuine one (a borrow carries upwards), so the lowest flag is always exact.
    const fn below(word: u64, n: u8) -> u64 {
        word.wrapping_sub(ONES * n as u64) & !word & HIGHS
    }
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        let hits = below(word ^ (ONES * u64::from(b'"')), 1)
            | below(word ^ (ONES * u64::from(b'\\')), 1)
            | below(word, 0x20);
        if hits != 0 {
            // Little endian: the lowest flagged byte is the first one in memory.
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes
        .get(at..)?
        .iter()
        .position(|&byte| byte == b'"' || byte == b'\\' || byte < 0x20)
        .map(|run| at + run)
}

/// `text.chars().count()`: a character is a byte that is not a UTF-8 continuation byte
/// (`0b10xx_xxxx`).
pub fn count_chars(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut chunks = bytes.chunks_exact(8);
    let mut continuations = 0;
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        // Bit 7 set and bit 6 clear, moved to bit 7 of each byte.
        continuations += (word & !(word << 1) & HIGHS).count_ones() as usize;
    }
    continuations += chunks
        .remainder()
        .iter()
        .filter(|&&byte| byte & 0xC0 == 0x80)
        .count();
    bytes.len() - continuations
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_runs_stop_at_the_first_special_byte_wherever_it_is() {
        for len in 0..70 {
            let plain = "aé~\u{7f}"
                .repeat(len)
                .chars()
                .take(len)
                .collect::<String>();
            assert_eq!(plain_run(plain.as_bytes()), None, "{plain:?}");
            for special in ["\"", "\\", "\n", "\u{0}", "\u{1f}"] {
                let text = format!("{plain}{special}x\"");
                assert_eq!(plain_run(text.as_bytes()), Some(plain.len()), "{text:?}");
            }
        }
        // Bytes next to the special ones, and non-ASCII, never end a run.
        let near = [b' ', b'!', b'#', b'[', b']', 0x7f, 0x80, 0xa0, 0xff];
        assert_eq!(plain_run(&near.repeat(5)), None);
    }

    #[test]
    fn count_chars_matches_the_standard_library() {
        let samples = ["", "a", "é", "abcdefgh", "✓ 𝄞 é ü ß and ascii", "𝄞𝄞𝄞𝄞𝄞𝄞𝄞𝄞𝄞"];
        for sample in samples {
            for start in 0..sample.len() {
                if let Some(text) = sample.get(start..) {
                    assert_eq!(count_chars(text), text.chars().count(), "{text:?}");
                }
            }
        }
        let long = "ab\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}\u{10ffff}".repeat(37);
        assert_eq!(count_chars(&long), long.chars().count());
    }
}
