//! Egress guard benchmark: `cargo bench -p devin-bridge --bench guard`
//! (or `cargo xtask bench guard`).
//!
//! In one run, on loopback, side by side:
//! - throughput of a 256 MiB upload through the guard vs direct (goal: >= 80 % of direct);
//! - connection setup latency p50/p99 through the guard vs direct (goal: < 1 ms added at p50);
//!   direct = TCP connect + ClientHello + first byte back; via the guard the same after
//!   `CONNECT` / `200`;
//! - memory per idle tunnel: RSS growth for N established idle tunnels, minus the growth for N
//!   direct connections (client and server sides live in this process too) (goal: < 64 KiB).
//!
//! The guard runs on its own OS thread and runtime (it is its own process in production); the
//! clients and upstream servers on a two-worker runtime. A reference line shows what the
//! barest possible relay (two blocking threads, no checks) achieves on the same machine: a
//! relay moves every byte through the TCP stack twice more, so on a small machine that bound,
//! not the guard, caps the ratio. CPU time per GiB (all threads) is printed too.
//!
//! Environment: `GUARD_BENCH_MIB` (default 256), `GUARD_BENCH_ROUNDS` (default 2000),
//! `GUARD_BENCH_TUNNELS` (default 200), `GUARD_BENCH_BUFFER` (the guard's `buffer_bytes`),
//! `GUARD_BENCH_GUARD_THREADS` (default 1).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure aborts the run

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use devin_bridge_guard::testkit::ClientHelloBuilder;
use std::sync::Arc;

use devin_bridge_guard::{client, ConnectionLimits, Guard, GuardPolicy, GuardStats};
use devin_bridge_test_support::bench::{env_usize, percentile, status_kib, verdict};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// CPU time (user + system) of this whole process, every thread, from /proc/self/stat.
fn cpu_time() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(')')?.1.to_owned();
            let fields: Vec<&str> = after.split_whitespace().collect();
            // Fields 14 and 15 of stat(5) are utime and stime; `after` starts at field 3.
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            Some(utime + stime)
        })
        .unwrap_or(0);
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100)
        .max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

fn hello(name: &str) -> Vec<u8> {
    ClientHelloBuilder::new().sni(name).records()
}

/// A ServerHello record: the upstreams send it first, as a TLS server would, so that the
/// guard's handshake watch sees the handshake end (see `guard::handshake`).
fn server_hello() -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[0x42; 32]);
    body.extend_from_slice(&[0, 0x13, 0x01, 0, 0, 0]);
    let mut record = vec![
        0x16,
        3,
        3,
        0,
        body.len() as u8 + 4,
        2,
        0,
        0,
        body.len() as u8,
    ];
    record.extend_from_slice(&body);
    record
}

/// The client's first encrypted-looking record, after which the guard stops inspecting.
const APPLICATION_RECORD: [u8; 6] = [0x17, 3, 3, 0, 1, 0];

/// Sink: send a ServerHello, skip the ClientHello and the first application record, count
/// everything until EOF, answer the count (8 bytes).
async fn sink_server(hello_len: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind sink");
    let addr = listener.local_addr().expect("sink addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                if s.write_all(&server_hello()).await.is_err() {
                    return;
                }
                let mut buf = vec![0u8; 256 * 1024];
                let mut total = 0u64;
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => total += n as u64,
                    }
                }
                let payload = total.saturating_sub((hello_len + APPLICATION_RECORD.len()) as u64);
                let _ = s.write_all(&payload.to_be_bytes()).await;
            });
        }
    });
    addr
}

/// Ping: read the ClientHello, answer a ServerHello, hold the connection until the client
/// closes.
async fn ping_server(hello_len: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind ping");
    let addr = listener.local_addr().expect("ping addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = vec![0u8; hello_len];
                if s.read_exact(&mut buf).await.is_err() {
                    return;
                }
                drop(buf);
                let _ = s.write_all(&server_hello()).await;
                let mut one = [0u8; 1];
                let _ = s.read(&mut one).await;
            });
        }
    });
    addr
}

/// The simplest possible relay (two blocking threads per connection, no checks): what a
/// user-space TCP relay can do on this machine at all. Printed as a reference line.
fn reference_relay(upstream: SocketAddr) -> SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind relay");
    let addr = listener.local_addr().expect("relay addr");
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(up) = std::net::TcpStream::connect(upstream) else {
                return;
            };
            let (Ok(mut c_read), Ok(mut u_write)) = (client.try_clone(), up.try_clone()) else {
                return;
            };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = c_read.read(&mut buf) {
                    if n == 0 || u_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = u_write.shutdown(std::net::Shutdown::Write);
            });
            let (mut u_read, mut c_write) = (up, client);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = u_read.read(&mut buf) {
                    if n == 0 || c_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

async fn upload(mut s: TcpStream, hello: &[u8], total: usize) -> Duration {
    let chunk = vec![0x5au8; 256 * 1024];
    let start = Instant::now();
    s.write_all(hello).await.expect("send hello");
    let mut answer = vec![0u8; server_hello().len()];
    s.read_exact(&mut answer).await.expect("server hello");
    s.write_all(&APPLICATION_RECORD)
        .await
        .expect("application record");
    let mut left = total;
    while left > 0 {
        let n = left.min(chunk.len());
        s.write_all(&chunk[..n]).await.expect("upload");
        left -= n;
    }
    s.shutdown().await.expect("half-close");
    let mut ack = [0u8; 8];
    s.read_exact(&mut ack).await.expect("sink ack");
    let elapsed = start.elapsed();
    assert_eq!(
        u64::from_be_bytes(ack),
        total as u64,
        "sink received everything"
    );
    elapsed
}

async fn tunnel(guard: SocketAddr, name: &str) -> TcpStream {
    let (s, reply) = client::connect(guard, &format!("{name}:443"))
        .await
        .expect("CONNECT");
    assert_eq!(reply.status, 200, "{}", reply.head);
    s
}

async fn setup_once(
    target: SocketAddr,
    via: Option<SocketAddr>,
    hello: &[u8],
) -> (Duration, TcpStream) {
    let start = Instant::now();
    let mut s = match via {
        None => {
            let s = TcpStream::connect(target).await.expect("connect");
            s.set_nodelay(true).expect("nodelay");
            s
        }
        Some(guard) => tunnel(guard, "ping.devin.ai").await,
    };
    s.write_all(hello).await.expect("hello");
    let mut one = [0u8; 1];
    s.read_exact(&mut one).await.expect("first byte");
    (start.elapsed(), s)
}

/// The guard under test, on its own OS thread and runtime: in production it is its own
/// process, scheduled by the OS apart from its clients.
struct BenchGuard {
    addr: SocketAddr,
    stats: Arc<GuardStats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BenchGuard {
    fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn start_guard(dir: &std::path::Path, sink: SocketAddr, ping: SocketAddr) -> BenchGuard {
    let mut policy = GuardPolicy {
        listen: "127.0.0.1:0".parse().expect("addr"),
        audit: Some(dir.join("bench-audit.jsonl")),
        allow: vec!["*.devin.ai".into()],
        allow_ranges: vec!["127.0.0.0/8".into()],
        connection_limits: ConnectionLimits {
            max_connections: 4096,
            buffer_bytes: env_usize(
                "GUARD_BENCH_BUFFER",
                ConnectionLimits::default().buffer_bytes,
            ),
            ..ConnectionLimits::default()
        },
        ..GuardPolicy::default()
    };
    policy
        .resolve
        .insert("sink.devin.ai".into(), sink.to_string());
    policy
        .resolve
        .insert("ping.devin.ai".into(), ping.to_string());
    let threads = env_usize("GUARD_BENCH_GUARD_THREADS", 1).max(1);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = if threads == 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .enable_all()
                .build()
        }
        .expect("guard runtime");
        runtime.block_on(async move {
            let guard = Guard::bind(policy).await.expect("bind guard");
            let _ = ready_tx.send((guard.local_addr(), guard.stats()));
            guard
                .serve(async move {
                    let _ = stop_rx.await;
                })
                .await
                .expect("serve");
        });
    });
    let (addr, stats) = ready_rx.recv().expect("guard started");
    BenchGuard {
        addr,
        stats,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}

async fn bench() {
    let mib = env_usize("GUARD_BENCH_MIB", 256);
    let rounds = env_usize("GUARD_BENCH_ROUNDS", 2000);
    let tunnels = env_usize("GUARD_BENCH_TUNNELS", 200).max(1);
    let total = mib * 1024 * 1024;
    let sink_hello = hello("sink.devin.ai");
    let ping_hello = hello("ping.devin.ai");
    let sink = sink_server(sink_hello.len()).await;
    let ping = ping_server(ping_hello.len()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let guard = start_guard(dir.path(), sink, ping);
    let g = guard.addr;

    // Throughput: alternate direct and guarded, three of each, keep the best of each.
    let relay = reference_relay(sink);
    let mut relay_best = Duration::MAX;
    let mut direct_best = Duration::MAX;
    let mut guard_best = Duration::MAX;
    let (mut direct_cpu, mut guard_cpu) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..3 {
        let s = TcpStream::connect(sink).await.expect("connect sink");
        s.set_nodelay(true).expect("nodelay");
        let c0 = cpu_time();
        direct_best = direct_best.min(upload(s, &sink_hello, total).await);
        let c1 = cpu_time();
        let s = tunnel(g, "sink.devin.ai").await;
        guard_best = guard_best.min(upload(s, &sink_hello, total).await);
        let c2 = cpu_time();
        direct_cpu += c1.saturating_sub(c0);
        guard_cpu += c2.saturating_sub(c1);
        let s = TcpStream::connect(relay).await.expect("connect relay");
        s.set_nodelay(true).expect("nodelay");
        relay_best = relay_best.min(upload(s, &sink_hello, total).await);
    }
    let cpu_per_gib = |cpu: Duration| cpu.as_secs_f64() * 1000.0 / (3.0 * mib as f64 / 1024.0);
    let mibs = |d: Duration| mib as f64 / d.as_secs_f64();
    let (direct_tput, guard_tput) = (mibs(direct_best), mibs(guard_best));
    let ratio = guard_tput / direct_tput * 100.0;
    let relay_tput = mibs(relay_best);

    // Setup latency: interleaved so both see the same machine state.
    for _ in 0..50 {
        let _ = setup_once(ping, None, &ping_hello).await;
        let _ = setup_once(ping, Some(g), &ping_hello).await;
    }
    let mut direct_lat = Vec::with_capacity(rounds);
    let mut guard_lat = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        direct_lat.push(setup_once(ping, None, &ping_hello).await.0);
        guard_lat.push(setup_once(ping, Some(g), &ping_hello).await.0);
    }
    direct_lat.sort();
    guard_lat.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (d50, d99) = (
        us(percentile(&direct_lat, 50.0)),
        us(percentile(&direct_lat, 99.0)),
    );
    let (g50, g99) = (
        us(percentile(&guard_lat, 50.0)),
        us(percentile(&guard_lat, 99.0)),
    );

    // Memory per idle tunnel.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r0 = status_kib(None, "VmRSS:");
    let mut direct_conns = Vec::with_capacity(tunnels);
    for _ in 0..tunnels {
        direct_conns.push(setup_once(ping, None, &ping_hello).await.1);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r1 = status_kib(None, "VmRSS:");
    let mut guard_conns = Vec::with_capacity(tunnels);
    for _ in 0..tunnels {
        guard_conns.push(setup_once(ping, Some(g), &ping_hello).await.1);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r2 = status_kib(None, "VmRSS:");
    let active = guard.stats.snapshot().active;
    let direct_per = (r1.saturating_sub(r0)) as f64 / tunnels as f64;
    let guarded_per = (r2.saturating_sub(r1)) as f64 / tunnels as f64;
    let guard_per = (guarded_per - direct_per).max(0.0);
    drop(direct_conns);
    drop(guard_conns);

    println!();
    println!("egress guard benchmark (loopback, one run; {mib} MiB, {rounds} setups, {tunnels} idle tunnels, {active} open at measurement)");
    println!(
        "{:<34} {:>12} {:>12} {:>12} {:>16} {:>6}",
        "metric", "direct", "via guard", "ratio/delta", "goal", "result"
    );
    println!(
        "{:<34} {:>12.0} {:>12.0} {:>11.1}% {:>16} {:>6}",
        format!("throughput {mib} MiB upload (MiB/s)"),
        direct_tput,
        guard_tput,
        ratio,
        ">= 80 %",
        verdict(ratio >= 80.0)
    );
    println!(
        "{:<34} {:>12.0} {:>12.0} {:>11.1}% {:>16} {:>6}",
        "  reference: bare relay (MiB/s)",
        direct_tput,
        relay_tput,
        relay_tput / direct_tput * 100.0,
        "(machine limit)",
        "-"
    );
    println!(
        "{:<34} {:>12.0} {:>12.0} {:>+12.0} {:>16} {:>6}",
        "CPU per GiB moved, all parties (ms)",
        cpu_per_gib(direct_cpu),
        cpu_per_gib(guard_cpu),
        cpu_per_gib(guard_cpu) - cpu_per_gib(direct_cpu),
        "(reported)",
        "-"
    );
    println!(
        "{:<34} {:>12.1} {:>12.1} {:>+12.1} {:>16} {:>6}",
        "setup latency p50 (us)",
        d50,
        g50,
        g50 - d50,
        "< 1000 us added",
        verdict(g50 - d50 < 1000.0)
    );
    println!(
        "{:<34} {:>12.1} {:>12.1} {:>+12.1} {:>16} {:>6}",
        "setup latency p99 (us)",
        d99,
        g99,
        g99 - d99,
        "(reported)",
        "-"
    );
    println!(
        "{:<34} {:>12.1} {:>12.1} {:>12.1} {:>16} {:>6}",
        "memory per idle tunnel (KiB)",
        direct_per,
        guarded_per,
        guard_per,
        "< 64 KiB",
        verdict(guard_per < 64.0)
    );
    println!("(memory: 'direct' = client+server per connection, 'via guard' = the same plus the guard; ratio/delta column = guard's own share)");
    guard.stop();
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` would pass nothing useful: run
    // only when benchmarking.
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("guard benchmark: run with `cargo bench -p devin-bridge --bench guard`");
        return;
    }
    // Clients and upstream servers: two workers, like the machine's two cores.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(bench());
}
