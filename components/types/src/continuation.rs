//! Where a request continues an earlier one of its conversation, found by comparing bytes.
//!
//! A client that continues a conversation sends the earlier request again with new messages
//! at the end of its `messages` array. When the later request repeats the earlier one's bytes
//! up to the end of some of its messages, and ends with the earlier one's bytes after its last
//! message, only what lies between is new: the serializer parses that part alone and takes the
//! rest from what it said of the earlier request. Comparing bytes decides nothing about their
//! meaning; a continuation that is not a list of messages is the serializer's to reject.

use std::ops::Range;

/// The part of a later request that is new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continuation {
    /// The earlier request's leading messages that the later one repeats byte for byte.
    pub messages: usize,
    /// Where, in the later request, the rest of its `messages` array lies: after the last
    /// repeated message, up to the bytes it shares with the end of the earlier request.
    pub range: Range<usize>,
}

/// Bytes compared at a time before the first difference is looked for byte by byte.
const CHUNK: usize = 4096;

/// The continuation of `later` after `earlier`, whose messages end at `message_ends` (byte
/// offsets just after each message, increasing): none unless `later` repeats at least the
/// first message and ends with the bytes that follow the earlier request's last message.
pub fn find(earlier: &str, message_ends: &[u32], later: &str) -> Option<Continuation> {
    let last = usize::try_from(*message_ends.last()?).ok()?;
    let tail = earlier.as_bytes().get(last..)?;
    if !later.as_bytes().ends_with(tail) {
        return None;
    }
    let new_end = later.len() - tail.len();
    let shared = common_prefix(earlier.as_bytes(), later.as_bytes()).min(new_end);
    let messages =
        message_ends.partition_point(|&end| usize::try_from(end).is_ok_and(|end| end <= shared));
    let start = usize::try_from(*message_ends.get(messages.checked_sub(1)?)?).ok()?;
    later.get(start..new_end)?;
    Some(Continuation {
        messages,
        range: start..new_end,
    })
}

/// How many leading bytes `a` and `b` share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let mut at = 0;
    // Whole chunks compare as one `memcmp` each; only the chunk that differs is walked.
    while at + CHUNK <= len && a[at..at + CHUNK] == b[at..at + CHUNK] {
        at += CHUNK;
    }
    at + a[at..]
        .iter()
        .zip(&b[at..])
        .take_while(|(x, y)| x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EARLIER: &str = r#"{"messages":[{"a":1},{"b":2}],"tools":[]}"#;

    fn ends() -> Vec<u32> {
        vec![
            EARLIER.find("},{").expect("first") as u32 + 1,
            EARLIER.find("}]").expect("second") as u32 + 1,
        ]
    }

    #[test]
    fn appended_messages_are_the_continuation() {
        let later = r#"{"messages":[{"a":1},{"b":2},{"c":3}],"tools":[]}"#;
        let found = find(EARLIER, &ends(), later).expect("continues");
        assert_eq!(found.messages, 2);
        assert_eq!(&later[found.range], r#",{"c":3}"#);
    }

    #[test]
    fn a_changed_message_is_part_of_the_continuation() {
        let later = r#"{"messages":[{"a":1},{"b":9},{"c":3}],"tools":[]}"#;
        let found = find(EARLIER, &ends(), later).expect("continues");
        assert_eq!(found.messages, 1);
        assert_eq!(&later[found.range], r#",{"b":9},{"c":3}"#);
    }

    #[test]
    fn no_continuation_without_the_first_message_or_the_same_end() {
        let first_changed = r#"{"messages":[{"a":0},{"b":2},{"c":3}],"tools":[]}"#;
        assert_eq!(find(EARLIER, &ends(), first_changed), None);
        let end_changed = r#"{"messages":[{"a":1},{"b":2},{"c":3}],"tools":[1]}"#;
        assert_eq!(find(EARLIER, &ends(), end_changed), None);
        assert_eq!(find(EARLIER, &[], EARLIER), None);
    }

    #[test]
    fn the_same_request_again_has_an_empty_continuation() {
        let found = find(EARLIER, &ends(), EARLIER).expect("continues");
        assert_eq!(found.messages, 2);
        assert!(found.range.is_empty());
    }

    #[test]
    fn a_request_without_the_last_message_repeats_only_the_first() {
        let later = r#"{"messages":[{"a":1}],"tools":[]}"#;
        let found = find(EARLIER, &ends(), later).expect("continues");
        assert_eq!(found.messages, 1);
        assert!(found.range.is_empty());
        // Dropping the first message too leaves nothing repeated.
        assert_eq!(
            find(EARLIER, &ends(), r#"{"messages":[],"tools":[]}"#),
            None
        );
    }

    #[test]
    fn marks_out_of_range_or_inside_a_character_find_nothing() {
        assert_eq!(find(EARLIER, &[u32::MAX], EARLIER), None);
        let earlier = "[\"é\"]";
        // Offset 3 falls inside the two bytes of `é`.
        assert_eq!(find(earlier, &[3], earlier), None);
    }

    #[test]
    fn common_prefix_crosses_chunks() {
        let a = "x".repeat(3 * CHUNK + 17);
        let mut b = a.clone().into_bytes();
        b[2 * CHUNK + 5] = b'y';
        assert_eq!(common_prefix(a.as_bytes(), &b), 2 * CHUNK + 5);
        assert_eq!(common_prefix(a.as_bytes(), a.as_bytes()), a.len());
        assert_eq!(common_prefix(b"abc", b"ab"), 2);
    }
}
