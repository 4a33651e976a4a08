//! Real `memcached` processes for tests (Debian package `memcached`): each on a free loopback
//! port, under the shell guard, killed on drop; and a tiny text-protocol client to read counters
//! back as another fleet (Go's) would see them.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use super::guard::{guarded, stop};
use super::redis::free_port;

/// One memcached.
pub(crate) struct Memcached {
    child: Child,
    pub port: u16,
    /// `127.0.0.1:port`, kept so that [`Memcached::env`] can lend it.
    host_port: String,
}

impl Memcached {
    /// Starts a server (64 MiB, TCP only, loopback) and waits until it answers `version`.
    pub(crate) fn start() -> Memcached {
        for _ in 0..3 {
            let port = free_port();
            let mut child = guarded("memcached")
                // `-u nobody`: memcached refuses to run as root without a user to switch to.
                .args([
                    "-u",
                    "nobody",
                    "-l",
                    "127.0.0.1",
                    "-U",
                    "0",
                    "-m",
                    "64",
                    "-p",
                ])
                .arg(port.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("memcached is installed (tests/run.sh installs it)");
            let watch = Stopwatch::start();
            while watch.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken meanwhile: try another
                }
                if ask(port, "version\r\n").is_some_and(|l| l.starts_with("VERSION")) {
                    let host_port = format!("127.0.0.1:{port}");
                    return Memcached {
                        child,
                        port,
                        host_port,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            stop(&mut child);
        }
        panic!("memcached did not start");
    }

    /// `host:port` for `MEMCACHE_HOST_PORT`.
    pub(crate) fn addr(&self) -> String {
        self.host_port.clone()
    }

    /// The settings of a service on this server (`BACKEND_TYPE=memcache`, `MEMCACHE_HOST_PORT`),
    /// then `more`.
    pub(crate) fn env<'a>(&'a self, more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut env = vec![
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_HOST_PORT", self.host_port.as_str()),
        ];
        env.extend_from_slice(more);
        env
    }

    /// Sends `cmd` and returns the first reply line (without `\r\n`), or `None` if unreachable.
    pub(crate) fn command(&self, cmd: &str) -> Option<String> {
        ask(self.port, cmd)
    }

    /// The value stored under `key` (`get`), if any.
    pub(crate) fn get(&self, key: &str) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(format!("get {key}\r\n").as_bytes()).ok()?;
        let mut r = BufReader::new(s);
        let mut head = String::new();
        r.read_line(&mut head).ok()?;
        if !head.starts_with("VALUE ") {
            return None;
        }
        let mut value = String::new();
        r.read_line(&mut value).ok()?;
        Some(value.trim_end().to_string())
    }

    /// Stops the server (SIGKILL, as a crash would).
    pub(crate) fn kill(mut self) {
        stop(&mut self.child);
        std::mem::forget(self);
    }
}

/// Sends `cmd` to the memcached on `port`; its first reply line.
fn ask(port: u16, cmd: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(cmd.as_bytes()).ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    Some(line.trim_end().to_string())
}

impl Drop for Memcached {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}
