//! A recording proxy between Claude Code and the bridge: every byte goes through unchanged in
//! both directions, and each HTTP request Claude Code sends (its method, path, headers and
//! JSON body) is written as one JSON line to a file. The compatibility run reads those lines
//! to say which fields a release sends and to write its fixtures.
//!
//! Invariants: the proxy never changes, delays or buffers beyond one read what passes through;
//! a request it cannot parse is passed on and not recorded; the key headers
//! (`authorization`, `x-api-key`) are recorded by name only; a request body is recorded only
//! up to [`MAX_BODY`] bytes (a larger one is recorded by its size).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// Largest request body recorded (Claude Code's main turns are a few hundred KiB).
const MAX_BODY: usize = 8 << 20;
/// Headers recorded by name only.
const SECRET_HEADERS: [&str; 3] = ["authorization", "x-api-key", "cookie"];

/// A running proxy; Claude Code is pointed at [`Capture::addr`].
pub(crate) struct Capture {
    pub(crate) addr: SocketAddr,
}

impl Capture {
    /// Listens on a free local port and forwards every connection to `upstream`, appending
    /// each request to `file`.
    pub(crate) fn start(upstream: SocketAddr, file: &Path) -> Capture {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the capture proxy");
        let addr = listener.local_addr().expect("its address");
        let out = Arc::new(Mutex::new(
            std::fs::File::create(file).expect("the capture file"),
        ));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let out = out.clone();
                std::thread::spawn(move || relay(client, upstream, &out));
            }
        });
        Capture { addr }
    }
}

/// One connection: the bridge's bytes copied back on a thread of their own, the client's
/// copied forward and parsed into requests here.
fn relay(mut client: TcpStream, upstream: SocketAddr, out: &Mutex<std::fs::File>) {
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    let (Ok(mut back_from), Ok(mut back_to)) = (server.try_clone(), client.try_clone()) else {
        return;
    };
    let back = std::thread::spawn(move || {
        let _ = std::io::copy(&mut back_from, &mut back_to);
        let _ = back_to.shutdown(Shutdown::Write);
    });
    let mut pending = Vec::new();
    let mut buffer = [0u8; 64 << 10];
    loop {
        let read = match client.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if server.write_all(&buffer[..read]).is_err() {
            break;
        }
        pending.extend_from_slice(&buffer[..read]);
        while let Some((request, used)) = parse(&pending) {
            if let Ok(mut file) = out.lock() {
                let _ = writeln!(file, "{request}");
            }
            pending.drain(..used);
        }
        if pending.len() > MAX_BODY * 2 {
            // Not HTTP as this reads it: stop recording, keep relaying.
            pending.clear();
        }
    }
    let _ = server.shutdown(Shutdown::Write);
    let _ = back.join();
}

/// The first whole request in `bytes` and the bytes it took; none until it is whole.
fn parse(bytes: &[u8]) -> Option<(Value, usize)> {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&bytes[..head_end]).ok()?;
    let mut lines = head.split("\r\n");
    let mut start = lines.next()?.split(' ');
    let (method, path) = (start.next()?, start.next()?);
    let mut headers = serde_json::Map::new();
    let mut length = 0usize;
    let mut chunked = false;
    for line in lines.filter(|line| !line.is_empty()) {
        let (name, value) = line.split_once(':')?;
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        match name.as_str() {
            "content-length" => length = value.parse().ok()?,
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            _ => {}
        }
        let recorded = if SECRET_HEADERS.contains(&name.as_str()) {
            "<redacted>"
        } else {
            value
        };
        headers.insert(name, json!(recorded));
    }
    let (body, used) = if chunked {
        dechunk(&bytes[head_end..]).map(|(body, used)| (body, head_end + used))?
    } else {
        let end = head_end.checked_add(length)?;
        (bytes.get(head_end..end)?.to_vec(), end)
    };
    let body = if body.len() > MAX_BODY {
        json!({"bytes": body.len()})
    } else {
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    };
    Some((
        json!({"method": method, "path": path, "headers": headers, "body": body}),
        used,
    ))
}

/// A chunked body, whole, and the bytes it took; none until its last chunk.
fn dechunk(bytes: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = at + bytes[at..].windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&bytes[at..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        let data = line_end + 2;
        if size == 0 {
            // The last chunk, then (no trailers) the empty line.
            let end = data + bytes[data..].windows(2).position(|w| w == b"\r\n")? + 2;
            return Some((body, end));
        }
        body.extend_from_slice(bytes.get(data..data + size)?);
        at = data + size + 2;
        if at > bytes.len() {
            return None;
        }
    }
}
