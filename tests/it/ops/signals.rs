//! The real binary and process signals: SIGHUP reloads the configuration; SIGTERM during traffic
//! lets requests in flight finish and exits 0; either one sent the moment a port answers is acted
//! on (neither lost nor fatal).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::process::{self, Spawned, signal, wait_exit};
use crate::support::redis::free_port;
use crate::support::request;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd_core::clock::Stopwatch;

const CFG: &str = "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1000000}}\n";

/// Starts the binary on loopback ephemeral ports with `CFG` (reload by file events only).
fn spawn() -> (Spawned, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.yaml"), CFG).unwrap();
    let env = [
        (
            "RATELIMITD_CONFIG".to_string(),
            dir.path().display().to_string(),
        ),
        ("CONFIG_POLL_INTERVAL".to_string(), "0".to_string()),
    ];
    (process::spawn(&env), dir)
}

/// A raw HTTP/1.1 exchange; returns the response text.
fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn sighup_reloads_the_configuration() {
    let (mut s, _dir) = spawn();
    assert!(http_get(&s.debug_addr, "/rlconfig").contains("# version: 1\n"));
    signal(&s.child, "-HUP");
    let watch = Stopwatch::start();
    while !http_get(&s.debug_addr, "/rlconfig").contains("# version: 2\n") {
        assert!(
            watch.elapsed() < Duration::from_secs(10),
            "SIGHUP did not reload"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        http_get(&s.http_addr, "/healthcheck").ends_with("OK"),
        "still serving after SIGHUP"
    );
    signal(&s.child, "-TERM");
    assert_eq!(wait_exit(&mut s.child), Some(0));
}

/// A shell that sends signals with its builtin `kill`: a line written to it is a signal sent
/// within microseconds, where starting `kill(1)` takes milliseconds, longer than the gap between
/// a port opening and the service being ready that these tests aim at.
struct Sender {
    sh: std::process::Child,
    commands: std::process::ChildStdin,
}

impl Sender {
    fn new() -> Sender {
        let mut sh = std::process::Command::new("sh")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let commands = sh.stdin.take().unwrap();
        Sender { sh, commands }
    }

    fn send(&mut self, sig: &str, pid: u32) {
        writeln!(self.commands, "kill {sig} {pid}").unwrap();
        self.commands.flush().unwrap();
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let _ = self.sh.kill();
        let _ = self.sh.wait();
    }
}

/// A binary started by [`signalled_at_first_connect`]; killed on drop.
struct Early {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Drop for Early {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary, started with `CFG` on a gRPC port chosen here (the first listener it opens), and
/// `sig` sent the moment a connection to that port succeeds: the earliest a client, a probe or
/// an operator could know the process is there.
fn signalled_at_first_connect(sig: &str, sender: &mut Sender) -> Early {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.yaml"), CFG).unwrap();
    let port = free_port();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
        .envs(crate::support::LOOPBACK)
        .envs([
            ("GRPC_PORT", port.to_string()),
            ("RATELIMITD_CONFIG", dir.path().display().to_string()),
            ("CONFIG_POLL_INTERVAL", "0".into()),
            ("LOG_LEVEL", "info".into()),
            ("LOG_FORMAT", "json".into()),
            ("USE_STATSD", "false".into()),
            ("POLICY_ENABLED", "false".into()),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let mut early = Early {
        child,
        lines,
        _dir: dir,
    };
    let stderr = std::io::BufReader::new(early.child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(stderr).map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let watch = Stopwatch::start();
    // Connection attempts back to back: a refused one costs microseconds, and the start that
    // ends them takes well under the bound.
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if watch.elapsed() > Duration::from_secs(30) || early.child.try_wait().unwrap().is_some() {
            let said: Vec<String> = early.lines.try_iter().collect();
            panic!("port {port} never answered:\n{}", said.join("\n"));
        }
    }
    sender.send(sig, early.child.id());
    early
}

/// The next line of `early`'s log containing `what` (at most 20 s); panics with what came
/// instead, and how the process ended if it did.
fn line_with(early: &mut Early, what: &str) -> String {
    let lines = &early.lines;
    let watch = Stopwatch::start();
    let mut seen = Vec::new();
    while let Some(left) = Duration::from_secs(20).checked_sub(watch.elapsed()) {
        let Ok(line) = lines.recv_timeout(left) else {
            break;
        };
        if line.contains(what) {
            return line;
        }
        seen.push(line);
    }
    let status = early.child.try_wait().unwrap();
    panic!(
        "no line with {what:?} (the process: {status:?}); it wrote:\n{}",
        seen.join("\n")
    );
}

#[test]
fn a_sighup_as_soon_as_a_port_answers_reloads_and_never_kills() {
    let mut sender = Sender::new();
    for start in 0..10 {
        let mut early = signalled_at_first_connect("-HUP", &mut sender);
        let banner = line_with(&mut early, "ratelimitd listening");
        let banner: serde_json::Value = serde_json::from_str(&banner).unwrap();
        let debug = banner["debug_addr"].as_str().unwrap().to_string();
        // The signal is acted on once the service is ready, however early it came.
        let reloaded = Stopwatch::start();
        loop {
            let status = early.child.try_wait().unwrap();
            assert!(
                status.is_none(),
                "start {start}: the SIGHUP ended the process ({status:?})"
            );
            if http_get(&debug, "/rlconfig").contains("# version: 2\n") {
                break;
            }
            assert!(
                reloaded.elapsed() < Duration::from_secs(20),
                "start {start}: the SIGHUP was lost (still version 1)"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        signal(&early.child, "-TERM");
        assert_eq!(wait_exit(&mut early.child), Some(0), "start {start}");
    }
}

#[test]
fn a_sigterm_as_soon_as_a_port_answers_drains_and_exits_zero() {
    let mut sender = Sender::new();
    for start in 0..10 {
        let mut early = signalled_at_first_connect("-TERM", &mut sender);
        line_with(&mut early, "shutdown requested; draining");
        assert_eq!(wait_exit(&mut early.child), Some(0), "start {start}");
    }
}

#[test]
fn sigterm_during_traffic_fails_no_request_in_flight_and_exits_zero() {
    let (mut s, _dir) = spawn();
    // gRPC traffic on 4 connections until the process is gone.
    let stop = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    let (ok_before, err_before) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut load = Vec::new();
    for _ in 0..4 {
        let url = format!("http://{}", s.grpc_addr);
        let (stop, killed) = (stop.clone(), killed.clone());
        let (ok_before, err_before) = (ok_before.clone(), err_before.clone());
        load.push(rt.spawn(async move {
            let mut c = RateLimitServiceClient::connect(url).await.unwrap();
            for _ in 0..1_000_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                // Judged by when the request was sent: one sent before the signal is in flight
                // (or already answered) when SIGTERM lands and must succeed. One sent after may
                // meet the GOAWAY or a closed listener, which is the point of stopping. (Judging
                // by when the answer came back, as this once did, counted a request refused
                // after the signal whenever it beat the flag.)
                let sent_before = !killed.load(Ordering::SeqCst);
                let r = c.should_rate_limit(request("d", &[&[("k", "v")]])).await;
                if sent_before {
                    let n = if r.is_ok() { &ok_before } else { &err_before };
                    n.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    // Three /json requests provably in flight: headers and half the body sent before SIGTERM.
    let body = r#"{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#;
    let (head, tail) = body.split_at(body.len() / 2);
    let mut in_flight: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut c = TcpStream::connect(&s.http_addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            let len = body.len();
            write!(
                c,
                "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n{head}"
            )
            .unwrap();
            c
        })
        .collect();
    // Traffic is flowing (bounded wait: a loaded machine can take a while to connect), and the
    // three raw connections have had time to be accepted.
    let watch = Stopwatch::start();
    while ok_before.load(Ordering::SeqCst) == 0 && watch.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    // Flag first: every request counted was sent before the signal (starting `kill` alone takes
    // longer than a loopback round trip, so they are on the server by the time it lands).
    killed.store(true, Ordering::SeqCst);
    // A client that read the flag just before it was set may be descheduled before its request
    // leaves; on a loaded machine that took long enough for SIGTERM to land first. Give such
    // requests time to reach the server (the assertion below is unchanged).
    std::thread::sleep(Duration::from_millis(100));
    signal(&s.child, "-TERM");
    std::thread::sleep(Duration::from_millis(300));
    for c in &mut in_flight {
        c.write_all(tail.as_bytes()).unwrap();
        let mut resp = String::new();
        let _ = c.read_to_string(&mut resp);
        assert!(
            resp.starts_with("HTTP/1.1 200"),
            "in-flight request failed: {resp:?}"
        );
    }
    assert_eq!(wait_exit(&mut s.child), Some(0));
    stop.store(true, Ordering::SeqCst);
    for t in load {
        let _ = rt.block_on(t);
    }
    assert!(ok_before.load(Ordering::SeqCst) > 0, "traffic ran");
    assert_eq!(
        err_before.load(Ordering::SeqCst),
        0,
        "no request sent before the signal failed"
    );
}

#[test]
fn with_a_shutdown_delay_sigterm_turns_unready_but_keeps_serving_until_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.yaml"), CFG).unwrap();
    let env = [
        ("RATELIMITD_CONFIG", dir.path().display().to_string()),
        ("SHUTDOWN_DELAY", "60s".to_string()),
    ];
    let env: Vec<_> = env.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let mut s = process::spawn(&env);
    assert!(http_get(&s.http_addr, "/readyz").starts_with("HTTP/1.1 200"));
    signal(&s.child, "-TERM");
    let watch = Stopwatch::start();
    while !http_get(&s.http_addr, "/readyz").starts_with("HTTP/1.1 503") {
        assert!(watch.elapsed() < Duration::from_secs(10), "still ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Unready, yet new connections are accepted and answered.
    let ready = http_get(&s.http_addr, "/readyz");
    assert!(ready.contains("draining"), "{ready}");
    assert!(http_get(&s.http_addr, "/livez").starts_with("HTTP/1.1 200"));
    let json = r#"{"domain":"d","descriptors":[{"entries":[{"key":"k"}]}]}"#;
    let mut c = TcpStream::connect(&s.http_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let post = format!(
        "POST /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{json}",
        json.len()
    );
    c.write_all(post.as_bytes()).unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "still running within the delay"
    );
    // Asked again: the delay is cut short and the process exits cleanly.
    signal(&s.child, "-TERM");
    assert_eq!(wait_exit(&mut s.child), Some(0));
}
