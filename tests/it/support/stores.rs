//! One scenario, every store: the memory store, a single Redis and a 3-master Redis Cluster, and
//! the same two on Valkey (as limitador runs one suite over each of its storages). A scenario is an
//! `async fn(StoreKind)` that starts its server with [`TestServer::start_with_store`];
//! `on_every_store!(scenario)` turns it into five tests, `scenario::memory`, `scenario::redis`,
//! `scenario::cluster`, `scenario::valkey` and `scenario::valkey_cluster` (all but the first
//! skipped, in the fast tier, without redis-server, and the last two without valkey-server:
//! `require.rs`).
//!
//! Starting a Cluster takes seconds, so the test binary starts one single server and one Cluster
//! of each program, the first time a test asks, and every test of the run shares them. They are statics and never dropped; that leaks
//! nothing, because every server runs under the shell guard (`guard.rs`), which kills it when the
//! test process exits, and a sweeper removes their temp dirs then. Tests sharing a server must not see each other's counters: each service
//! gets a `CACHE_KEY_PREFIX` of its own (a scenario that needs an empty server starts its own).

use std::process::Child;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use ratelimitd_core::algorithm::LimitSpec;
use ratelimitd_core::store::Op;

use super::TestServer;
use super::guard::remove_at_exit;
use super::redis::{Flavor, RedisCluster, RedisServer};

/// Where a scenario's counters live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreKind {
    /// The embedded in-process store (`BACKEND_TYPE` unset).
    Memory,
    /// The run's shared single Redis, over its unix socket.
    Redis,
    /// The run's shared Redis Cluster of 3 masters, over TCP.
    Cluster,
    /// The run's shared single valkey-server, over its unix socket.
    Valkey,
    /// The run's shared Cluster of 3 valkey-server masters, over TCP.
    ValkeyCluster,
}

/// A server kept in a static, with the process that removes its temp dirs at exit.
struct Shared<T> {
    server: T,
    _sweeper: Child,
}

/// The slot of `flavor` in the statics below.
fn index(flavor: Flavor) -> usize {
    match flavor {
        Flavor::Redis => 0,
        Flavor::Valkey => 1,
    }
}

/// The single Redis shared by the tests of this run (started on first use).
pub(crate) fn shared_redis() -> &'static RedisServer {
    shared_single(Flavor::Redis)
}

/// The single server of `flavor` shared by the tests of this run (started on first use).
pub(crate) fn shared_single(flavor: Flavor) -> &'static RedisServer {
    static SINGLE: [OnceLock<Shared<RedisServer>>; 2] = [const { OnceLock::new() }; 2];
    let shared = SINGLE[index(flavor)].get_or_init(|| {
        let server = RedisServer::start_on(flavor, &[]);
        let _sweeper = remove_at_exit(&[server.dir.path()]);
        Shared { server, _sweeper }
    });
    &shared.server
}

/// The Redis Cluster shared by the tests of this run (started on first use).
pub(crate) fn shared_cluster() -> &'static RedisCluster {
    shared_cluster_of(Flavor::Redis)
}

/// The Cluster of 3 `flavor` masters shared by the tests of this run (started on first use).
pub(crate) fn shared_cluster_of(flavor: Flavor) -> &'static RedisCluster {
    static CLUSTER: [OnceLock<Shared<RedisCluster>>; 2] = [const { OnceLock::new() }; 2];
    let shared = CLUSTER[index(flavor)].get_or_init(|| {
        let server = RedisCluster::start_on(flavor, 3);
        let dirs: Vec<_> = server.nodes.iter().map(|n| n.dir.path()).collect();
        let _sweeper = remove_at_exit(&dirs);
        Shared { server, _sweeper }
    });
    &shared.server
}

/// A `CACHE_KEY_PREFIX` no other service of this process uses: the test's name (libtest names
/// the test's thread after it; it helps when reading keys in a shared server) and a counter
/// (which alone makes it unique).
fn unique_prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("test");
    // The default key format puts the limit's identity in `{…}`, which Redis Cluster hashes
    // alone (the first `{…}` of a key): a brace in the prefix would move every key of one
    // limit's request into the prefix's slot, or split them. Test names have none, but be sure.
    let name: String = name
        .chars()
        .map(|c| if c == '{' || c == '}' { '_' } else { c })
        .collect();
    format!("{n}.{name}:")
}

impl StoreKind {
    /// Env for a service on this store: the shared server's connection settings and a key
    /// prefix of its own; nothing for memory.
    pub(crate) fn env(self) -> Vec<(String, String)> {
        let mut env = match self {
            StoreKind::Memory => return Vec::new(),
            StoreKind::Redis => shared_redis().env(),
            StoreKind::Cluster => shared_cluster().env(),
            StoreKind::Valkey => shared_single(Flavor::Valkey).env(),
            StoreKind::ValkeyCluster => shared_cluster_of(Flavor::Valkey).env(),
        };
        env.push(("CACHE_KEY_PREFIX".into(), unique_prefix()));
        env
    }
}

impl TestServer {
    /// Starts a service whose config dir holds `files` (name, YAML) on `store`; `env` comes on
    /// top of the store's settings (so a test may still set its own `CACHE_KEY_PREFIX`).
    pub(crate) async fn start_with_store(
        files: &[(&str, &str)],
        env: &[(&str, &str)],
        store: StoreKind,
    ) -> TestServer {
        let mut all = store.env();
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let env: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        TestServer::start(files, &env).await
    }
}

/// An op of `hits` on `key` under `spec` with nothing else asked: no refund, no wait, no lease
/// (`Some(0)`), no holder, every hit counted as Go counts it, not a report. A test that needs
/// more says so with `Op { refund: true, ..plain_op(..) }`.
pub(crate) fn plain_op(key: &str, spec: LimitSpec, hits: u64) -> Op {
    Op {
        lease: Some(0),
        ..Op::new(key, spec, hits)
    }
}

/// `on_every_store!(scenario, …)`: for each `async fn scenario(StoreKind)` a module of the same
/// name with five tests, `memory`, `redis`, `cluster`, `valkey` and `valkey_cluster`, each running the scenario on that
/// store. (A module and a function may share a name: they live in different namespaces.)
#[allow(unused_macros)] // Test binaries without such scenarios.
macro_rules! on_every_store {
    ($($scenario:ident),+ $(,)?) => {$(
        mod $scenario {
            use super::StoreKind;

            #[tokio::test]
            async fn memory() {
                super::$scenario(StoreKind::Memory).await;
            }

            #[tokio::test]
            async fn redis() {
                $crate::support::require!(Redis);
                super::$scenario(StoreKind::Redis).await;
            }

            #[tokio::test]
            async fn cluster() {
                $crate::support::require!(Redis);
                super::$scenario(StoreKind::Cluster).await;
            }

            #[tokio::test]
            async fn valkey() {
                $crate::support::require!(Redis, Valkey);
                super::$scenario(StoreKind::Valkey).await;
            }

            #[tokio::test]
            async fn valkey_cluster() {
                $crate::support::require!(Redis, Valkey);
                super::$scenario(StoreKind::ValkeyCluster).await;
            }
        }
    )+};
}
#[allow(unused_imports)] // Test binaries without such scenarios.
pub(crate) use on_every_store;
