//! Text scans the transforms share: finding where a run of plain JSON string text ends, and
//! counting characters. Prompts and tool lists are long texts whose line breaks (escapes, in
//! JSON) are a few dozen bytes apart, so these scans run on every byte of a request.
//!
//! A component built with wasm's 128-bit SIMD (the project's components are) scans sixteen bytes
//! per step with it; elsewhere, and for what is left over, eight bytes per step with integer
//! arithmetic, which is as fast in wasm as natively (the standard library's word-at-a-time loops
//! work on four-byte words there).

const ONES: u64 = u64::from_le_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);

/// The position of the first byte of `bytes` that ends a run of plain JSON string text: a quote,
/// a backslash or a control character (below 0x20). `None` when there is none.
pub fn plain_run(bytes: &[u8]) -> Option<usize> {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    let mut at = match wide::plain_run(bytes) {
        Ok(found) => return Some(found),
        Err(scanned) => scanned,
    };
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
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
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    let (bytes, mut continuations) = wide::count_continuations(text.as_bytes());
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    let (bytes, mut continuations) = (text.as_bytes(), 0);
    let mut chunks = bytes.chunks_exact(8);
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
    text.len() - continuations
}

/// The same scans sixteen bytes at a time with wasm's 128-bit SIMD, when the component is built
/// with it: a lane comparison per kind of byte instead of the integer borrow tricks, and half the
/// loop back edges, each of which the runtime also checks for the call's deadline.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wide {
    use core::arch::wasm32::{
        i8x16_bitmask, i8x16_eq, i8x16_lt, i8x16_splat, u8x16, u8x16_lt, u8x16_splat, v128, v128_or,
    };

    fn load(chunk: &[u8]) -> Option<v128> {
        let lanes: &[u8; 16] = chunk.try_into().ok()?;
        let [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p] = *lanes;
        Some(u8x16(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p))
    }

    /// `Ok(position)` of the first special byte among the whole sixteen-byte chunks of
    /// `bytes`, or `Err(scanned)`: how many bytes were scanned without finding one.
    pub(super) fn plain_run(bytes: &[u8]) -> Result<usize, usize> {
        let (quote, backslash, space) = (
            i8x16_splat(b'"' as i8),
            i8x16_splat(b'\\' as i8),
            u8x16_splat(0x20),
        );
        let mut at = 0;
        while let Some(lanes) = bytes.get(at..at + 16).and_then(load) {
            let hits = v128_or(
                v128_or(i8x16_eq(lanes, quote), i8x16_eq(lanes, backslash)),
                u8x16_lt(lanes, space),
            );
            let mask = i8x16_bitmask(hits);
            if mask != 0 {
                return Ok(at + mask.trailing_zeros() as usize);
            }
            at += 16;
        }
        Err(at)
    }

    /// The continuation bytes among the whole sixteen-byte chunks of `bytes`, and the bytes
    /// after them (fewer than sixteen) for the caller to count.
    pub(super) fn count_continuations(bytes: &[u8]) -> (&[u8], usize) {
        // A continuation byte is 0x80..=0xBF: as a signed byte, below -64.
        let below = i8x16_splat(-64);
        let mut chunks = bytes.chunks_exact(16);
        let mut continuations = 0;
        for lanes in (&mut chunks).filter_map(load) {
            continuations += i8x16_bitmask(i8x16_lt(lanes, below)).count_ones() as usize;
        }
        (chunks.remainder(), continuations)
    }
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
