//! Hot keys through a real limiter on the memory store, timed by a manual clock.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use ratelimitd_core::clock::ManualClock;
use ratelimitd_core::config::{self, CompileOptions, ConfigFile, RateLimitConfig};
use ratelimitd_core::limiter::{Descriptor, LimiterOptions, Observers, RateLimiter, Request};
use ratelimitd_core::store::memory::MemoryStore;

const CFG: &str = r#"
domain: api
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 3, name: per_client}
  - key: free
"#;

struct Fixture {
    clock: Arc<ManualClock>,
    hot: Arc<HotKeys>,
    limiter: RateLimiter,
    config: RateLimitConfig,
}

fn fixture(capacity: usize) -> Fixture {
    let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_200)));
    let hot = Arc::new(HotKeys::new(capacity, clock.clone()));
    let mut observers = Observers::default();
    observers.push(hot.clone());
    let store = Arc::new(MemoryStore::new(1_000_000));
    let limiter =
        RateLimiter::new(store, clock.clone(), LimiterOptions::default()).with_observers(observers);
    let files = [ConfigFile {
        name: "api.yaml".into(),
        contents: CFG.into(),
    }];
    let config = config::compile(&files, &CompileOptions::default()).unwrap();
    Fixture {
        clock,
        hot,
        limiter,
        config,
    }
}

impl Fixture {
    async fn hit(&self, key: &str, value: &str) {
        self.hits(key, value, None).await;
    }

    /// One request on `key`=`value` whose descriptor claims `hits` (`None`: one hit).
    async fn hits(&self, key: &str, value: &str, hits: Option<u64>) {
        let mut d = Descriptor::of(&[(key, value)]);
        d.hits_addend = hits;
        let req = Request::new("api", vec![d]);
        self.limiter
            .should_rate_limit(Some(&self.config), &req)
            .await
            .unwrap();
    }

    fn top(&self, by: By) -> Vec<(String, u64)> {
        let rows = self.hot.top(by, 10);
        rows.iter()
            .map(|r| (r.key.entries[0].1.clone(), r.count))
            .collect()
    }
}

#[tokio::test]
async fn ranks_by_hits_and_by_denials_with_the_full_key() {
    let f = fixture(64);
    for _ in 0..5 {
        f.hit("client", "alice").await;
    }
    f.hit("client", "bob").await;
    f.hit("free", "x").await; // no limit: not a hot key
    assert_eq!(
        f.top(By::Hits),
        vec![("alice".into(), 5), ("bob".into(), 1)]
    );
    assert_eq!(f.top(By::Denials), vec![("alice".into(), 2)]);
    let top = &f.hot.top(By::Hits, 1)[0];
    assert_eq!(
        *top.key,
        HotKey {
            domain: "api".into(),
            entries: vec![("client".into(), "alice".into())],
            limit: "per_client".into(),
        }
    );
}

#[tokio::test]
async fn counts_age_out_after_a_minute() {
    let f = fixture(64);
    f.hit("client", "alice").await;
    // Epochs are half-minutes of the clock: 1200 opens one, 1230 the next.
    f.clock.advance(Duration::from_secs(30));
    f.hit("client", "bob").await;
    f.clock.advance(Duration::from_secs(29));
    assert_eq!(
        f.top(By::Hits),
        vec![("alice".into(), 1), ("bob".into(), 1)]
    );
    // A minute after alice's hit she is gone; bob (30 s later) follows 30 s on.
    f.clock.advance(Duration::from_secs(1));
    assert_eq!(f.top(By::Hits), vec![("bob".into(), 1)]);
    f.clock.advance(Duration::from_secs(30));
    assert!(f.top(By::Hits).is_empty());
    assert!(f.top(By::Denials).is_empty());
}

#[tokio::test]
async fn memory_stays_bounded_under_100000_distinct_keys_and_the_heavy_hitter_stays_on_top() {
    let f = fixture(64);
    for i in 0..100_000u32 {
        f.hit("client", &format!("attacker-{i}")).await;
        if i % 5 == 0 {
            f.hit("client", "heavy").await;
        }
    }
    // 20 000 hits of one key among 120 000: far above the space-saving bound (total / 64).
    let top = f.hot.top(By::Hits, 3);
    assert_eq!(top[0].key.entries[0].1, "heavy");
    assert!(top[0].count >= 20_000 && top[0].count - top[0].error <= 20_000);
    assert!(f.hot.tracked() <= 2 * 64, "{}", f.hot.tracked());
    assert_eq!(f.hot.top(By::Hits, 1_000).len(), 64);
    let denials = f.hot.top(By::Denials, 1);
    assert_eq!(denials[0].key.entries[0].1, "heavy");
}

#[tokio::test]
async fn a_few_huge_hits_calls_do_not_evict_the_real_top_keys() {
    let f = fixture(4);
    for _ in 0..20 {
        f.hit("client", "alice").await;
    }
    for _ in 0..15 {
        f.hit("client", "bob").await;
    }
    // Three calls of 2^64 - 1 hits on new keys: each weighs what the limit (3/hour) can use, 4,
    // so the third, replacing the least counted key, starts from 4 + 4.
    for attacker in ["x", "y", "z"] {
        f.hits("client", attacker, Some(u64::MAX)).await;
    }
    let top = f.hot.top(By::Hits, 2);
    let names: Vec<_> = top.iter().map(|r| r.key.entries[0].1.as_str()).collect();
    assert_eq!(names, ["alice", "bob"]);
    assert_eq!((top[0].count, top[1].count), (20, 15));
    let all = f.hot.top(By::Hits, 10);
    assert!(
        all.iter().all(|r| r.count <= 20),
        "{:?}",
        all.iter().map(|r| r.count).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn the_rolling_view_of_a_steady_key_does_not_jump_when_an_epoch_ends() {
    let f = fixture(64);
    let rolling = |f: &Fixture| f.hot.top_rolling(By::Hits, 10).first().map(|r| r.count);
    // Two hits a second on "steady" for 90 s: from second 30 on, the rolling half minute holds
    // about 60 of them at every moment, across the epoch boundaries at 1230 and 1260.
    let mut seen = Vec::new();
    for second in 0..90 {
        f.hit("client", "steady").await;
        f.hit("client", "steady").await;
        f.clock.advance(Duration::from_secs(1));
        if second >= 30 {
            seen.push((second, rolling(&f).unwrap_or(0), f.top(By::Hits)[0].1));
        }
    }
    for (second, count, _) in &seen {
        assert!((58..=62).contains(count), "second {second}: {count}");
    }
    // The plain "last minute" view halves at each boundary (what the console no longer shows).
    let plain: Vec<u64> = seen.iter().map(|(_, _, p)| *p).collect();
    assert!(
        plain.iter().max().unwrap() - plain.iter().min().unwrap() >= 50,
        "{plain:?}"
    );
}

#[test]
fn a_key_written_over_another_is_exactly_the_new_key_and_keeps_little_spare_memory() {
    let fresh = |domain: &str, entries: &[(&str, &str)], limit: &str| HotKey {
        domain: domain.into(),
        entries: (entries.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        limit: limit.into(),
    };
    let mut key = HotKey::default();
    let long = "x".repeat(64 * 1024);
    let wide: Vec<(&str, &str)> = (0..100).map(|_| ("k", long.as_str())).collect();
    key.overwrite("api", wide.iter().copied(), "per_client");
    assert_eq!(key, fresh("api", &wide, "per_client"));
    // A shorter key with fewer entries replaces all of it and frees the huge strings.
    key.overwrite("web", [("client", "alice")].into_iter(), "");
    assert_eq!(key, fresh("web", &[("client", "alice")], ""));
    assert!(key.entries.capacity() <= RETAIN_ENTRIES);
    assert!(key.entries[0].1.capacity() <= RETAIN_BYTES);
    key.overwrite("api", [("a", "1"), ("b", "2")].into_iter(), "n");
    assert_eq!(key, fresh("api", &[("a", "1"), ("b", "2")], "n"));
}

#[tokio::test]
async fn a_ranking_already_read_keeps_its_keys_when_they_are_evicted() {
    let f = fixture(2);
    for _ in 0..3 {
        f.hit("client", "alice").await;
    }
    f.hit("client", "bob").await;
    f.hit("client", "bob").await;
    let read = f.hot.top(By::Hits, 10);
    // carol evicts bob, the least counted, while `read` still holds bob's key.
    f.hit("client", "carol").await;
    let values = |rows: &[Ranked]| {
        (rows.iter())
            .map(|r| (r.key.entries[0].1.clone(), r.count))
            .collect::<Vec<_>>()
    };
    assert_eq!(values(&read), vec![("alice".into(), 3), ("bob".into(), 2)]);
    assert_eq!(
        values(&f.hot.top(By::Hits, 10)),
        vec![("alice".into(), 3), ("carol".into(), 3)]
    );
    drop(read);
    // With no reader left, the next eviction writes over the slot in place.
    f.hit("client", "dave").await;
    assert_eq!(
        values(&f.hot.top(By::Hits, 10)),
        vec![("dave".into(), 4), ("alice".into(), 3)]
    );
}
