//! `fake-devin-remote serve`: a stand-in for the `devin-remote` binary that the outpost worker
//! downloads and runs, speaking to the fake fleet's long-poll gateway.
//!
//! 1. Needs `DEVIN_OUTPOST_GATEWAY_URL` (an `http://` URL), `DEVIN_OUTPOST_CONNECT_TOKEN` and
//!    `DEVIN_OUTPOST_SESSION_ID`, and `serve` as its first argument; otherwise exit 2.
//! 2. Posts a report of how it was started (argv, cwd, the whole environment, pid, process
//!    group, the mode of `$DEVIN_REMOTE_STATE_DIR`) to `<gateway>/report`, and writes it to
//!    `$DEVIN_REMOTE_STATE_DIR/report.json` when that is set.
//! 3. Long-polls `<gateway>/connect?session=<id>` and obeys the answer: `exit` (exit 0),
//!    `crash` (exit 3), `hang` (ignore SIGTERM, sleep forever), `exit-early` (exit 0), `probe`
//!    (try each target directly and through the CONNECT proxy of the environment, report the
//!    results, then poll again).
//!
//! With `HTTPS_PROXY` set, every gateway exchange goes through a `CONNECT` tunnel of that proxy.
//!
//! Losing the gateway (a refused or cut connection, an error answer) is exit 1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::fs::PermissionsExt;
use std::process::exit;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

fn fail(code: i32, message: &str) -> ! {
    eprintln!("fake-devin-remote: {message}");
    exit(code)
}

/// `http://host:port/base` split into the address and the base path.
fn split_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let authority = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    Some((authority, path.trim_end_matches('/').to_owned()))
}

/// One HTTP/1.1 exchange on its own connection; the answer's status and body.
fn request(
    authority: &str,
    method: &str,
    path: &str,
    token: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut stream = open(authority)?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line)?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {status_line:?}")))?;
    let (mut length, mut chunked) = (None, false);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::other("connection closed in the headers"));
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "content-length" {
                length = value.parse::<usize>().ok();
            } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| std::io::Error::other("bad chunk size"))?;
            if size == 0 {
                break;
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = length {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
    }
    Ok((status, body))
}

/// A connection to `authority`: direct, or, when `HTTPS_PROXY` is set, through a `CONNECT`
/// tunnel of that proxy (as a real remote reaches its gateway from a restricted network).
fn open(authority: &str) -> std::io::Result<TcpStream> {
    let Some(proxy) = env("HTTPS_PROXY").or_else(|| env("https_proxy")) else {
        return TcpStream::connect(authority);
    };
    let (proxy_authority, _) =
        split_url(&proxy).ok_or_else(|| std::io::Error::other("HTTPS_PROXY is not http://"))?;
    let mut stream = TcpStream::connect(&proxy_authority)?;
    stream.write_all(
        format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
    )?;
    // Read the proxy's answer head byte by byte, so nothing of the tunnel is consumed.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 || head.len() > 8192 {
            return Err(std::io::Error::other("the proxy closed the tunnel request"));
        }
        head.push(byte[0]);
    }
    let status_line = String::from_utf8_lossy(&head);
    if status_line.split_whitespace().nth(1) != Some("200") {
        return Err(std::io::Error::other(format!(
            "the proxy refused the tunnel: {}",
            status_line.lines().next().unwrap_or_default()
        )));
    }
    Ok(stream)
}

struct Gateway {
    authority: String,
    base: String,
    token: String,
    session: String,
}

impl Gateway {
    fn post_report(&self, report: &Value) {
        match request(
            &self.authority,
            "POST",
            &format!("{}/report", self.base),
            &self.token,
            report.to_string().as_bytes(),
        ) {
            Ok((200, _)) => {}
            Ok((status, _)) => fail(1, &format!("the gateway refused the report: {status}")),
            Err(error) => fail(1, &format!("lost the gateway: {error}")),
        }
    }

    fn connect(&self) -> Value {
        let path = format!("{}/connect?session={}", self.base, self.session);
        match request(&self.authority, "GET", &path, &self.token, b"") {
            Ok((200, body)) => serde_json::from_slice(&body)
                .unwrap_or_else(|_| fail(1, "the gateway answered something that is not JSON")),
            Ok((status, _)) => fail(1, &format!("the gateway refused the connection: {status}")),
            Err(error) => fail(1, &format!("lost the gateway: {error}")),
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The process group: the fifth field of /proc/self/stat (after the parenthesised name).
fn pgid() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(2)?.parse().ok()
}

fn report() -> Value {
    let state_dir = env("DEVIN_REMOTE_STATE_DIR");
    let mode = state_dir.as_ref().and_then(|dir| {
        std::fs::metadata(dir)
            .ok()
            .map(|m| format!("{:04o}", m.permissions().mode() & 0o7777))
    });
    let environment: serde_json::Map<String, Value> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                Value::String(v.to_string_lossy().into_owned()),
            )
        })
        .collect();
    json!({
        "argv": std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
        "cwd": std::env::current_dir().ok().map(|d| d.to_string_lossy().into_owned()),
        "env": environment,
        "pid": std::process::id(),
        "pgid": pgid(),
        "state_dir_mode": mode,
    })
}

fn proxy() -> Option<String> {
    ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
        .into_iter()
        .find_map(env)
}

/// One probe target: a direct TCP connect, and a CONNECT through the proxy if there is one.
fn probe(target: &str, proxy: Option<&str>) -> Value {
    let timeout = Duration::from_secs(1);
    let direct = match target.to_socket_addrs() {
        Ok(mut addrs) => match addrs.next() {
            Some(addr) => match TcpStream::connect_timeout(&addr, timeout) {
                Ok(_) => "connected".to_owned(),
                Err(error) => format!("error: {error}"),
            },
            None => "error: no address".to_owned(),
        },
        Err(error) => format!("error: {error}"),
    };
    let via_proxy = proxy.map(|proxy| {
        let Some((authority, _)) = split_url(proxy) else {
            return "error: the proxy is not an http:// URL".to_owned();
        };
        let attempt = || -> std::io::Result<String> {
            let addr = authority
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| std::io::Error::other("no address"))?;
            let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
            stream.set_read_timeout(Some(Duration::from_secs(3)))?;
            write!(
                stream,
                "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
            )?;
            let mut line = String::new();
            BufReader::new(stream).read_line(&mut line)?;
            Ok(line.trim_end().to_owned())
        };
        attempt().unwrap_or_else(|error| format!("error: {error}"))
    });
    json!({"target": target, "direct": direct, "proxy": proxy, "via_proxy": via_proxy})
}

fn main() {
    if std::env::args().nth(1).as_deref() != Some("serve") {
        fail(2, "usage: fake-devin-remote serve");
    }
    let (Some(url), Some(token), Some(session)) = (
        env("DEVIN_OUTPOST_GATEWAY_URL"),
        env("DEVIN_OUTPOST_CONNECT_TOKEN"),
        env("DEVIN_OUTPOST_SESSION_ID"),
    ) else {
        fail(
            2,
            "DEVIN_OUTPOST_GATEWAY_URL, DEVIN_OUTPOST_CONNECT_TOKEN and DEVIN_OUTPOST_SESSION_ID are required",
        );
    };
    let Some((authority, base)) = split_url(&url) else {
        fail(2, "DEVIN_OUTPOST_GATEWAY_URL must be an http:// URL");
    };
    let gateway = Gateway {
        authority,
        base,
        token,
        session,
    };
    let report = report();
    if let Some(dir) = env("DEVIN_REMOTE_STATE_DIR") {
        let path = std::path::Path::new(&dir).join("report.json");
        if let Err(error) = std::fs::write(&path, report.to_string()) {
            eprintln!(
                "fake-devin-remote: cannot write {}: {error}",
                path.display()
            );
        }
    }
    gateway.post_report(&report);
    loop {
        let answer = gateway.connect();
        match answer["action"].as_str() {
            Some("exit") | Some("exit-early") => exit(0),
            Some("crash") => fail(3, "crashing as asked"),
            Some("hang") => {
                // A handler that only sets a flag: SIGTERM no longer ends the process.
                let flag = Arc::new(AtomicBool::new(false));
                if let Err(error) = signal_hook::flag::register(signal_hook::consts::SIGTERM, flag)
                {
                    fail(1, &format!("cannot ignore SIGTERM: {error}"));
                }
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            Some("probe") => {
                let proxy = proxy();
                let results: Vec<Value> = answer["targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(|target| probe(target, proxy.as_deref()))
                    .collect();
                gateway.post_report(&json!({"probe": results}));
            }
            _ => fail(1, &format!("unknown action from the gateway: {answer}")),
        }
    }
}
