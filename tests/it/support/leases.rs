//! Helpers of the token lease tests (`tests/leases*.rs`): many concurrent clients on one hot key
//! over several instances, and what Redis holds for that key.

use std::sync::Arc;
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use super::redis::RedisServer;
use super::{Code, TestServer, overall};

/// One instance on `redis` serving `yaml` as `d.yaml`, with Prometheus on (the lease counters
/// are read from its scrape).
pub(crate) async fn start(redis: &RedisServer, yaml: &str) -> TestServer {
    let prometheus = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    TestServer::start_on(&[("d.yaml", yaml)], &prometheus, Some(redis)).await
}

/// `n` requests on `entry` of domain `d` through `s`, each of which must be admitted.
pub(crate) async fn admit(s: &TestServer, entry: (&str, &str), n: usize) {
    for i in 0..n {
        let code = overall(&s.rl("d", &[&[entry]]).await);
        assert_eq!(code, Code::Ok, "request {} of {n} on {entry:?}", i + 1);
    }
}

/// Three instances of [`start`] on the same Redis.
pub(crate) async fn start_three(redis: &RedisServer, yaml: &str) -> Vec<Arc<TestServer>> {
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(Arc::new(start(redis, yaml).await));
    }
    servers
}

/// Polls `read` (10 s at most, every 50 ms) until it gives `want`; `what` names the moment.
pub(crate) async fn until(what: &str, want: u64, read: impl Fn() -> u64) {
    let watch = Stopwatch::start();
    while read() != want {
        assert!(
            watch.elapsed() < Duration::from_secs(10),
            "{what}: {}, not {want}",
            read()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a lease holds after each of the 40 admitted hits of a limit of 40: a grant is a quarter
/// of the room after the hit (9, 7, 5, 3, 2, 2), then none once that is under 2, so the last six
/// hits go to Redis one by one.
pub(crate) fn held_after_each_of_40() -> Vec<u64> {
    let mut expected = Vec::new();
    for grant in [9u64, 7, 5, 3, 2, 2] {
        expected.extend((0..=grant).rev());
    }
    expected.extend([0; 6]);
    expected
}

/// The 40 hits of a limit of 40 on `entry` of domain `d` through `s`, each admitted, then one
/// more, refused; asserts that what the lease held after hit `n`, as `held(n)` reads it from
/// Redis, is [`held_after_each_of_40`].
pub(crate) async fn assert_the_last_hits_go_to_redis(
    s: &TestServer,
    entry: (&str, &str),
    held: impl Fn(u64) -> u64,
) {
    let mut held_after = Vec::new();
    for n in 1..=40u64 {
        assert_eq!(overall(&s.rl("d", &[&[entry]]).await), Code::Ok, "hit {n}");
        held_after.push(held(n));
    }
    assert_eq!(
        held_after,
        held_after_each_of_40(),
        "held by the lease after each hit"
    );
    assert_eq!(overall(&s.rl("d", &[&[entry]]).await), Code::OverLimit);
}

/// Asserts `s`'s scrape counts `served` hits served from leases and `returned` given back.
pub(crate) async fn assert_lease_counters(s: &TestServer, served: u64, returned: u64) {
    let metrics = s.scrape().await;
    assert_eq!(
        (
            metrics.value("ratelimitd_lease_served_hits_total"),
            metrics.value("ratelimitd_lease_returned_hits_total")
        ),
        (served, returned),
        "hits served from leases and given back"
    );
}

/// Script calls Redis has run so far (EVAL and EVALSHA).
pub(crate) fn script_calls(redis: &RedisServer) -> u64 {
    redis.calls("eval") + redis.calls("evalsha")
}

/// The name of the one key holding `part` (None when absent).
pub(crate) fn key_with(redis: &RedisServer, part: &str) -> Option<String> {
    let keys = redis.cli(&["KEYS", "*"]);
    keys.lines().find(|k| k.contains(part)).map(str::to_owned)
}

/// The fixed window counter of the key holding `part` (0 when absent).
pub(crate) fn counter(redis: &RedisServer, part: &str) -> u64 {
    key_with(redis, part).map_or(0, |key| redis.cli(&["GET", &key]).parse().unwrap_or(0))
}

/// Whole tokens in the token bucket of the key holding `part`, whose `burst` refills over a
/// window of `window_secs` (a missing key is a full bucket). The bucket is stored as a debt in
/// units of `window_secs × 10^6 / quantum` per token; for the buckets of these tests (burst ×
/// window under 2^52 µs) the quantum is 1 µs.
pub(crate) fn tokens(redis: &RedisServer, part: &str, burst: u64, window_secs: u64) -> u64 {
    let Some(key) = key_with(redis, part) else {
        return burst;
    };
    let debt: u64 = redis.cli(&["HGET", &key, "d"]).parse().unwrap_or(0);
    let cost = window_secs * 1_000_000;
    (burst * cost).saturating_sub(debt) / cost
}

/// `per_client` requests for `entry` from each of 4 concurrent clients per server; how many
/// were admitted.
pub(crate) async fn load(
    servers: &[Arc<TestServer>],
    per_client: usize,
    entry: (&str, &str),
) -> usize {
    let (k, v) = (entry.0.to_owned(), entry.1.to_owned());
    let mut clients = Vec::new();
    for s in servers {
        for _ in 0..4 {
            let (s, k, v) = (s.clone(), k.clone(), v.clone());
            clients.push(tokio::spawn(async move {
                let mut ok = 0;
                for _ in 0..per_client {
                    if overall(&s.rl("d", &[&[(&k, &v)]]).await) == Code::Ok {
                        ok += 1;
                    }
                }
                ok
            }));
        }
    }
    let mut admitted = 0;
    for c in clients {
        admitted += c.await.unwrap();
    }
    admitted
}

/// Shuts every server down (its drain gives its leases back).
pub(crate) async fn stop_all(servers: Vec<Arc<TestServer>>) {
    for s in servers {
        Arc::try_unwrap(s)
            .ok()
            .expect("no client left")
            .shutdown()
            .await;
    }
}

/// Three instances ([`start_three`]) serving `yaml`, a limit of 1000 on `entry` leased 100 at a
/// time, under 3000 requests (4 clients each, 250 requests each); asserts they admitted at most
/// the 1000 and at least 700, stops them and returns how many they admitted.
pub(crate) async fn three_instances_admit_at_most_1000(
    redis: &RedisServer,
    yaml: &str,
    entry: (&str, &str),
) -> usize {
    let servers = start_three(redis, yaml).await;
    let admitted = load(&servers, 250, entry).await;
    assert!(admitted <= 1000, "the fleet admitted {admitted} of 1000");
    // README: unspent leases at the end of the traffic stay counted until they are given back;
    // near the limit grants are a quarter of the room, so far below one lease per instance.
    assert!(admitted >= 1000 - 3 * 100, "only {admitted} admitted");
    stop_all(servers).await;
    admitted
}

/// Three instances ([`start_three`]) serving `config(lease)`, 4 clients each, 250 requests each on
/// `entry` (within the limit), once without a lease and once with a lease of 100, each on a fresh
/// Redis; asserts every request was admitted and that the leased run made at most a twentieth of
/// the plain run's script calls.
pub(crate) async fn assert_a_lease_costs_under_a_twentieth(
    config: impl Fn(u32) -> String,
    entry: (&str, &str),
) {
    let mut calls = Vec::new();
    for lease in [0, 100] {
        let redis = RedisServer::start();
        let servers = start_three(&redis, &config(lease)).await;
        let before = script_calls(&redis);
        assert_eq!(
            load(&servers, 250, entry).await,
            3000,
            "all within the limit"
        );
        calls.push(script_calls(&redis) - before);
        stop_all(servers).await;
    }
    let (plain, leased) = (calls[0], calls[1]);
    // Without leases every request's ops reach Redis, though concurrent requests share script
    // calls (`src/store/redis/join.rs`): the bound is on calls per decision.
    assert!(
        plain > leased,
        "without leases: {plain} script calls, with lease 100: {leased}"
    );
    assert!(
        leased * 20 <= 3000,
        "with lease 100: {leased} script calls for 3000 decisions ({plain} without)"
    );
}
