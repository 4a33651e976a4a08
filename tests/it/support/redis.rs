//! Real `redis-server` (or `valkey-server`, see [`Flavor`]) processes for tests: each on a unix
//! socket and a free loopback port in its own temp dir, killed on drop. `redis-cli` talks to
//! both (the Valkey build the tests use ships no `valkey-cli`), and builds Clusters of either.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use super::guard::{guarded, stop};
pub(crate) use super::valkey::Flavor;

/// One redis-server (or valkey-server).
pub(crate) struct RedisServer {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub port: u16,
    extra: Vec<String>,
    access: Access,
    /// The program this server runs.
    pub flavor: Flavor,
}

/// How a server is reached, beyond the defaults (plaintext TCP on `port`, no password).
#[derive(Debug, Clone, Default)]
pub(crate) struct Access {
    /// `port` is a TLS port and there is no plaintext one (`--port 0`); `cli` uses the socket.
    pub tls_only: bool,
    /// `--requirepass`: `cli` authenticates with it.
    pub password: Option<String>,
}

/// A free TCP port on 127.0.0.1 for a child server to bind (bound here, then released).
///
/// A port is free only until it is released, so it is taken below the kernel's ephemeral range:
/// the ports the kernel hands out meanwhile (another server's `…:0`, an outgoing connection)
/// come from that range and never collide with it. Successive calls walk the ports below it from
/// a start that depends on the process id, so two servers started together never get the same
/// one, and a port held by someone else is skipped.
pub(crate) fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const FIRST: u32 = 10_000;
    let span = ephemeral_low().saturating_sub(FIRST);
    if span >= 1_000 {
        let start = std::process::id().wrapping_mul(7_919) % span;
        for _ in 0..span {
            let step = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = FIRST + (start + step) % span;
            let port = u16::try_from(port).expect("below the ephemeral range");
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The first port of the kernel's ephemeral range (Linux's default when it cannot be read).
fn ephemeral_low() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
        .min(65_536)
}

impl RedisServer {
    /// Starts a plain server.
    pub(crate) fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments (e.g. `--requirepass x`).
    pub(crate) fn start_with(extra: &[&str]) -> RedisServer {
        RedisServer::start_on(Flavor::Redis, extra)
    }

    /// Starts a server of `flavor` with extra arguments.
    pub(crate) fn start_on(flavor: Flavor, extra: &[&str]) -> RedisServer {
        let mut s = RedisServer::not_started(extra);
        s.flavor = flavor;
        s.spawn_first();
        s
    }

    /// A server whose port and socket are chosen but which is not running yet (see `restart`).
    pub(crate) fn not_started(extra: &[&str]) -> RedisServer {
        RedisServer {
            child: None,
            dir: tempfile::tempdir().unwrap(),
            port: free_port(),
            extra: extra.iter().map(std::string::ToString::to_string).collect(),
            access: Access::default(),
            flavor: Flavor::Redis,
        }
    }

    /// Starts a server reached as `access` says; `extra` holds the matching `--tls-*` files and
    /// any other arguments (the password is passed here).
    pub(crate) fn start_secure(extra: &[&str], access: &Access) -> RedisServer {
        RedisServer::start_secure_on(Flavor::Redis, extra, access)
    }

    /// [`start_secure`](RedisServer::start_secure) with a server of `flavor`.
    pub(crate) fn start_secure_on(flavor: Flavor, extra: &[&str], access: &Access) -> RedisServer {
        let mut s = RedisServer::not_started(extra);
        s.flavor = flavor;
        if let Some(p) = &access.password {
            s.extra.extend(["--requirepass".into(), p.clone()]);
            s.extra.extend(["--masterauth".into(), p.clone()]);
        }
        s.access = access.clone();
        s.spawn_first();
        s
    }

    /// The first start: a port chosen by [`free_port`] is free only until it is released, so
    /// another process may take it before redis-server binds it; on an exit at start, retry
    /// (at most three times) on a fresh port. Restarts keep their port (clients reconnect to it).
    fn spawn_first(&mut self) {
        for _ in 0..2 {
            if self.try_spawn().is_ok() {
                return;
            }
            self.port = free_port();
        }
        self.spawn();
    }

    fn spawn(&mut self) {
        if let Err(status) = self.try_spawn() {
            panic!(
                "{} exited at start ({status}): bad arguments, or 127: not installed (tests/run.sh installs it)",
                self.flavor.name()
            );
        }
    }

    fn try_spawn(&mut self) -> Result<(), std::process::ExitStatus> {
        let port = self.port.to_string();
        let ports = if self.access.tls_only {
            vec!["--port", "0", "--tls-port", &port]
        } else {
            vec!["--port", &port]
        };
        let child = guarded(self.flavor.program())
            .args(ports)
            .args(["--bind", "127.0.0.1"])
            .args([
                "--unixsocket",
                self.socket().to_str().unwrap(),
                "--unixsocketperm",
                "700",
            ])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh runs");
        self.child = Some(child);
        self.wait_ready()
    }

    /// Waits for the socket and the port; the exit status when the server ended instead.
    fn wait_ready(&mut self) -> Result<(), std::process::ExitStatus> {
        let watch = Stopwatch::start();
        while watch.elapsed() < Duration::from_secs(10) {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                self.child = None;
                let _ = std::fs::remove_file(self.socket());
                return Err(status);
            }
            if self.socket().exists()
                && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{} on port {} did not start", self.flavor.name(), self.port);
    }

    /// The unix socket path.
    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// `host:port`.
    pub(crate) fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the server (as a crash would).
    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            stop(&mut c);
        }
        let _ = std::fs::remove_file(self.socket());
    }

    /// Starts it again on the same port and socket (empty: no persistence).
    pub(crate) fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// How many times this server has run `command` (lower case, as `INFO commandstats` names
    /// it), scripts' own calls included.
    pub(crate) fn calls(&self, command: &str) -> u64 {
        let prefix = format!("cmdstat_{command}:calls=");
        self.cli(&["INFO", "commandstats"])
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |n| n.parse().unwrap())
    }

    /// Runs `redis-cli` against this server and returns its trimmed output.
    pub(crate) fn cli(&self, args: &[&str]) -> String {
        let mut target = if self.access.tls_only {
            vec!["-s".to_string(), self.socket().display().to_string()]
        } else {
            vec!["-p".to_string(), self.port.to_string()]
        };
        if let Some(p) = &self.access.password {
            target.extend(["-a".into(), p.clone(), "--no-auth-warning".into()]);
        }
        cli(&target, args)
    }

    /// Env for a ratelimitd using this server over its unix socket.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        vec![
            ("BACKEND_TYPE".into(), "redis".into()),
            ("REDIS_SOCKET_TYPE".into(), "unix".into()),
            ("REDIS_URL".into(), self.socket().display().to_string()),
            ("EXPIRATION_JITTER_MAX_SECONDS".into(), "0".into()),
            // Generous: tests run on a loaded 2-core machine; production default is 15ms.
            ("REDIS_RESPONSE_TIMEOUT".into(), "2s".into()),
        ]
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A Redis Cluster of `n` masters (no replicas), created with `redis-cli --cluster create`
/// (also for a Cluster of valkey-server nodes).
pub(crate) struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

/// Attempts at making a Cluster before its test fails (each with fresh nodes on fresh ports).
const CREATE_ATTEMPTS: usize = 3;

/// `n` cluster-enabled nodes of `flavor`, each on free ports, with `extra` arguments.
fn start_nodes(flavor: Flavor, n: usize, extra: &[&str], access: &Access) -> Vec<RedisServer> {
    (0..n)
        .map(|_| {
            // The bus port defaults to port + 10000, past 65535 for a quarter of the ephemeral
            // range (and maybe taken): the node would not start. Choose it too.
            let bus_port = free_port().to_string();
            let mut args = vec![
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
                "--cluster-port",
                &bus_port,
            ];
            args.extend(extra);
            RedisServer::start_secure_on(flavor, &args, access)
        })
        .collect()
}

impl RedisCluster {
    pub(crate) fn start(n: usize) -> RedisCluster {
        RedisCluster::start_on(Flavor::Redis, n)
    }

    /// `n` masters of `flavor`, no replicas.
    pub(crate) fn start_on(flavor: Flavor, n: usize) -> RedisCluster {
        RedisCluster::create(flavor, (n, 0), &[], &Access::default(), &[])
    }

    /// A cluster whose nodes take `extra` arguments and are reached as `access` says;
    /// `create_args` are what `redis-cli` needs to reach them (`--tls`, `--cacert`, `-a`).
    pub(crate) fn start_secure(
        n: usize,
        extra: &[&str],
        access: &Access,
        create_args: &[&str],
    ) -> RedisCluster {
        RedisCluster::create(Flavor::Redis, (n, 0), extra, access, create_args)
    }

    /// `masters` masters with one replica each (`nodes` holds both; ask a node's `ROLE`).
    pub(crate) fn with_replicas(masters: usize, extra: &[&str]) -> RedisCluster {
        RedisCluster::create(
            Flavor::Redis,
            (masters * 2, 1),
            extra,
            &Access::default(),
            &[],
        )
    }

    fn create(
        flavor: Flavor,
        (n, replicas): (usize, usize),
        extra: &[&str],
        access: &Access,
        create_args: &[&str],
    ) -> RedisCluster {
        // Each node's ports are picked free, then bound by redis-server a moment later; another
        // test can take one in between, and then `--cluster create` fails. That is this
        // machine's race, not Redis's: start fresh nodes and try again, a bounded number of times.
        let mut failures = Vec::new();
        let nodes = loop {
            let nodes = start_nodes(flavor, n, extra, access);
            let mut create = Command::new("redis-cli");
            create.args(create_args).arg("--cluster").arg("create");
            for node in &nodes {
                create.arg(node.addr());
            }
            let out = create
                .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
                .output()
                .unwrap();
            if out.status.success() {
                break nodes;
            }
            failures.push(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
            assert!(
                failures.len() < CREATE_ATTEMPTS,
                "cluster create failed {CREATE_ATTEMPTS} times: {failures:#?}"
            );
            eprintln!("cluster create failed, starting fresh nodes: {failures:?}");
        };
        let watch = Stopwatch::start();
        loop {
            let ok = nodes
                .iter()
                .all(|node| node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
            if ok {
                break;
            }
            assert!(
                watch.elapsed() < Duration::from_secs(30),
                "cluster did not become ok"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        RedisCluster { nodes }
    }

    /// Env for a ratelimitd using this cluster.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let urls: Vec<String> = self.nodes.iter().map(RedisServer::addr).collect();
        vec![
            ("BACKEND_TYPE".into(), "redis".into()),
            ("REDIS_TYPE".into(), "cluster".into()),
            ("REDIS_SOCKET_TYPE".into(), "tcp".into()),
            ("REDIS_URL".into(), urls.join(",")),
            ("EXPIRATION_JITTER_MAX_SECONDS".into(), "0".into()),
            ("REDIS_RESPONSE_TIMEOUT".into(), "2s".into()),
        ]
    }

    /// The number of keys matching `pattern` (`KEYS` syntax) on each node: what one test wrote
    /// under a key prefix of its own on a Cluster other tests share.
    pub(crate) fn keys_per_node(&self, pattern: &str) -> Vec<usize> {
        self.nodes
            .iter()
            .map(|n| n.cli(&["KEYS", pattern]).lines().count())
            .collect()
    }

    /// The number of keys on each node.
    pub(crate) fn key_count(&self) -> Vec<usize> {
        self.nodes
            .iter()
            .map(|n| n.cli(&["DBSIZE"]).parse().unwrap_or(0))
            .collect()
    }
}

/// Runs `redis-cli` against `target` (`-p port` or `-s socket`, maybe `-a`) and returns its
/// trimmed output.
pub(super) fn cli(target: &[String], args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(target)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
