#![no_main]
//! The egress guard's request-head reader: the first byte chooses where the bytes are cut in
//! two. Reading them in two steps must give the one-shot answer (a refusal made early is never
//! one that more bytes could have avoided), and an accepted head is well framed.

use devin_bridge_guard::fuzzing::request_head;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let cut = usize::from(control) * input.len() / 256;
    let whole = request_head(&[input]);
    let split = request_head(&[&input[..cut], &input[cut..]]);
    assert_eq!(whole, split, "cut at {cut}");
    if let Ok(Some(head)) = whole {
        let bytes = &input[..head.end];
        assert!(bytes.ends_with(b"\r\n\r\n"));
        // The head is the first blank line's end.
        assert_eq!(
            bytes.windows(4).position(|w| w == b"\r\n\r\n"),
            Some(head.end - 4)
        );
        for (i, b) in bytes.iter().enumerate() {
            assert!(*b != 0 && *b != 0x7f, "control byte in an accepted head");
            if *b == b'\n' {
                assert_eq!(
                    bytes.get(i.wrapping_sub(1)),
                    Some(&b'\r'),
                    "bare LF accepted"
                );
            }
            if *b == b'\r' {
                assert_eq!(bytes.get(i + 1), Some(&b'\n'), "bare CR accepted");
            }
        }
        assert!(!head.method.is_empty());
        assert!(head
            .method
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_uppercase()));
        assert!(head.method.bytes().all(|b| b.is_ascii_graphic()));
        assert!(!head.target.is_empty() && !head.target.contains([' ', '\r', '\n']));
        assert!(head.names.len() <= 64);
        assert!(head
            .names
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic())));
    }
});
