#![no_main]
//! The egress guard's TLS readers: the first ClientHello (`HelloParser`), the later client
//! records (`ClientWatch`) and the server's first messages (`ServerWatch`). The first byte
//! chooses where the input is cut in two (incremental parsing must equal one-shot parsing) and
//! whether the server's ServerHello counts as seen; the rest is what the client sends.

use devin_bridge_guard::fuzzing::{
    normalize_host, parse_client_hello_body, ClientWatch, HelloError, HelloParser, ServerWatch,
};
use libfuzzer_sys::fuzz_target;

const CAP: usize = 64 * 1024;
const HOST: &str = "api.devin.ai";

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let cut = usize::from(control) * input.len() / 256;
    first_hello(input, cut);
    later_records(input, cut, control & 1 == 1);
    server_records(input, cut);
});

fn first_hello(input: &[u8], cut: usize) {
    let whole = HelloParser::new(CAP).advance(input);
    let mut parser = HelloParser::new(CAP);
    let split = match parser.advance(&input[..cut]) {
        Ok(None) => parser.advance(input),
        other => other,
    };
    // The byte cap is judged on what has arrived so far, so only it may differ.
    if whole != Err(HelloError::TooLarge) && split != Err(HelloError::TooLarge) {
        assert_eq!(whole, split, "cut at {cut}");
    }
    if let Ok(Some(hello)) = whole {
        assert!(!hello.sni.is_empty() && hello.sni.bytes().all(|b| b.is_ascii_graphic()));
        if let Ok(name) = normalize_host(&hello.sni) {
            assert_eq!(normalize_host(&name), Ok(name.clone()));
        }
    }
    if let Ok(Some(_)) = split {
        assert!(parser.consumed() <= input.len());
    }
}

/// Every ClientHello in the handshake records of `released` names `HOST`.
fn released_hellos_name_the_host(released: &[u8]) {
    let mut handshake = Vec::new();
    let mut rest = released;
    while let Some(&[ctype, _, _, hi, lo]) = rest.get(..5) {
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        let payload = &rest[5..5 + len];
        if ctype == 0x16 {
            handshake.extend_from_slice(payload);
        }
        rest = &rest[5 + len..];
    }
    assert!(rest.is_empty(), "a partial record was released");
    let mut messages = &handshake[..];
    while let Some(&[msg_type, a, b, c]) = messages.get(..4) {
        let len = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
        let body = &messages[4..4 + len];
        if msg_type == 1 {
            let hello = parse_client_hello_body(body).expect("a released ClientHello parses");
            assert_eq!(normalize_host(&hello.sni).as_deref(), Ok(HOST));
        }
        messages = &messages[4 + len..];
    }
    assert!(
        messages.is_empty(),
        "a partial handshake message was released"
    );
}

fn later_records(input: &[u8], cut: usize, server_hello_seen: bool) {
    let mut watch = ClientWatch::new(HOST, CAP);
    let mut out = Vec::new();
    let mut failed = false;
    for chunk in [&input[..cut], &input[cut..]] {
        if watch.push(chunk, server_hello_seen, &mut out).is_err() {
            failed = true;
            break;
        }
    }
    // Released bytes are the client's own, in order, and nothing is invented.
    assert_eq!(&out[..], &input[..out.len()]);
    if !watch.is_done() {
        released_hellos_name_the_host(&out);
        if !failed {
            assert!(input.len() - out.len() <= CAP);
        }
    }
}

fn server_records(input: &[u8], cut: usize) {
    let mut whole = ServerWatch::new();
    let whole_outcome = whole.observe(input);
    let mut split = ServerWatch::new();
    let split_outcome = split
        .observe(&input[..cut])
        .or_else(|| split.observe(&input[cut..]));
    assert_eq!(whole_outcome, split_outcome);
    assert_eq!(whole.retries(), split.retries());
}
