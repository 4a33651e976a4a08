//! dynalite for the DynamoDB store's tests: an implementation of the DynamoDB API in Node.js
//! (npm package `dynalite`, in memory here). `tests/run.sh` installs it, pinned, into
//! `.npm-tools/` and exports `DYNALITE_BIN`; each test starts its own on a free loopback port,
//! under the shell guard, killed on drop, and creates the table with the binary's own
//! `ratelimitd dynamodb create-table`.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use super::guard::{guarded, stop};
use super::redis::free_port;

/// The fixed credentials the tests sign with (dynalite checks that requests are signed, not by
/// whom).
pub(crate) const ACCESS_KEY: &str = "ratelimitd-test";
/// See [`ACCESS_KEY`].
pub(crate) const SECRET: &str = "ratelimitd-test-secret";

/// `dynalite`: `DYNALITE_BIN` (when it names a file), else the one `tests/run.sh` put in
/// `.npm-tools/`; either way only when `node` is on `PATH` to run it.
pub(crate) fn dynalite_bin() -> Option<PathBuf> {
    super::require::find_on_path("node")?;
    if let Some(bin) = std::env::var_os("DYNALITE_BIN") {
        let bin = PathBuf::from(bin);
        return bin.is_file().then_some(bin);
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join(".npm-tools/node_modules/.bin/dynalite");
    local.is_file().then_some(local)
}

/// One dynalite with one table created.
pub(crate) struct Dynalite {
    child: Child,
    pub port: u16,
    pub table: String,
}

impl Dynalite {
    /// Starts dynalite and creates `table` in it with `ratelimitd dynamodb create-table`.
    pub(crate) fn start(table: &str) -> Dynalite {
        let bin = dynalite_bin().expect("dynalite: the test needs require!(Dynalite)");
        for _ in 0..3 {
            let port = free_port();
            let mut child = guarded(&bin)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--createTableMs", "0", "--updateTableMs", "0"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("dynalite starts");
            let watch = Stopwatch::start();
            while watch.elapsed() < Duration::from_secs(20) {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken meanwhile: try another
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    let d = Dynalite {
                        child,
                        port,
                        table: table.into(),
                    };
                    let out = d.create_table();
                    assert!(out.status.success(), "create-table: {out:?}");
                    return d;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            stop(&mut child);
        }
        panic!("dynalite did not start");
    }

    /// `http://127.0.0.1:port`.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The settings of a service on this dynalite's table, credentials included.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        [
            ("BACKEND_TYPE", "dynamodb".to_string()),
            ("DYNAMODB_TABLE", self.table.clone()),
            ("DYNAMODB_REGION", "us-east-1".into()),
            ("DYNAMODB_ENDPOINT", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET.into()),
            // Nothing of the host's AWS setup may leak into a test.
            ("AWS_CONFIG_FILE", "/dev/null".into()),
            ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null".into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Runs `ratelimitd dynamodb create-table` on this dynalite; its output.
    pub(crate) fn create_table(&self) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
            .args(["dynamodb", "create-table"])
            .envs(self.env())
            .output()
            .unwrap()
    }

    /// Sends `signal` (`-STOP`, `-CONT`) to dynalite itself (the guard's child).
    pub(crate) fn signal(&self, signal: &str) {
        let guard = self.child.id().to_string();
        let out = Command::new("pgrep").args(["-P", &guard]).output().unwrap();
        let pids = String::from_utf8_lossy(&out.stdout);
        let pid = pids
            .split_whitespace()
            .next()
            .expect("dynalite runs under its guard");
        super::process::kill(signal, pid);
    }
}

impl Drop for Dynalite {
    fn drop(&mut self) {
        // SIGKILL ends a stopped process too.
        stop(&mut self.child);
    }
}
