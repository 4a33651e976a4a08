//! The real `ratelimitd` binary as a child process on ephemeral loopback ports, its addresses read
//! from its JSON "listening" log line; killed on drop.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd_core::clock::Stopwatch;
use tonic::transport::Channel;

/// A running binary.
pub(crate) struct Spawned {
    pub child: Child,
    pub grpc_addr: String,
    pub http_addr: String,
    pub debug_addr: String,
    pub admin_addr: String,
    /// The Prometheus listener's address, or `off`.
    pub metrics_addr: String,
    /// The parsed JSON "listening" log line.
    pub log: serde_json::Value,
    /// The stderr lines written before it (startup).
    pub startup: Vec<String>,
    /// Every later stderr line, as the binary writes it.
    pub lines: std::sync::mpsc::Receiver<String>,
}

/// Starts the binary with `env` on top of loopback/ephemeral-port settings and JSON info logs;
/// returns once it reports its addresses.
pub(crate) fn spawn(env: &[(String, String)]) -> Spawned {
    starting(env).listening()
}

/// The lines `child` writes to its piped stderr, read on a thread (which keeps draining the log
/// until the child closes it), so that a reader waiting with a deadline meets it even when the
/// child hangs without printing.
pub(crate) fn stderr_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// A binary started and not yet listening (or not yet known to be): its startup log so far.
/// Killed on drop unless [`Starting::listening`] took it.
pub(crate) struct Starting {
    child: Option<Child>,
    lines: std::sync::mpsc::Receiver<String>,
    startup: Vec<String>,
}

/// Starts the binary as [`spawn`] does, without waiting for it.
pub(crate) fn starting(env: &[(String, String)]) -> Starting {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimitd"));
    let logs = [
        ("LOG_LEVEL", "info"),
        ("LOG_FORMAT", "json"),
        ("USE_STATSD", "false"),
        ("POLICY_ENABLED", "false"),
    ];
    cmd.envs(logs.into_iter().chain(super::LOOPBACK));
    cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let rx = stderr_lines(&mut child);
    Starting {
        child: Some(child),
        lines: rx,
        startup: Vec::new(),
    }
}

impl Starting {
    /// Waits (at most 30 s) for the next startup line containing `text` and returns it; panics
    /// with the log so far if the binary reports its addresses first, exits or stays silent.
    pub(crate) fn until_line(&mut self, text: &str) -> String {
        let watch = Stopwatch::start();
        while let Some(left) = Duration::from_secs(30).checked_sub(watch.elapsed()) {
            let Ok(line) = self.lines.recv_timeout(left) else {
                break;
            };
            self.startup.push(line.clone());
            if line.contains(text) {
                return line;
            }
            assert!(
                !line.contains("ratelimitd listening"),
                "listening before it wrote {text:?}:\n{}",
                self.startup.join("\n")
            );
        }
        panic!(
            "ratelimitd did not write {text:?}; it wrote:\n{}",
            self.startup.join("\n")
        );
    }

    /// Waits (at most 30 s) until the binary reports its addresses.
    pub(crate) fn listening(mut self) -> Spawned {
        let watch = Stopwatch::start();
        while let Some(left) = Duration::from_secs(30).checked_sub(watch.elapsed()) {
            let Ok(line) = self.lines.recv_timeout(left) else {
                break;
            };
            if line.contains("ratelimitd listening") {
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                let (_, lines) = std::sync::mpsc::channel();
                return Spawned {
                    grpc_addr: field("grpc_addr"),
                    http_addr: field("http_addr"),
                    debug_addr: field("debug_addr"),
                    admin_addr: field("admin_addr"),
                    metrics_addr: field("metrics_addr"),
                    child: self.child.take().unwrap(),
                    log: v,
                    startup: std::mem::take(&mut self.startup),
                    lines: std::mem::replace(&mut self.lines, lines),
                };
            }
            self.startup.push(line);
        }
        panic!(
            "ratelimitd did not report its addresses; it wrote:\n{}",
            self.startup.join("\n")
        );
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let status = self.child.wait();
        // A failing test shows what the binary said and how it ended: a process that died
        // under the test (a signal, a panic) otherwise looks like a refused connection.
        if std::thread::panicking() {
            // The process is gone, so its log ends soon; the bound is for a pipe held elsewhere.
            let mut later = Vec::new();
            while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
                later.push(line);
            }
            eprintln!(
                "ratelimitd ({status:?}) wrote:\n{}\n{}",
                self.startup.join("\n"),
                later.join("\n")
            );
        }
    }
}

/// Three binaries on one shared store, each with a gRPC client; stopped on drop.
pub(crate) struct Three {
    /// The config directory, which lives as long as the binaries.
    _dir: tempfile::TempDir,
    pub servers: Vec<Spawned>,
    /// One client per binary, in the order of `servers`.
    pub clients: Vec<RateLimitServiceClient<Channel>>,
}

/// Starts three binaries on `env` (the shared store's settings) serving `config` as `x.yaml`, all
/// at one fixed instant of the manual clock (1 000 000 s), so that no window rolls over and no
/// lease ends while a test counts, and connects a client to each.
pub(crate) async fn three_instances(mut env: Vec<(String, String)>, config: &str) -> Three {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.yaml"), config).unwrap();
    env.push(("RATELIMITD_CONFIG".into(), dir.path().display().to_string()));
    env.push(("RATELIMITD_TEST_MANUAL_CLOCK".into(), "1000000".into()));
    let servers: Vec<Spawned> = (0..3).map(|_| spawn(&env)).collect();
    let mut clients = Vec::new();
    for s in &servers {
        let url = format!("http://{}", s.grpc_addr);
        clients.push(RateLimitServiceClient::connect(url).await.unwrap());
    }
    Three {
        _dir: dir,
        servers,
        clients,
    }
}

/// `ratelimitd validate` on a new directory holding only `bad.yaml` (`yaml`), which it must refuse
/// with exit code 1; what it wrote to stderr.
pub(crate) fn validate_refuses(yaml: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.yaml"), yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
        .arg("validate")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Sends `sig` (`-TERM`, `-HUP`, `-STOP`, ...) to process `pid` with kill(1).
pub(crate) fn kill(sig: &str, pid: &str) {
    let ok = Command::new("kill").args([sig, pid]).status().unwrap();
    assert!(ok.success(), "kill {sig} {pid}");
}

/// Sends `sig` to `child` ([`kill`]).
pub(crate) fn signal(child: &Child, sig: &str) {
    kill(sig, &child.id().to_string());
}

/// Waits (at most 20 s, polling) for `child` to exit and returns its exit code; kills it and
/// panics if it does not.
pub(crate) fn wait_exit(child: &mut Child) -> Option<i32> {
    let watch = Stopwatch::start();
    while watch.elapsed() < Duration::from_secs(20) {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    panic!("did not exit");
}
