//! The egress guard against real peers on loopback: a rustls server with a test CA, a Rust TLS
//! client, curl, and a table of bypass attempts, each asserted on its audit line.

use crate::support as guard_support;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use devin_bridge_guard::isolation::{self, Environment, ProbeOutcome, VerifyIsolationArgs};
use devin_bridge_guard::testkit::{records, ClientHelloBuilder};
use devin_bridge_guard::{client, Guard, GuardPolicy, HttpPolicy, RunningGuard};
use guard_support::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn last(lines: &[Value]) -> &Value {
    lines.last().expect("an audit line")
}

#[tokio::test]
async fn rust_client_bytes_arrive_unchanged_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(&["api.devin.ai", "app.devin.ai"]);
    let echo = tls_server(pki.server.clone(), ServerMode::Echo).await;
    let policy = test_policy(dir.path(), &[("api.devin.ai", echo.to_string())]);
    let guard = Guard::spawn(policy).await.unwrap();
    let audit = guard.audit_path().to_owned();

    let tls = tls_via_guard(
        guard.local_addr(),
        "api.devin.ai:443",
        "api.devin.ai",
        pki.client.clone(),
    )
    .await
    .unwrap();
    let data = pattern(4 * 1024 * 1024 + 17, 1);
    let back = echo_roundtrip(tls, data.clone()).await;
    assert!(back == data, "echoed bytes differ");

    let lines = wait_audit(&audit, 1).await;
    let line = last(&lines);
    assert_eq!(line["decision"], "allow", "{line}");
    assert_eq!(line["reason"], "allowlisted");
    assert_eq!(line["method"], "CONNECT");
    assert_eq!(line["host"], "api.devin.ai");
    assert_eq!(line["port"], 443);
    assert_eq!(line["sni"], "api.devin.ai");
    assert_eq!(line["resolved"], echo.to_string());
    assert_eq!(line["close"], "eof");
    // TLS adds framing: at least the payload each way.
    assert!(
        line["bytes_up"].as_u64().unwrap() > data.len() as u64,
        "{line}"
    );
    assert!(
        line["bytes_down"].as_u64().unwrap() > data.len() as u64,
        "{line}"
    );
    assert!(line["time"].as_str().unwrap().ends_with('Z'));
    assert!(line["client"].as_str().unwrap().starts_with("127.0.0.1:"));
    let mode = std::fs::metadata(&audit).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "audit file mode");
    guard.shutdown().await.unwrap();
}

#[tokio::test]
async fn normalised_names_and_split_hellos_are_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(&["api.devin.ai"]);
    let echo = tls_server(pki.server.clone(), ServerMode::Echo).await;
    let mut policy = test_policy(dir.path(), &[("api.devin.ai", echo.to_string())]);
    // Byte-by-byte segments with pauses take a while: the production timeout.
    policy.connection_limits.client_hello_timeout_ms = 3_000;
    let guard = Guard::spawn(policy).await.unwrap();
    let audit = guard.audit_path().to_owned();

    // Upper case and a trailing dot normalise to the allowed name.
    for (i, authority) in ["API.DEVIN.AI:443", "api.devin.ai.:443", "Api.Devin.Ai.:443"]
        .iter()
        .enumerate()
    {
        let tls = tls_via_guard(
            guard.local_addr(),
            authority,
            "api.devin.ai",
            pki.client.clone(),
        )
        .await
        .unwrap();
        let data = pattern(100_000, 2);
        assert!(echo_roundtrip(tls, data.clone()).await == data);
        let lines = wait_audit(&audit, i + 1).await;
        assert_eq!(lines[i]["decision"], "allow", "{authority}: {}", lines[i]);
    }

    // A real ClientHello split into 16-byte records, sent in 7-byte TCP segments.
    for (fragment, segment) in [(16, 7), (1, 200), (300, 1)] {
        let (stream, reply) = client::connect(guard.local_addr(), "api.devin.ai:443")
            .await
            .unwrap();
        assert_eq!(reply.status, 200);
        let split = Refragment::new(stream, fragment, segment);
        let name = rustls::pki_types::ServerName::try_from("api.devin.ai").unwrap();
        let tls = match tokio_rustls::TlsConnector::from(pki.client.clone())
            .connect(name, split)
            .await
        {
            Ok(tls) => tls,
            Err(e) => panic!("{fragment}/{segment}: {e}: {:#?}", audit_lines(&audit)),
        };
        let data = pattern(50_000, 3);
        assert!(echo_roundtrip(tls, data.clone()).await == data);
    }
    let lines = wait_audit(&audit, 6).await;
    for line in &lines[3..6] {
        assert_eq!(line["decision"], "allow", "{line}");
        assert_eq!(line["sni"], "api.devin.ai");
    }
    guard.shutdown().await.unwrap();
}

async fn curl(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new("curl")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .await
        .expect("run curl")
}

/// curl is a test dependency (CI installs it): without it this test fails rather than passing
/// without having checked anything.
fn require_curl() {
    let found = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "curl is required by this test and was not found on PATH; install curl (e.g. `apt-get install curl`)"
    );
}

#[tokio::test]
async fn curl_through_the_guard() {
    require_curl();
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(&["api.devin.ai"]);
    let server = tls_server(pki.server.clone(), ServerMode::Http).await;
    let policy = test_policy(dir.path(), &[("api.devin.ai", server.to_string())]);
    let guard = Guard::spawn(policy).await.unwrap();
    let audit = guard.audit_path().to_owned();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let proxy = format!("http://{}", guard.local_addr());
    let ca_s = ca.to_str().unwrap();

    // Download 3 MiB.
    let out_path = dir.path().join("down.bin");
    let n = 3 * 1024 * 1024 + 5;
    let url = format!("https://api.devin.ai/bytes/{n}");
    let out = curl(&[
        "-sS",
        "--fail",
        "--proxy",
        &proxy,
        "--cacert",
        ca_s,
        "-o",
        out_path.to_str().unwrap(),
        &url,
    ])
    .await;
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read(&out_path).unwrap() == pattern(n, 7),
        "download differs"
    );

    // Upload 2 MiB; the server echoes it.
    let up = pattern(2 * 1024 * 1024 + 3, 9);
    let in_path = dir.path().join("up.bin");
    std::fs::write(&in_path, &up).unwrap();
    let echo_path = dir.path().join("echo.bin");
    let data_arg = format!("@{}", in_path.display());
    let out = curl(&[
        "-sS",
        "--fail",
        "--proxy",
        &proxy,
        "--cacert",
        ca_s,
        "--data-binary",
        &data_arg,
        "-H",
        "Content-Type: application/octet-stream",
        "-o",
        echo_path.to_str().unwrap(),
        "https://api.devin.ai/echo",
    ])
    .await;
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::read(&echo_path).unwrap() == up,
        "upload echo differs"
    );

    // A name that is not allowed: curl sees the 403 from the proxy.
    let out = curl(&[
        "-sS",
        "--proxy",
        &proxy,
        "--cacert",
        ca_s,
        "https://api.anthropic.com/",
    ])
    .await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("403"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let lines = wait_audit(&audit, 3).await;
    assert_eq!(lines[0]["decision"], "allow");
    assert!(lines[0]["bytes_down"].as_u64().unwrap() > n as u64);
    assert_eq!(lines[1]["decision"], "allow");
    assert!(lines[1]["bytes_up"].as_u64().unwrap() > up.len() as u64);
    assert_eq!(lines[2]["decision"], "deny");
    assert_eq!(lines[2]["reason"], "host_not_allowlisted");
    assert_eq!(lines[2]["host"], "api.anthropic.com");
    guard.shutdown().await.unwrap();
}

/// What a bypass attempt sends.
enum Attempt {
    /// `CONNECT authority`; the guard must refuse it with a status.
    Connect(String),
    /// `CONNECT authority`, `200`, then `bytes` in segments of `segment` bytes (15 ms apart);
    /// the guard must close without a byte from upstream.
    Hello {
        authority: String,
        bytes: Vec<u8>,
        segment: usize,
    },
    /// Raw request bytes; the guard must answer with a status.
    Raw(Vec<u8>),
}

struct Case {
    name: &'static str,
    attempt: Attempt,
    /// Expected status for Connect/Raw.
    status: Option<u16>,
    reason: &'static str,
    /// Run against the strict guard (plain HTTP enabled, no address range allowed).
    strict: bool,
}

fn hello(sni: &str) -> Vec<u8> {
    ClientHelloBuilder::new().sni(sni).records()
}

fn connect(name: &'static str, authority: &str, status: u16, reason: &'static str) -> Case {
    Case {
        name,
        attempt: Attempt::Connect(authority.to_owned()),
        status: Some(status),
        reason,
        strict: false,
    }
}

fn with_hello(
    name: &'static str,
    authority: &str,
    bytes: Vec<u8>,
    segment: usize,
    reason: &'static str,
) -> Case {
    Case {
        name,
        attempt: Attempt::Hello {
            authority: authority.to_owned(),
            bytes,
            segment,
        },
        status: None,
        reason,
        strict: false,
    }
}

fn raw(name: &'static str, request: &str, status: u16, reason: &'static str, strict: bool) -> Case {
    Case {
        name,
        attempt: Attempt::Raw(request.as_bytes().to_vec()),
        status: Some(status),
        reason,
        strict,
    }
}

async fn run_case(case: &Case, guard: &RunningGuard) {
    let addr = guard.local_addr();
    match &case.attempt {
        Attempt::Connect(authority) => {
            let (_s, reply) = client::connect(addr, authority).await.unwrap();
            assert_eq!(
                Some(reply.status),
                case.status,
                "{}: {}",
                case.name,
                reply.head
            );
        }
        Attempt::Raw(bytes) => {
            let (_s, reply) = client::send_raw(addr, bytes).await.unwrap();
            assert_eq!(
                Some(reply.status),
                case.status,
                "{}: {}",
                case.name,
                reply.head
            );
        }
        Attempt::Hello {
            authority,
            bytes,
            segment,
        } => {
            let (mut s, reply) = client::connect(addr, authority).await.unwrap();
            assert_eq!(reply.status, 200, "{}: {}", case.name, reply.head);
            for chunk in bytes.chunks((*segment).max(1)) {
                if s.write_all(chunk).await.is_err() {
                    break;
                }
                if *segment < bytes.len() {
                    tokio::time::sleep(Duration::from_millis(15)).await;
                }
            }
            let mut got = Vec::new();
            let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
            assert!(read.is_ok(), "{}: guard did not close", case.name);
            assert!(
                got.is_empty(),
                "{}: received {} bytes",
                case.name,
                got.len()
            );
        }
    }
}

fn userinfo_request() -> String {
    "GET http://user:hunter2@api.devin.ai/ HTTP/1.1\r\nHost: api.devin.ai\r\n\r\n".into()
}

#[tokio::test]
async fn bypass_attempts_are_denied_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let strict_dir = tempfile::tempdir().unwrap();
    let pki = pki(&["api.devin.ai"]);
    let echo = tls_server(pki.server.clone(), ServerMode::Echo).await;
    let port = free_port();
    let self_addr = format!("127.0.0.1:{port}");
    let pins: Vec<(&str, String)> = vec![
        ("api.devin.ai", echo.to_string()),
        ("app.devin.ai", echo.to_string()),
        ("self.devin.ai", self_addr.clone()),
        ("private.devin.ai", "10.0.0.5".into()),
        ("cgnat.devin.ai", "100.64.0.1".into()),
        ("metadata.devin.ai", "169.254.169.254".into()),
        ("md6.devin.ai", "fd00:ec2::254".into()),
        ("linklocal.devin.ai", "169.254.10.10".into()),
        ("sixtofour.devin.ai", "2002:c0a8:101::1".into()),
        ("nat64.devin.ai", "64:ff9b::a00:1".into()),
        (
            "teredo.devin.ai",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2".into(),
        ),
        ("mapped.devin.ai", "::ffff:127.0.0.1".into()),
    ];
    let mut policy = test_policy(dir.path(), &pins);
    policy.listen = self_addr.parse().unwrap();
    let guard = Guard::spawn(policy).await.unwrap();

    let mut strict = test_policy(
        strict_dir.path(),
        &[("loopback.devin.ai", echo.to_string())],
    );
    strict.allow_ranges.clear();
    strict.http = HttpPolicy {
        enabled: true,
        ports: vec![80],
    };
    let strict_guard = Guard::spawn(strict).await.unwrap();

    let big_hello = records(
        &ClientHelloBuilder::new()
            .sni("api.devin.ai")
            .padding(60_000)
            .extension(0x1234, vec![0; 10_000])
            .handshake(),
        16_384,
    );
    let slow = hello("api.devin.ai")[..20].to_vec();
    let oversized_headers = format!(
        "CONNECT api.devin.ai:443 HTTP/1.1\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let g = format!("127.0.0.1:{port}");
    let cases = vec![
        with_hello(
            "SNI mismatch",
            "api.devin.ai:443",
            hello("evil.example"),
            1 << 20,
            "sni_mismatch",
        ),
        with_hello(
            "SNI of another allowed name (fronting)",
            "api.devin.ai:443",
            hello("app.devin.ai"),
            1 << 20,
            "sni_mismatch",
        ),
        with_hello(
            "missing SNI",
            "api.devin.ai:443",
            ClientHelloBuilder::new()
                .extension(43, vec![2, 3, 4])
                .records(),
            1 << 20,
            "missing_sni",
        ),
        with_hello(
            "mismatching SNI split across records",
            "api.devin.ai:443",
            records(
                &ClientHelloBuilder::new().sni("evil.example").handshake(),
                16,
            ),
            1 << 20,
            "sni_mismatch",
        ),
        with_hello(
            "mismatching SNI split across TCP segments",
            "api.devin.ai:443",
            hello("evil.example"),
            7,
            "sni_mismatch",
        ),
        with_hello(
            "duplicate SNI extension",
            "api.devin.ai:443",
            ClientHelloBuilder::new()
                .sni("api.devin.ai")
                .sni("evil.example")
                .records(),
            1 << 20,
            "duplicate_sni",
        ),
        with_hello(
            "two host names in one SNI",
            "api.devin.ai:443",
            ClientHelloBuilder::new()
                .sni_ext(&["api.devin.ai", "evil.example"])
                .records(),
            1 << 20,
            "duplicate_sni",
        ),
        with_hello(
            "encrypted ClientHello",
            "api.devin.ai:443",
            ClientHelloBuilder::new()
                .sni("api.devin.ai")
                .extension(0xfe0d, vec![0; 32])
                .records(),
            1 << 20,
            "encrypted_client_hello",
        ),
        with_hello(
            "non-handshake first record",
            "api.devin.ai:443",
            vec![0x17, 3, 3, 0, 5, 1, 2, 3, 4, 5],
            1 << 20,
            "not_handshake_record",
        ),
        with_hello(
            "plaintext HTTP in the tunnel",
            "api.devin.ai:443",
            b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n".to_vec(),
            1 << 20,
            "not_handshake_record",
        ),
        with_hello(
            "oversized ClientHello",
            "api.devin.ai:443",
            big_hello,
            1 << 20,
            "client_hello_too_large",
        ),
        with_hello(
            "slow ClientHello",
            "api.devin.ai:443",
            slow,
            1 << 20,
            "client_hello_timeout",
        ),
        with_hello(
            "no ClientHello at all",
            "api.devin.ai:443",
            Vec::new(),
            1 << 20,
            "client_hello_timeout",
        ),
        connect("IPv4 literal", "127.0.0.1:443", 403, "ip_literal"),
        connect("IPv6 literal", "[::1]:443", 403, "ip_literal"),
        connect(
            "IPv4-mapped IPv6 literal",
            "[::ffff:127.0.0.1]:443",
            403,
            "ip_literal",
        ),
        connect("decimal IPv4 literal", "2130706433:443", 403, "ip_literal"),
        connect("metadata literal", "169.254.169.254:443", 403, "ip_literal"),
        connect("CONNECT to the guard itself", &g, 403, "ip_literal"),
        connect("non-443 port", "api.devin.ai:8443", 403, "port_not_allowed"),
        connect(
            "suffix trick evildevin.ai",
            "evildevin.ai:443",
            403,
            "host_not_allowlisted",
        ),
        connect(
            "suffix trick devin.ai.evil.example",
            "devin.ai.evil.example:443",
            403,
            "host_not_allowlisted",
        ),
        connect(
            "upper case, trailing dot, not allowed",
            "EVILDEVIN.AI.:443",
            403,
            "host_not_allowlisted",
        ),
        connect(
            "two trailing dots",
            "api.devin.ai..:443",
            403,
            "invalid_host",
        ),
        connect(
            "IDN look-alike of the apex",
            "devin.a\u{0456}:443",
            403,
            "host_not_allowlisted",
        ),
        connect(
            "percent-encoded host",
            "api%2edevin.ai:443",
            403,
            "invalid_host",
        ),
        connect(
            "userinfo in CONNECT",
            "user:pw@api.devin.ai:443",
            403,
            "userinfo_in_url",
        ),
        connect("CONNECT without port", "api.devin.ai", 400, "bad_target"),
        with_hello(
            "name resolving to the guard itself",
            "self.devin.ai:443",
            hello("self.devin.ai"),
            1 << 20,
            "guard_self",
        ),
        with_hello(
            "name resolving to a private address",
            "private.devin.ai:443",
            hello("private.devin.ai"),
            1 << 20,
            "address_private",
        ),
        with_hello(
            "name resolving to CGNAT",
            "cgnat.devin.ai:443",
            hello("cgnat.devin.ai"),
            1 << 20,
            "address_cgnat",
        ),
        with_hello(
            "name resolving to cloud metadata",
            "metadata.devin.ai:443",
            hello("metadata.devin.ai"),
            1 << 20,
            "address_metadata",
        ),
        with_hello(
            "name resolving to IPv6 metadata",
            "md6.devin.ai:443",
            hello("md6.devin.ai"),
            1 << 20,
            "address_metadata",
        ),
        with_hello(
            "name resolving to link-local",
            "linklocal.devin.ai:443",
            hello("linklocal.devin.ai"),
            1 << 20,
            "address_link_local",
        ),
        with_hello(
            "name resolving to 6to4",
            "sixtofour.devin.ai:443",
            hello("sixtofour.devin.ai"),
            1 << 20,
            "address_6to4",
        ),
        with_hello(
            "name resolving to NAT64",
            "nat64.devin.ai:443",
            hello("nat64.devin.ai"),
            1 << 20,
            "address_nat64",
        ),
        with_hello(
            "name resolving to Teredo",
            "teredo.devin.ai:443",
            hello("teredo.devin.ai"),
            1 << 20,
            "address_teredo",
        ),
        with_hello(
            "name resolving to IPv4-mapped loopback",
            "mapped.devin.ai:443",
            hello("mapped.devin.ai"),
            1 << 20,
            "address_ipv4_mapped",
        ),
        raw(
            "plain HTTP when disabled",
            "GET http://api.devin.ai/ HTTP/1.1\r\nHost: api.devin.ai\r\n\r\n",
            403,
            "plain_http_disabled",
            false,
        ),
        raw(
            "garbage CONNECT line",
            "CONNECT\r\n\r\n",
            400,
            "bad_request",
            false,
        ),
        raw(
            "binary garbage instead of a request",
            "\u{16}\u{3}\u{1}\u{0}\u{5}hello\r\n\r\n",
            400,
            "bad_request",
            false,
        ),
        raw(
            "oversized headers",
            &oversized_headers,
            431,
            "header_too_large",
            false,
        ),
        raw(
            "userinfo in a plain-HTTP URL",
            &userinfo_request(),
            403,
            "userinfo_in_url",
            true,
        ),
        raw(
            "https URL in plain-HTTP form",
            "GET https://api.devin.ai/ HTTP/1.1\r\n\r\n",
            403,
            "scheme_not_allowed",
            true,
        ),
        raw(
            "origin-form request to the proxy",
            "GET / HTTP/1.1\r\nHost: api.devin.ai\r\n\r\n",
            400,
            "not_absolute_form",
            true,
        ),
        raw(
            "plain HTTP to a non-allowed host",
            "GET http://api.anthropic.com/ HTTP/1.1\r\n\r\n",
            403,
            "host_not_allowlisted",
            true,
        ),
        raw(
            "plain HTTP to an IP literal",
            "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n",
            403,
            "ip_literal",
            true,
        ),
        raw(
            "plain HTTP with Transfer-Encoding",
            "POST http://api.devin.ai/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            411,
            "transfer_encoding_refused",
            true,
        ),
        Case {
            name: "loopback without an explicit allowance",
            attempt: Attempt::Hello {
                authority: "loopback.devin.ai:443".into(),
                bytes: hello("loopback.devin.ai"),
                segment: 1 << 20,
            },
            status: None,
            reason: "address_loopback",
            strict: true,
        },
    ];
    assert!(cases.len() >= 25);

    let mut counts = (0usize, 0usize);
    let mut table = Vec::new();
    for case in &cases {
        let (g, n) = if case.strict {
            (&strict_guard, &mut counts.1)
        } else {
            (&guard, &mut counts.0)
        };
        run_case(case, g).await;
        *n += 1;
        let lines = wait_audit(g.audit_path(), *n).await;
        assert_eq!(
            lines.len(),
            *n,
            "{}: one line per decision: {lines:#?}",
            case.name
        );
        let line = last(&lines);
        assert_eq!(line["decision"], "deny", "{}: {line}", case.name);
        assert_eq!(line["reason"], case.reason, "{}: {line}", case.name);
        let text = line.to_string();
        assert!(
            !text.contains("hunter2") && !text.contains(":pw"),
            "credentials logged: {text}"
        );
        table.push(format!("{:<45} {}", case.name, case.reason));
    }
    eprintln!(
        "bypass table ({} attempts):\n{}",
        table.len(),
        table.join("\n")
    );

    // Only the cases that got past the request and SNI checks resolved anything: the rest
    // were refused before any resolution.
    let resolved_cases = cases
        .iter()
        .filter(|c| c.reason.starts_with("address_") || c.reason == "guard_self")
        .count();
    let total = guard.stats().snapshot().resolutions + strict_guard.stats().snapshot().resolutions;
    assert_eq!(total, resolved_cases as u64);
    guard.shutdown().await.unwrap();
    strict_guard.shutdown().await.unwrap();
}

#[tokio::test]
async fn plain_http_forward_rewrites_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = plain_http_server().await;
    let mut policy = test_policy(dir.path(), &[("plain.devin.ai", upstream.to_string())]);
    policy.http = HttpPolicy {
        enabled: true,
        ports: vec![80],
    };
    let guard = Guard::spawn(policy).await.unwrap();
    let request = "POST http://plain.devin.ai/x?y=1 HTTP/1.1\r\nHost: evil.example\r\nProxy-Authorization: Basic c2VjcmV0\r\nConnection: keep-alive, X-Secret\r\nX-Secret: s3cr3t\r\nKeep-Alive: 5\r\nUpgrade: websocket\r\nAccept: */*\r\nContent-Length: 5\r\n\r\nhello";
    let (mut s, reply) = client::send_raw(guard.local_addr(), request.as_bytes())
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "{}", reply.head);
    let mut body = reply.rest.clone();
    s.read_to_end(&mut body).await.unwrap();
    let seen = String::from_utf8_lossy(&body);
    assert!(
        seen.starts_with("POST /x?y=1 HTTP/1.1\r\nHost: plain.devin.ai\r\n"),
        "{seen}"
    );
    for gone in [
        "Proxy-Authorization",
        "X-Secret",
        "Keep-Alive",
        "Upgrade",
        "evil.example",
        "keep-alive",
    ] {
        assert!(!seen.contains(gone), "{gone} forwarded: {seen}");
    }
    assert!(seen.contains("Accept: */*\r\n"));
    assert!(seen.contains("Connection: close\r\n"));
    assert!(seen.ends_with("\r\n\r\nhello"), "{seen}");
    assert!(reply.head.contains("X-Upstream: yes"));
    assert!(reply.head.contains("Connection: close"));
    assert!(!reply.head.contains("Keep-Alive"), "{}", reply.head);
    let lines = wait_audit(guard.audit_path(), 1).await;
    assert_eq!(lines[0]["decision"], "allow");
    assert_eq!(lines[0]["method"], "POST");
    assert_eq!(lines[0]["bytes_up"], 5);
    assert!(!lines[0].to_string().contains("c2VjcmV0"));
    guard.shutdown().await.unwrap();
}

async fn deny_all_guard(dir: &std::path::Path) -> RunningGuard {
    let mut policy = GuardPolicy::load(&repo_root().join("policies/guard-deny-all.toml")).unwrap();
    policy.listen = "127.0.0.1:0".parse().unwrap();
    policy.audit = Some(dir.join("claude-audit.jsonl"));
    Guard::spawn(policy).await.unwrap()
}

#[tokio::test]
async fn deny_all_guard_denies_every_destination() {
    let dir = tempfile::tempdir().unwrap();
    let guard = deny_all_guard(dir.path()).await;
    let destinations = [
        "api.anthropic.com:443",
        "claude.ai:443",
        "statsig.anthropic.com:443",
        "api.devin.ai:443",
        "devin.ai:443",
        "localhost:443",
        "example.com:80",
        "127.0.0.1:443",
        "[::1]:443",
    ];
    for d in destinations {
        let (_s, reply) = client::connect(guard.local_addr(), d).await.unwrap();
        assert_eq!(reply.status, 403, "{d}");
    }
    let (_s, reply) = client::send_raw(
        guard.local_addr(),
        b"GET http://api.anthropic.com/v1/messages HTTP/1.1\r\nx-api-key: sk-ant-secret\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(reply.status, 403);
    let lines = wait_audit(guard.audit_path(), destinations.len() + 1).await;
    assert_eq!(lines.len(), destinations.len() + 1);
    for (line, d) in lines.iter().zip(destinations) {
        assert_eq!(line["decision"], "deny", "{line}");
        let host = d.rsplit_once(':').unwrap().0;
        assert_eq!(line["host"], host, "{line}");
    }
    assert_eq!(lines.last().unwrap()["reason"], "plain_http_disabled");
    assert!(!std::fs::read_to_string(guard.audit_path())
        .unwrap()
        .contains("sk-ant"));
    assert_eq!(guard.stats().snapshot().resolutions, 0, "nothing resolved");
    assert_eq!(guard.stats().snapshot().allowed, 0);
    guard.shutdown().await.unwrap();
}

#[tokio::test]
async fn shipped_devin_policy_loads_and_binds() {
    let dir = tempfile::tempdir().unwrap();
    let mut policy = GuardPolicy::load(&repo_root().join("policies/guard-devin.toml")).unwrap();
    assert_eq!(policy.listen, "0.0.0.0:8080".parse::<SocketAddr>().unwrap());
    assert_eq!(policy.ports, vec![443]);
    assert!(!policy.http.enabled);
    policy.listen = "127.0.0.1:0".parse().unwrap();
    policy.audit = Some(dir.path().join("a.jsonl"));
    let guard = Guard::spawn(policy).await.unwrap();
    let (_s, reply) = client::connect(guard.local_addr(), "api.anthropic.com:443")
        .await
        .unwrap();
    assert_eq!(reply.status, 403);
    guard.shutdown().await.unwrap();
}

#[tokio::test]
async fn verify_isolation_against_the_deny_all_guard() {
    let dir = tempfile::tempdir().unwrap();
    let guard = deny_all_guard(dir.path()).await;
    let clean = Environment {
        vars: vec![("PATH".into(), "/usr/bin".into())],
        euid: 10001,
        sockets: vec![dir.path().join("docker.sock")],
    };
    let args = VerifyIsolationArgs {
        proxy: Some(format!("http://{}", guard.local_addr())),
        audit: Some(guard.audit_path().to_owned()),
        timeout_ms: 3000,
        ..VerifyIsolationArgs::default()
    };
    let results = isolation::verify(&args, &clean).await;
    for r in &results {
        assert_eq!(r.outcome, ProbeOutcome::Pass, "{r}");
    }
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    for expected in [
        "env",
        "docker_socket",
        "non_root",
        "proxy",
        "unreachable:api.anthropic.com",
        "unreachable:claude.ai",
        "audit_permissions",
        "audit",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }

    // A dirty environment fails the local checks, and says which variable, not its value.
    std::fs::write(dir.path().join("docker.sock"), b"").unwrap();
    let dirty = Environment {
        vars: vec![
            ("ANTHROPIC_API_KEY".into(), "sk-ant-xyz".into()),
            (
                "HTTPS_PROXY".into(),
                format!("http://{}", guard.local_addr()),
            ),
        ],
        euid: 0,
        sockets: clean.sockets.clone(),
    };
    let args = VerifyIsolationArgs {
        timeout_ms: 3000,
        ..VerifyIsolationArgs::default()
    };
    let results = isolation::verify(&args, &dirty).await;
    let failed: Vec<String> = results
        .iter()
        .filter(|r| r.outcome == ProbeOutcome::Fail)
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(
        failed,
        vec!["env", "docker_socket", "non_root"],
        "{results:#?}"
    );
    let env_line = results[0].to_string();
    assert!(env_line.contains("ANTHROPIC_API_KEY") && !env_line.contains("sk-ant-xyz"));
    guard.shutdown().await.unwrap();
}

#[tokio::test]
async fn verify_isolation_fails_when_anthropic_is_reachable() {
    let dir = tempfile::tempdir().unwrap();
    let mut policy = test_policy(dir.path(), &[]);
    policy.allow = vec!["*.anthropic.com".into(), "claude.ai".into()];
    let guard = Guard::spawn(policy).await.unwrap();
    let args = VerifyIsolationArgs {
        proxy: Some(format!("http://{}", guard.local_addr())),
        audit: Some(guard.audit_path().to_owned()),
        timeout_ms: 3000,
        ..VerifyIsolationArgs::default()
    };
    let env = Environment {
        euid: 10001,
        ..Environment::default()
    };
    let results = isolation::verify(&args, &env).await;
    let get = |n: &str| results.iter().find(|r| r.name == n).unwrap();
    assert_eq!(
        get("unreachable:api.anthropic.com").outcome,
        ProbeOutcome::Fail
    );
    assert!(get("unreachable:api.anthropic.com")
        .detail
        .contains("REACHABLE"));
    assert_eq!(get("unreachable:claude.ai").outcome, ProbeOutcome::Fail);
    guard.shutdown().await.unwrap();
}

#[tokio::test]
async fn graceful_shutdown_closes_open_tunnels_and_records_them() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(&["api.devin.ai"]);
    let echo = tls_server(pki.server.clone(), ServerMode::Echo).await;
    let guard = Guard::spawn(test_policy(
        dir.path(),
        &[("api.devin.ai", echo.to_string())],
    ))
    .await
    .unwrap();
    let audit = guard.audit_path().to_owned();
    let addr = guard.local_addr();
    let mut tls = tls_via_guard(addr, "api.devin.ai:443", "api.devin.ai", pki.client.clone())
        .await
        .unwrap();
    tls.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    tls.read_exact(&mut buf).await.unwrap();
    guard.shutdown().await.unwrap();
    let lines = wait_audit(&audit, 1).await;
    assert_eq!(lines[0]["decision"], "allow");
    assert_eq!(lines[0]["close"], "shutdown");
    assert!(TcpStream::connect(addr).await.is_err(), "listener closed");
}

/// The `random` of a HelloRetryRequest (RFC 8446, section 4.1.3).
const HRR_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];
const CCS: [u8; 6] = [0x14, 3, 3, 0, 1, 1];

/// A ServerHello record; a HelloRetryRequest when `retry`.
fn server_hello_record(retry: bool) -> Vec<u8> {
    let mut body = vec![3, 3];
    if retry {
        body.extend_from_slice(&HRR_RANDOM);
    } else {
        body.extend_from_slice(&[0x42; 32]);
    }
    body.extend_from_slice(&[0, 0x13, 0x01, 0, 0, 0]);
    let mut msg = vec![2, 0, 0, body.len() as u8];
    msg.extend_from_slice(&body);
    records(&msg, 16_384)
}

/// A scripted upstream for one connection: each time it has received `at` bytes in all, it
/// sends the paired answer; then it collects everything until the guard closes, and returns
/// every byte it received.
async fn scripted_upstream(
    script: Vec<(usize, Vec<u8>)>,
) -> (SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut script = script.into_iter().peekable();
        loop {
            while let Some((at, answer)) = script.peek() {
                if got.len() < *at {
                    break;
                }
                s.write_all(answer).await.unwrap();
                script.next();
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return got,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
    });
    (addr, task)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn a_second_client_hello_sent_at_once_is_checked_and_never_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let first = hello("api.devin.ai");
    let (upstream, received) = scripted_upstream(Vec::new()).await;
    let guard = Guard::spawn(test_policy(
        dir.path(),
        &[("api.devin.ai", upstream.to_string())],
    ))
    .await
    .unwrap();
    let (mut s, reply) = client::connect(guard.local_addr(), "api.devin.ai:443")
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    // A valid ClientHello and, in the same segment, a second one naming another host (the
    // shape of a HelloRetryRequest flow, without waiting for the server).
    let mut both = first.clone();
    both.extend_from_slice(&hello("evil.example"));
    s.write_all(&both).await.unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "guard did not close the tunnel");
    let upstream_got = received.await.unwrap();
    assert_eq!(
        upstream_got, first,
        "only the first ClientHello reaches the server"
    );
    let lines = wait_audit(guard.audit_path(), 1).await;
    let line = last(&lines);
    assert_eq!(line["decision"], "deny", "{line}");
    assert_eq!(line["reason"], "later_hello_sni_mismatch", "{line}");
    assert_eq!(line["sni"], "api.devin.ai", "{line}");
    assert_eq!(line["bytes_up"], first.len(), "{line}");
    guard.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_hello_after_a_hello_retry_request_must_name_the_same_host() {
    let dir = tempfile::tempdir().unwrap();
    let first = hello("api.devin.ai");
    let retry = server_hello_record(true);
    let mut policy = test_policy(dir.path(), &[]);
    // Refused: after the HelloRetryRequest, change_cipher_spec then a ClientHello for another
    // host (each split into small records to be reassembled).
    let bad_first = hello("bad.devin.ai");
    let (up_bad, got_bad) = scripted_upstream(vec![(bad_first.len(), retry.clone())]).await;
    // Allowed: the same flow with the same host, then the ServerHello and encrypted records.
    let second = records(
        &ClientHelloBuilder::new()
            .sni("API.devin.ai.")
            .extension(43, vec![2, 3, 4])
            .handshake(),
        30,
    );
    let after_second = first.len() + CCS.len() + second.len();
    let (up_good, got_good) = scripted_upstream(vec![
        (first.len(), retry.clone()),
        (after_second, server_hello_record(false)),
    ])
    .await;
    policy
        .resolve
        .insert("bad.devin.ai".into(), up_bad.to_string());
    policy
        .resolve
        .insert("api.devin.ai".into(), up_good.to_string());
    let guard = Guard::spawn(policy).await.unwrap();
    let addr = guard.local_addr();

    let (mut s, reply) = client::connect(addr, "bad.devin.ai:443").await.unwrap();
    assert_eq!(reply.status, 200);
    s.write_all(&bad_first).await.unwrap();
    let mut answer = vec![0u8; retry.len()];
    s.read_exact(&mut answer).await.unwrap();
    assert_eq!(answer, retry, "the HelloRetryRequest is relayed");
    let mut flight = CCS.to_vec();
    flight.extend_from_slice(&records(
        &ClientHelloBuilder::new().sni("evil.example").handshake(),
        30,
    ));
    s.write_all(&flight).await.unwrap();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "guard did not close the tunnel");
    let upstream_got = got_bad.await.unwrap();
    assert!(
        !contains(&upstream_got, b"evil.example"),
        "the second ClientHello reached the server"
    );
    let lines = wait_audit(guard.audit_path(), 1).await;
    assert_eq!(lines[0]["decision"], "deny", "{}", lines[0]);
    assert_eq!(
        lines[0]["reason"], "later_hello_sni_mismatch",
        "{}",
        lines[0]
    );

    let (mut s, reply) = client::connect(addr, "api.devin.ai:443").await.unwrap();
    assert_eq!(reply.status, 200);
    s.write_all(&first).await.unwrap();
    let mut answer = vec![0u8; retry.len()];
    s.read_exact(&mut answer).await.unwrap();
    let mut flight = CCS.to_vec();
    flight.extend_from_slice(&second);
    s.write_all(&flight).await.unwrap();
    let mut answer = vec![0u8; server_hello_record(false).len()];
    s.read_exact(&mut answer).await.unwrap();
    // Encrypted from here: passed through as is.
    let tail = [&[0x17u8, 3, 3, 0, 2, 7, 7][..], b"opaque"].concat();
    s.write_all(&tail).await.unwrap();
    s.shutdown().await.unwrap();
    let upstream_got = got_good.await.unwrap();
    assert_eq!(upstream_got, [first.clone(), flight, tail].concat());
    let lines = wait_audit(guard.audit_path(), 2).await;
    assert_eq!(lines[1]["decision"], "allow", "{}", lines[1]);
    assert_eq!(lines[1]["reason"], "allowlisted");
    guard.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_idn_mapped_connect_is_audited_in_its_mapped_form() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(&["api.devin.ai"]);
    let echo = tls_server(pki.server.clone(), ServerMode::Echo).await;
    let guard = Guard::spawn(test_policy(
        dir.path(),
        &[("api.devin.ai", echo.to_string())],
    ))
    .await
    .unwrap();
    // Fullwidth Latin letters: UTS 46 maps them to `api.devin.ai`, which decides.
    let fullwidth = "\u{ff41}\u{ff50}\u{ff49}.\u{ff44}\u{ff45}\u{ff56}\u{ff49}\u{ff4e}.ai";
    let tls = tls_via_guard(
        guard.local_addr(),
        &format!("{fullwidth}:443"),
        "api.devin.ai",
        pki.client.clone(),
    )
    .await
    .unwrap();
    let data = pattern(1000, 4);
    assert!(echo_roundtrip(tls, data.clone()).await == data);
    let lines = wait_audit(guard.audit_path(), 1).await;
    let line = last(&lines);
    assert_eq!(line["decision"], "allow", "{line}");
    assert_eq!(line["host"], "api.devin.ai", "{line}");
    assert_eq!(
        line["host_raw"],
        "\\u{ff41}\\u{ff50}\\u{ff49}.\\u{ff44}\\u{ff45}\\u{ff56}\\u{ff49}\\u{ff4e}.ai",
        "{line}"
    );
    guard.shutdown().await.unwrap();
}

#[tokio::test]
async fn malformed_request_heads_are_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut policy = test_policy(dir.path(), &[]);
    // Long enough that waiting for it could not pass for an immediate answer.
    policy.connection_limits.header_timeout_ms = 60_000;
    let guard = Guard::spawn(policy).await.unwrap();
    let heads: [&[u8]; 4] = [
        b"CONNECT api.devin.ai:443 HTTP/1.1\nHost: api.devin.ai\n\n",
        b"CONNECT api.devin.ai:443 HTTP/1.1\r\nHost: api.devin.ai\r\n folded\r\n",
        b"CONNECT api.devin.ai:443 HTTP/1.1\r\nHost: api\0devin.ai\r\n",
        b"CONNECT api.devin.ai:443 HTTP/1.1\rHost: api.devin.ai\r\n",
    ];
    for (i, head) in heads.iter().enumerate() {
        let start = std::time::Instant::now();
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            client::send_raw(guard.local_addr(), head),
        )
        .await;
        let shown = String::from_utf8_lossy(head);
        let (_s, reply) = answer
            .unwrap_or_else(|_| panic!("{shown:?}: no answer within 10 s"))
            .unwrap();
        assert_eq!(reply.status, 400, "{shown:?}: {}", reply.head);
        assert!(start.elapsed() < Duration::from_secs(10), "{shown:?}");
        let lines = wait_audit(guard.audit_path(), i + 1).await;
        assert_eq!(lines[i]["reason"], "bad_request", "{shown:?}: {}", lines[i]);
        assert_eq!(lines[i]["decision"], "deny");
    }
    guard.shutdown().await.unwrap();
}

/// `allow_ip_literals`: a CONNECT to an IP literal inside a listed range is tunnelled (TLS to an
/// IP certificate, so no SNI at all) and audited; outside the ranges, on another port, at the
/// guard itself or only through a broad range, it is refused before anything is dialled.
#[tokio::test]
async fn ip_literals_inside_listed_ranges_are_tunnelled_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(&["127.0.0.1"]);
    let echo = tls_server(pki.server.clone(), ServerMode::Echo).await;
    let listen = free_port();
    let mut policy = test_policy(dir.path(), &[]);
    policy.listen = SocketAddr::from(([127, 0, 0, 1], listen));
    policy.ports = vec![echo.port(), listen];
    policy.allow_ip_literals = vec!["127.0.0.1/32".into(), "2001:db8::/32".into()];
    policy.connection_limits.connect_timeout_ms = 500;
    let guard = Guard::spawn(policy).await.unwrap();
    let audit = guard.audit_path().to_owned();

    let tls = tls_via_guard(
        guard.local_addr(),
        &echo.to_string(),
        "127.0.0.1",
        pki.client.clone(),
    )
    .await
    .unwrap();
    let data = pattern(300_000, 3);
    assert!(echo_roundtrip(tls, data.clone()).await == data);
    let lines = wait_audit(&audit, 1).await;
    let line = last(&lines);
    assert_eq!(line["decision"], "allow", "{line}");
    assert_eq!(line["reason"], "ip_literal_allowed");
    assert_eq!(line["method"], "CONNECT");
    assert_eq!(line["host"], "127.0.0.1");
    assert_eq!(line["port"], echo.port());
    assert_eq!(line["resolved"], echo.to_string());
    assert!(line["sni"].is_null(), "the bytes are not inspected: {line}");
    assert_eq!(line["close"], "eof");
    assert!(line["bytes_up"].as_u64().unwrap() > data.len() as u64);
    assert!(line["bytes_down"].as_u64().unwrap() > data.len() as u64);
    assert_eq!(
        guard.stats().snapshot().resolutions,
        0,
        "nothing is resolved"
    );

    let p = echo.port();
    for (authority, status, reason) in [
        (format!("127.0.0.2:{p}"), 403, "ip_literal"),
        (format!("[::1]:{p}"), 403, "ip_literal"),
        (format!("[::ffff:127.0.0.1]:{p}"), 403, "ip_literal"),
        (format!("169.254.169.254:{p}"), 403, "ip_literal"),
        (format!("2130706433:{p}"), 403, "ip_literal"),
        ("127.0.0.1:443".to_owned(), 403, "port_not_allowed"),
        (format!("127.0.0.1:{listen}"), 403, "guard_self"),
    ] {
        let before = audit_lines(&audit).len();
        let (_, reply) = client::connect(guard.local_addr(), &authority)
            .await
            .unwrap();
        assert_eq!(reply.status, status, "{authority}: {}", reply.head);
        let lines = wait_audit(&audit, before + 1).await;
        let line = last(&lines);
        assert_eq!(line["decision"], "deny", "{authority}: {line}");
        assert_eq!(line["reason"], reason, "{authority}: {line}");
    }

    // An IPv6 literal in a listed range passes the policy; this machine has no route to the
    // documentation range, so the dial fails and says so.
    let before = audit_lines(&audit).len();
    let authority = format!("[2001:db8::1]:{p}");
    let (_, reply) = client::connect(guard.local_addr(), &authority)
        .await
        .unwrap();
    assert_eq!(reply.status, 502, "{}", reply.head);
    let lines = wait_audit(&audit, before + 1).await;
    let line = last(&lines);
    assert_eq!(line["host"], "2001:db8::1", "{line}");
    assert_eq!(line["resolved"], format!("[2001:db8::1]:{p}"), "{line}");
    assert!(
        line["reason"]
            .as_str()
            .is_some_and(|reason| reason.starts_with("upstream_connect_")),
        "{line}"
    );
    guard.shutdown().await.unwrap();

    // A range that also holds public addresses opens no loopback.
    let dir = tempfile::tempdir().unwrap();
    let mut policy = test_policy(dir.path(), &[]);
    policy.ports = vec![p];
    policy.allow_ip_literals = vec!["0.0.0.0/0".into()];
    let guard = Guard::spawn(policy).await.unwrap();
    let (_, reply) = client::connect(guard.local_addr(), &echo.to_string())
        .await
        .unwrap();
    assert_eq!(reply.status, 403, "{}", reply.head);
    let lines = wait_audit(guard.audit_path(), 1).await;
    assert_eq!(lines[0]["reason"], "address_loopback", "{}", lines[0]);
    guard.shutdown().await.unwrap();
}
