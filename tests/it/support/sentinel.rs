//! A real Redis Sentinel process (with, optionally, a password and TLS towards the primary) for
//! tests, run by the primary's program (`redis-server` or `valkey-server --sentinel`); killed on
//! drop.

use std::process::{Child, Stdio};
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use super::guard::{guarded, stop};
use super::redis::{RedisServer, cli, free_port};

/// A Redis Sentinel process monitoring one primary.
pub(crate) struct Sentinel {
    child: Child,
    _dir: tempfile::TempDir,
    pub port: u16,
    password: Option<String>,
}

impl Sentinel {
    /// Starts a sentinel (quorum 1, 1 s down-after) watching `primary` as `name`.
    pub(crate) fn start(name: &str, primary: &RedisServer) -> Sentinel {
        Sentinel::start_with(name, primary, "", None)
    }

    /// A sentinel with `conf` appended to its config (TLS towards the primary, its password)
    /// and, with `password`, `requirepass` for its own clients.
    pub(crate) fn start_with(
        name: &str,
        primary: &RedisServer,
        conf: &str,
        password: Option<&str>,
    ) -> Sentinel {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let conf_file = dir.path().join("sentinel.conf");
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {name} 127.0.0.1 {} 1\nsentinel down-after-milliseconds {name} 1000\nsentinel failover-timeout {name} 5000\n",
            dir.path().display(),
            primary.port
        ) + conf
            + &password
                .map(|p| format!("requirepass {p}\n"))
                .unwrap_or_default();
        std::fs::write(&conf_file, text).unwrap();
        let child = guarded(primary.flavor.program())
            .arg(&conf_file)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = Sentinel {
            child,
            _dir: dir,
            port,
            password: password.map(str::to_string),
        };
        let watch = Stopwatch::start();
        while !s
            .cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name])
            .contains(&primary.port.to_string())
        {
            assert!(
                watch.elapsed() < Duration::from_secs(10),
                "sentinel did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    /// Runs `redis-cli` against the sentinel.
    pub(crate) fn cli(&self, args: &[&str]) -> String {
        let mut target = vec!["-p".to_string(), self.port.to_string()];
        if let Some(p) = &self.password {
            target.extend(["-a".into(), p.clone(), "--no-auth-warning".into()]);
        }
        cli(&target, args)
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}
