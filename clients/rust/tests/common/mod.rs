//! The real ratelimitd binary of this repository as a child process on 127.0.0.1 ephemeral ports,
//! with its configuration in a temp dir and the test-only manual clock; killed on drop. Plus the
//! two misbehaving peers the client must survive: one that accepts and never answers, and one that
//! answers whatever bytes a test gives it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ratelimitd_client::clock::{Clock, SystemClock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The manual clock's start, in Unix seconds: a multiple of 60 (the start of a minute), so the
/// windows the tests reason about are whole.
pub const T0: u64 = 1_800_000_000;

/// A running ratelimitd.
pub struct Ratelimitd {
    child: Child,
    _dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT` of the HTTP listener (`/check`).
    pub http: String,
    /// `http://127.0.0.1:PORT` of the gRPC listener.
    pub grpc: String,
    debug: String,
}

/// The binary: `RATELIMITD_BIN`, else `ratelimitd` beside this test's own target directory.
fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("RATELIMITD_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().expect("test binary path");
    // target/debug/deps/<test> -> target/debug/ratelimitd
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("ratelimitd"));
    match bin {
        Some(b) if b.exists() => b,
        _ => panic!(
            "no ratelimitd binary beside {}: build it with `cargo build --bin ratelimitd` \
             (same target dir) or set RATELIMITD_BIN",
            exe.display()
        ),
    }
}

impl Ratelimitd {
    /// Starts ratelimitd with `yaml` as its only configuration file, the clock at [`T0`].
    #[allow(clippy::zombie_processes)] // The returned value waits for the child in its Drop.
    pub fn start(yaml: &str) -> Ratelimitd {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.yaml"), yaml).unwrap();
        let mut command = Command::new(binary());
        // Every listener (HTTP, gRPC, debug, admin) on 127.0.0.1, on a port the system picks.
        for listener in ["", "GRPC_", "DEBUG_", "ADMIN_"] {
            command.env(format!("{listener}HOST"), "127.0.0.1");
            command.env(format!("{listener}PORT"), "0");
        }
        let mut child = command
            .envs([
                ("LOG_LEVEL", "info"),
                ("LOG_FORMAT", "json"),
                ("USE_STATSD", "false"),
                ("POLICY_ENABLED", "false"),
            ])
            .env("RATELIMITD_CONFIG", dir.path())
            .env("RATELIMITD_TEST_MANUAL_CLOCK", T0.to_string())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ratelimitd starts");
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let started = SystemClock.now();
        let mut seen = Vec::new();
        while let Some(left) = Duration::from_secs(30).checked_sub(started.elapsed()) {
            let Ok(line) = rx.recv_timeout(left) else {
                break;
            };
            if line.contains("ratelimitd listening") {
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                let addr = |k: &str| format!("http://{}", v[k].as_str().unwrap_or_default());
                return Ratelimitd {
                    http: addr("http_addr"),
                    grpc: addr("grpc_addr"),
                    debug: v["debug_addr"].as_str().unwrap_or_default().to_owned(),
                    child,
                    _dir: dir,
                };
            }
            seen.push(line);
        }
        let _ = child.kill();
        panic!(
            "ratelimitd did not report its addresses:\n{}",
            seen.join("\n")
        );
    }

    /// Sets ratelimitd's manual clock to `secs` after the epoch.
    pub fn set_time(&self, secs: u64) {
        let mut s = std::net::TcpStream::connect(&self.debug).unwrap();
        write!(s, "GET /test/clock?set={secs} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
            "{answer}"
        );
    }
}

impl Drop for Ratelimitd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An address where nothing listens (a port just released).
pub async fn unreachable() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}

/// A peer that accepts connections, reads, and never answers. Up to 64 connections are held
/// until the test's runtime ends.
pub async fn silent() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while held.len() < 64 {
            let Ok((s, _)) = l.accept().await else { return };
            held.push(s);
        }
    });
    format!("http://{addr}")
}

/// A peer that answers every HTTP/1.1 request on a connection with `answer` (keeping the
/// connection open), and counts the connections it accepted. Serves up to 64 connections.
pub async fn scripted(answer: &'static [u8]) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        for _ in 0..64 {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut pending = Vec::new();
                loop {
                    let Ok(n) = s.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    pending.extend_from_slice(&buf[..n]);
                    // One request = headers plus a Content-Length body.
                    while let Some(end) = request_end(&pending) {
                        pending.drain(..end);
                        if s.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (format!("http://{addr}"), accepted)
}

/// Where the first complete request in `buf` ends, if it is complete.
fn request_end(buf: &[u8]) -> Option<usize> {
    let head = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let text = String::from_utf8_lossy(&buf[..head]).to_ascii_lowercase();
    let len = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    (buf.len() >= head + len).then_some(head + len)
}
