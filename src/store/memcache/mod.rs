//! The memcached store (`BACKEND_TYPE=memcache`): fixed-window counters shared with Go's memcache
//! backend, on the same servers under the same keys.
//!
//! Each op is one atomic memcached command: `incr key hits` gives the count after this request's
//! hits; when the key does not exist yet, `add key hits` with the window's expiry creates it, and
//! if another instance created it first (`NOT_STORED`) the `incr` is sent again. Go reads the
//! count first and increments later, so concurrent instances can over-admit; here the count a
//! decision uses is the one this request's `incr` produced, so no two requests are admitted on
//! the same slot. Every algorithm other than fixed windows is refused when the configuration
//! loads (memcached has no atomic read-modify-write for them). A limit that sheds counts only
//! admitted hits: a refused request's hits are taken back with a `decr` right after its `incr`
//! (`calls.rs`).
//!
//! A request's ops are grouped by server (see `keys::pick`); each server's `incr`s go in one
//! write, every server is called at once, each call is bounded by `MEMCACHE_TIMEOUT` and sits
//! behind the server's circuit breaker (`REDIS_BREAKER_*`, as for Redis targets). Ops of a server
//! that does not answer are [`Answer::Unavailable`], so each limit's `failure_mode` decides.

mod calls;
mod conn;
mod keys;
mod options;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::join_all;

use super::local_cache::OverLimitCache;
use super::redis::RedisConfig;
use super::vitals::NodeVitals;
use super::{Answer, Op, Resilience, Store, StoreError};
use conn::Pool;
use ratelimitd_core::algorithm::{Algorithm, Decision, fixed_window};
use ratelimitd_core::clock::{Clock, Stopwatch, Timestamp};
use ratelimitd_core::resilience::Breaker;

pub(crate) use options::MemcacheSettings;

/// memcached reads an expiry above 30 days as an absolute Unix time.
const RELATIVE_EXPIRY_MAX: u64 = 30 * 24 * 3600;

/// How often `incr` is retried after losing an `add` race; a key created and evicted this often
/// in one request means memcached is out of memory.
const ADD_RACES: usize = 3;

/// Why the memcached store refuses prefix resets.
pub(crate) const NO_PREFIX: &str = "memcached cannot list or scan its keys, so a reset by key \
     prefix is not possible on BACKEND_TYPE=memcache: reset by descriptor instead";

/// One memcached server and what is known of it.
#[derive(Debug)]
struct Server {
    pool: Pool,
    breaker: Option<Breaker>,
}

/// The memcached-backed store.
#[derive(Debug)]
pub(crate) struct MemcacheStore {
    servers: Vec<Server>,
    timeout: Duration,
    jitter_max_secs: u64,
    local_cache: Option<OverLimitCache>,
    healthy: AtomicBool,
}

impl MemcacheStore {
    /// A store on `m`'s servers, with a breaker per server (`r`) timed by `clock`, and the two
    /// Go settings it shares with the Redis store: `LOCAL_CACHE_SIZE_IN_BYTES` and
    /// `EXPIRATION_JITTER_MAX_SECONDS` (read from `shared`). Connections are opened when first
    /// needed (as Go's client does); [`Store::probe`] checks them.
    pub(crate) fn new(
        m: &MemcacheSettings,
        r: &Resilience,
        shared: &RedisConfig,
        clock: &Arc<dyn Clock>,
    ) -> MemcacheStore {
        let servers = m
            .servers
            .iter()
            .map(|addr| {
                // Leaked once per configured server: names live as long as the process.
                let addr: &'static str = Box::leak(addr.clone().into_boxed_str());
                Server {
                    pool: Pool::new(addr, m.max_idle_conns),
                    breaker: (r.breaker_failures > 0).then(|| {
                        Breaker::new(addr, r.breaker_failures, r.breaker_cooldown, clock.clone())
                    }),
                }
            })
            .collect();
        MemcacheStore {
            servers,
            timeout: m.timeout,
            jitter_max_secs: shared.expiration_jitter_max_seconds,
            local_cache: OverLimitCache::with_bytes(shared.local_cache_size_in_bytes),
            healthy: AtomicBool::new(true),
        }
    }
}

impl MemcacheStore {
    /// Each server's `stats` ([`crate::store::vitals`]): `bytes`, `limit_maxbytes`, `evictions`,
    /// `curr_items`, `curr_connections`, and the round trip of the call; all servers at once,
    /// each bounded by `MEMCACHE_TIMEOUT`.
    pub(crate) async fn vitals(&self) -> Vec<NodeVitals> {
        let asks = self.servers.iter().map(|s| async move {
            let mut v = NodeVitals::new("memcached", s.pool.addr);
            let watch = Stopwatch::start();
            let attempt = async {
                let mut c = s.pool.take(self.timeout).await?;
                let stats = c.stats().await?;
                s.pool.give_back(c);
                Ok::<_, std::io::Error>(stats)
            };
            if let Ok(Ok(stats)) = tokio::time::timeout(self.timeout, attempt).await {
                v.round_trip = Some(watch.elapsed());
                v.up = true;
                for (name, value) in stats {
                    let n = value.parse::<u64>().ok();
                    match name.as_str() {
                        "bytes" => v.used_bytes = n,
                        "limit_maxbytes" => v.max_bytes = n,
                        "evictions" => v.evictions = n,
                        "curr_items" => v.keys = n,
                        "curr_connections" => v.clients = n,
                        _ => {}
                    }
                }
            }
            v
        });
        join_all(asks).await
    }
}

#[async_trait]
impl Store for MemcacheStore {
    async fn apply(&self, ops: &[Op], now: Timestamp) -> Result<Vec<Answer>, StoreError> {
        let mut answers: Vec<Option<Answer>> = vec![None; ops.len()];
        let mut by_server: Vec<Vec<usize>> = vec![Vec::new(); self.servers.len()];
        for (i, op) in ops.iter().enumerate() {
            if op.spec.algorithm != Algorithm::FixedWindow {
                // Refused at config load; one arriving anyway (an override) is not counted.
                tracing::warn!(key = %op.key, algorithm = op.spec.algorithm.name(), "memcached counts fixed windows only");
                answers[i] = Some(Answer::Unavailable {
                    target: "memcache",
                    breaker_open: false,
                });
                continue;
            }
            if let Some(until) = self
                .local_cache
                .as_ref()
                // A limit that sheds is over for one class and not for another: never cached. A
                // usage report must reach the counter.
                .filter(|_| !op.refund && !op.only_admitted && !op.report)
                .and_then(|c| c.over_until(&op.key, now))
            {
                answers[i] = Some(Answer::CachedOver { until });
                continue;
            }
            by_server[keys::pick(&keys::wire_key(&op.key), self.servers.len())].push(i);
        }
        let calls = self
            .servers
            .iter()
            .zip(&by_server)
            .filter(|(_, idx)| !idx.is_empty())
            .map(|(s, idx)| async move { (s, idx, self.call(s, ops, idx, now).await) });
        let (mut called, mut failed) = (false, false);
        for (server, indices, result) in join_all(calls).await {
            let counts = match result {
                Ok(counts) => counts,
                Err(breaker_open) => {
                    called |= !breaker_open;
                    // As for Redis: with a breaker, one failed call is not an outage until the
                    // breaker leaves "closed".
                    failed |=
                        !breaker_open && server.breaker.as_ref().is_none_or(|b| !b.is_closed());
                    for &i in indices {
                        answers[i] = Some(Answer::Unavailable {
                            target: server.pool.addr,
                            breaker_open,
                        });
                    }
                    continue;
                }
            };
            called = true;
            for (&i, counted) in indices.iter().zip(counts) {
                let Some((before, after)) = counted else {
                    let target = server.pool.addr;
                    answers[i] = Some(Answer::Unavailable {
                        target,
                        breaker_open: false,
                    });
                    continue;
                };
                let (op, spec) = (&ops[i], &ops[i].spec);
                let d: Decision = if op.refund {
                    fixed_window::decide_refund(before, after, spec.limit, spec.window, now)
                } else if op.report {
                    fixed_window::decide(before, after, spec.limit, spec.window, now).reported()
                } else {
                    fixed_window::decide(before, after, spec.limit, spec.window, now)
                };
                if let Some(c) = self.local_cache.as_ref().filter(|_| !op.only_admitted) {
                    c.learn(&op.key, op.refund, &d, now);
                }
                answers[i] = Some(Answer::Decided(d));
            }
        }
        if called {
            self.healthy.store(!failed, Ordering::Relaxed);
        }
        ratelimitd_core::store::all_answered(answers, "memcached")
    }

    /// `delete` of each op's key on its server (one write per server, all at once, each bounded
    /// by `MEMCACHE_TIMEOUT`); the local over-limit cache forgets the keys first.
    async fn reset(&self, ops: &[Op], _now: Timestamp) -> Result<u64, StoreError> {
        let mut by_server: Vec<Vec<String>> = vec![Vec::new(); self.servers.len()];
        for op in ops {
            if let Some(c) = &self.local_cache {
                c.remove(&op.key);
            }
            let key = keys::wire_key(&op.key).into_owned();
            by_server[keys::pick(&key, self.servers.len())].push(key);
        }
        let calls = (self.servers.iter().zip(&by_server))
            .filter(|(_, keys)| !keys.is_empty())
            .map(|(s, keys)| async move {
                let attempt = async {
                    let mut c = s.pool.take(self.timeout).await?;
                    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                    let n = c.delete(&keys).await?;
                    s.pool.give_back(c);
                    Ok::<_, std::io::Error>(n)
                };
                match tokio::time::timeout(self.timeout, attempt).await {
                    Ok(Ok(n)) => Ok(n),
                    Ok(Err(e)) => Err(format!("memcached {}: {e}", s.pool.addr)),
                    Err(_) => Err(format!(
                        "memcached {} did not answer within {:?}",
                        s.pool.addr, self.timeout
                    )),
                }
            });
        let mut n = 0;
        for r in join_all(calls).await {
            n += r.map_err(StoreError::Unavailable)?;
        }
        Ok(n)
    }

    /// memcached cannot list its keys.
    fn no_prefix_reset(&self) -> &'static str {
        NO_PREFIX
    }

    fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Asks every server for its `version`; healthy when all answer.
    async fn probe(&self) {
        let checks = self.servers.iter().map(|s| async move {
            let attempt = async {
                let mut c = s.pool.take(self.timeout).await?;
                c.version().await?;
                s.pool.give_back(c);
                Ok::<_, std::io::Error>(())
            };
            let ok = matches!(
                tokio::time::timeout(self.timeout, attempt).await,
                Ok(Ok(()))
            );
            if let Some(b) = &s.breaker {
                b.probed(ok);
            }
            ok
        });
        let all = join_all(checks).await.into_iter().all(|ok| ok);
        self.healthy.store(all, Ordering::Relaxed);
    }
}
