//! Conformance of the stores: every algorithm decides identically on the memory store, a single
//! Redis and a Redis Cluster (the Lua twins compute what the Rust functions compute), including
//! numbers past 2^53 in intermediate products, clocks that step back, lowered limits, refunds
//! (`is_negative_hits`, releases of concurrency slots) and shaping requests (`max_wait`, leaky buckets reserving later slots)
//! mixed into every sequence.

use crate::support::redis::RedisServer;
use crate::support::stores::{plain_op, shared_cluster, shared_redis};
use crate::support::*;
use proptest::prelude::*;
use ratelimitd::Settings;
use ratelimitd::testing::RedisStore;
use ratelimitd_core::MemoryStore;
use ratelimitd_core::algorithm::{Algorithm, LimitSpec, Window};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::store::{Op, Store};

fn redis_settings(r: &RedisServer) -> Settings {
    Settings::from_env(r.env()).unwrap()
}

/// Random operation sequences, of every algorithm, give identical decisions on the memory store, a
/// single Redis and a Redis Cluster; several ops of one request go in one batch, as the limiter
/// sends them (on the Cluster, one script call per hash slot). The servers are the run's shared
/// ones: every case writes keys under a random case id of its own.
#[test]
fn memory_and_redis_decide_identically() {
    require!(Redis);
    let (r, c) = (shared_redis(), shared_cluster());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    });
    let events = proptest::collection::vec(
        (
            0usize..4,
            0u64..4,
            0u64..1500,
            0usize..3,
            0usize..6,
            1usize..3,
            0u8..4,
            0usize..4,
        ),
        1..60,
    );
    let result = runner.run(&events, |events| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let redis = RedisStore::connect(&redis_settings(r).redis).await.unwrap();
            let cluster_settings = Settings::from_env(c.env()).unwrap();
            let cluster = RedisStore::connect(&cluster_settings.redis).await.unwrap();
            let memory = MemoryStore::new(1000);
            let case = fastrand::u64(..);
            let windows = [1u64, 60, 3600];
            let mut now = 1_000_000_000u64;
            // Shaping budgets: none, under one interval, several intervals, the /check cap.
            let waits = [0u64, 150, 4_000, 60_000];
            for (key, hits, dt_ms, w, alg, batch, refund, wait) in events {
                now += dt_ms * 1000 + 7;
                let algorithm = Algorithm::ALL[alg];
                let ops: Vec<Op> = (0..batch)
                    .map(|b| {
                        let (w, key) = ((w + b) % 3, (key + b) % 4);
                        // Limits of 3 and 7 do not divide a window in µs: a TAT keeps a fraction.
                        let limit = [5, 3, 7, 6][key];
                        let spec = LimitSpec {
                            algorithm,
                            limit,
                            window: Window::from_secs(windows[w]).unwrap(),
                            burst: 3 + w as u64,
                        };
                        // Buckets live across windows; only fixed window keys carry the start.
                        let start = match algorithm {
                            Algorithm::FixedWindow => now / 1_000_000 / windows[w] * windows[w],
                            _ => 0,
                        };
                        let tag = algorithm.key_tag();
                        // Pairs of keys share a hash tag, so Cluster batches mix one-slot groups
                        // and several slots.
                        let slot = key / 2;
                        Op {
                            key: format!("{{case{case}:{slot}}}:{tag}:k{key}:w{w}:{start}"),
                            spec,
                            hits,
                            // One op in four gives hits back; of a batch, only the first.
                            refund: refund == 0 && b == 0,
                            // Only leaky buckets shape; the others must ignore it alike.
                            max_wait: std::time::Duration::from_millis(waits[wait]),
                            // Without leases both stores decide every hit themselves.
                            lease: Some(0),
                            // Concurrency slots: four holders come and go.
                            holder: format!("h{wait}"),
                            // Half the keys shed: a refused hit must not count on either store.
                            only_admitted: key % 2 == 1,
                            report: false,
                        }
                    })
                    .collect();
                let t = Timestamp::from_micros(now);
                let a = memory.apply(&ops, t).await.unwrap();
                let b = redis.apply(&ops, t).await.unwrap();
                let c = cluster.apply(&ops, t).await.unwrap();
                prop_assert_eq!(&a, &b, "single Redis");
                prop_assert_eq!(&a, &c, "Redis Cluster");
            }
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// A memory store and a Redis store on a fresh `redis-server`.
struct Both {
    memory: MemoryStore,
    redis: RedisStore,
}

impl Both {
    async fn start() -> (RedisServer, Both) {
        let r = RedisServer::start();
        let redis = RedisStore::connect(&redis_settings(&r).redis)
            .await
            .unwrap();
        let memory = MemoryStore::new(100);
        (r, Both { memory, redis })
    }

    /// Applies `op` at `now` (µs) on both stores and asserts identical decisions.
    async fn agree(&self, op: &Op, now: u64, step: u64) {
        let t = Timestamp::from_micros(now);
        let a = self
            .memory
            .apply(std::slice::from_ref(op), t)
            .await
            .unwrap();
        let b = self.redis.apply(std::slice::from_ref(op), t).await.unwrap();
        assert_eq!(a, b, "step {step}");
    }
}

/// Buckets whose numbers pass 2^53 in intermediate products (where Lua's doubles round) still
/// decide exactly as the memory store does, shaping included; so does a leaky bucket read by a
/// clock that is behind (its TAT then lies more than the capacity ahead).
#[tokio::test]
async fn huge_buckets_decide_identically() {
    require!(Redis);
    let (_r, stores) = Both::start().await;
    let specs = [
        (4_000_000_000, 1, 4_000_000_000),
        (1_000_000, 86_400, 50_000),
        (7, 365 * 86_400, 100_000_000),
    ];
    for algorithm in [Algorithm::TokenBucket, Algorithm::LeakyBucket] {
        let mut now = 1_700_000_000_000_000u64;
        for step in 0..200u64 {
            now += (step * 7_919_993) % 40_000_000;
            // Every 17th step comes from a clock 2 s behind, every 23rd from one 90 s behind (a
            // leaky bucket's TAT then lies past its shaping horizon and reads as a full queue).
            let at = if step % 17 == 16 {
                now - 2_000_000
            } else if step % 23 == 22 {
                now - 90_000_000
            } else {
                now
            };
            let (limit, window_secs, burst) = specs[(step % 3) as usize];
            let spec = LimitSpec {
                algorithm,
                limit,
                window: Window::from_secs(window_secs).unwrap(),
                burst,
            };
            let hits = [1, burst / 3, burst, 0][(step / 3 % 4) as usize];
            let key = format!("huge:{}:{}", algorithm.key_tag(), step % 3);
            let op = Op {
                refund: step % 5 == 4,
                // Shaping with a minute's budget, where budgets reach the 2^52 cap.
                max_wait: std::time::Duration::from_secs(60 * u64::from(step % 4 == 1)),
                ..plain_op(&key, spec, hits)
            };
            stores.agree(&op, at, step).await;
        }
    }
}

/// A leaky bucket's key holds its TAT and expires one second after the TAT has passed.
#[tokio::test]
async fn leaky_bucket_keys_expire_after_their_tat() {
    require!(Redis);
    let cfg = "domain: l\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 6, algorithm: leaky_bucket}}\n";
    let r = RedisServer::start();
    let s = TestServer::start_on(&[("l.yaml", cfg)], &[], Some(&r)).await;
    s.set_time(1000);
    for _ in 0..3 {
        assert_eq!(overall(&s.rl("l", &[&[("k", "v")]]).await), Code::Ok);
    }
    // Three hits of T = 10 s: the TAT is 30 s ahead, in whole µs plus a fraction (in 1/6 µs).
    let key = "{1:l|1:k=1:v}:lb:60";
    assert_eq!(r.cli(&["HGET", key, "q"]), "1030000000");
    assert_eq!(r.cli(&["HGET", key, "f"]), "0");
    let ttl: i64 = r.cli(&["TTL", key]).parse().unwrap();
    assert!((30..=31).contains(&ttl), "TTL {ttl}");
}

/// Sliding logs whose limit is lowered under a full log (so the "when does one more fit" search
/// goes past the oldest entry), with a clock that sometimes steps back and requests of many hits,
/// decide exactly as the memory store does.
#[tokio::test]
async fn sliding_logs_with_lowered_limits_and_a_stepping_clock_decide_identically() {
    require!(Redis);
    let (r, stores) = Both::start().await;
    let mut now = 1_700_000_000_000_000u64;
    for step in 0..400u64 {
        // Mostly forward by up to ~1 s, sometimes back by up to 0.3 s.
        let jump = (step * 7_919_993) % 1_300_000;
        now = if jump > 1_000_000 {
            now - (jump - 1_000_000)
        } else {
            now + jump
        };
        let spec = LimitSpec {
            algorithm: Algorithm::SlidingLog,
            limit: [40, 3, 12, 0][(step / 7 % 4) as usize],
            window: Window::from_secs([2, 5][(step % 2) as usize]).unwrap(),
            burst: 0,
        };
        let hits = [1, 3, 0, 7, 2][(step % 5) as usize];
        let op = Op {
            // Refunds of 3 and 7 forget whole entries and part of one.
            refund: step % 6 == 5,
            ..plain_op(&format!("sl{}", step % 2), spec, hits)
        };
        stores.agree(&op, now, step).await;
    }
    // One member per admitted request, and the key expires a second after its window.
    let ttl: i64 = r.cli(&["TTL", "sl1"]).parse().unwrap();
    assert!((1..=6).contains(&ttl), "TTL {ttl}");
}

/// A fixed window counter stops at `fixed_window::MAX_COUNT` (2^52) on both stores: hits past it,
/// even ones no limit lets through the limiter (2^63, 2^64 - 1, which `INCRBY` alone refuses),
/// leave it there and over the limit; refunds of any size take back exactly what it holds; the key
/// still ends with its window.
#[tokio::test]
async fn fixed_windows_stop_at_the_counter_ceiling_identically() {
    require!(Redis);
    use ratelimitd_core::algorithm::fixed_window::MAX_COUNT;
    let (r, stores) = Both::start().await;
    let spec = LimitSpec {
        algorithm: Algorithm::FixedWindow,
        limit: u64::from(u32::MAX),
        window: Window::from_secs(60).unwrap(),
        burst: 0,
    };
    let now = 1_700_000_040_000_000u64;
    let steps: [(u64, bool); 9] = [
        (MAX_COUNT - 5, false),
        (3, false),
        (10, false),
        (1 << 63, false),
        (u64::MAX, false),
        (0, false),
        (7, true),
        (u64::MAX, true),
        (4, false),
    ];
    for (step, (hits, refund)) in steps.into_iter().enumerate() {
        let op = Op {
            refund,
            ..plain_op("fw:ceiling", spec, hits)
        };
        stores.agree(&op, now + step as u64, step as u64).await;
    }
    // Emptied by the last refund, then 4: exact, and the TTL is the window's.
    assert_eq!(r.cli(&["GET", "fw:ceiling"]), "4");
    let ttl: i64 = r.cli(&["TTL", "fw:ceiling"]).parse().unwrap();
    assert!((1..=60).contains(&ttl), "TTL {ttl}");
}
