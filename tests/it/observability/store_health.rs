//! Store health figures through a real scrape and the console: a real redis-server with a
//! `maxmemory` bound that has evicted keys, and a real memcached, each sampled by the service's
//! background task; the gauges carry the node's own numbers and the console shows them.

use std::time::Duration;

use crate::support::memcached::Memcached;
use crate::support::redis::RedisServer;
use crate::support::require;
use crate::support::scrape::Scrape;
use crate::support::*;
use ratelimitd_core::clock::Stopwatch;

const CFG: &str =
    "domain: h\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 5}}\n";

const TOKEN: &str = "health-token";

/// Scrapes until `series` is exposed (the first sample runs at start), at most 30 s.
async fn scrape_with(s: &TestServer, series: &str) -> Scrape {
    let watch = Stopwatch::start();
    loop {
        let scrape = s.scrape().await;
        if scrape.count(series).is_some() || watch.elapsed() > Duration::from_secs(30) {
            return scrape;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn on(name: &str, backend: &str, target: &str) -> String {
    format!("{name}{{backend=\"{backend}\",target=\"{target}\"}}")
}

#[tokio::test]
async fn redis_memory_bound_evictions_keys_and_clients_are_exported_and_shown() {
    require!(Redis);
    let redis = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    // About 3 MB of keys, then a 2 MB bound: the next write evicts.
    let fill = "for i=1,20000 do redis.call('SET','fill:'..i,string.rep('x',100)) end";
    redis.cli(&["EVAL", fill, "0"]);
    redis.cli(&["CONFIG", "SET", "maxmemory", "2mb"]);
    redis.cli(&["SET", "trigger", "1"]);
    let evicted: u64 = redis
        .cli(&["INFO", "stats"])
        .lines()
        .find_map(|l| l.trim().strip_prefix("evicted_keys:")?.parse().ok())
        .unwrap();
    assert!(evicted > 0, "the server evicted nothing");
    let mut env = redis.env();
    env.extend([
        ("USE_PROMETHEUS".into(), "true".into()),
        ("PROMETHEUS_ADDR".into(), "127.0.0.1:0".into()),
        ("ADMIN_TOKEN".into(), TOKEN.into()),
    ]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let s = TestServer::start(&[("h.yaml", CFG)], &env).await;
    let up = on("ratelimitd_store_node_up", "redis", "main");
    let scrape = scrape_with(&s, &up).await;
    assert_eq!(scrape.value(&up), 1, "{}", &*scrape);
    let value = |name: &str| scrape.value(&on(name, "redis", "main"));
    assert_eq!(value("ratelimitd_store_max_memory_bytes"), 2 * 1024 * 1024);
    let used = value("ratelimitd_store_used_memory_bytes");
    assert!(used > 1024 * 1024, "used_memory {used}");
    assert!(value("ratelimitd_store_evicted_keys_total") >= evicted);
    let keys = value("ratelimitd_store_keys");
    assert!(
        keys > 1000 && keys < 20_000,
        "keys {keys}: some were evicted"
    );
    assert!(value("ratelimitd_store_connected_clients") >= 1);
    let rtt = scrape.get(&on(
        "ratelimitd_store_probe_round_trip_seconds",
        "redis",
        "main",
    ));
    assert!(rtt.is_some_and(|t| t > 0.0 && t < 5.0), "{rtt:?}");
    // The console's banner shows the node, over 80 % of its bound, as a problem.
    let page = s.get_text(&s.admin_url("/"), Some(TOKEN)).await;
    assert!(page.contains("redis main: "), "{page}");
    assert!(page.contains("of 2.0 MiB"), "{page}");
}

#[tokio::test]
async fn memcached_bytes_bound_and_evictions_are_exported() {
    require!(Memcached);
    let m = Memcached::start();
    let addr = m.addr();
    let env = m.env(&[
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ]);
    let s = TestServer::start(&[("h.yaml", CFG)], &env).await;
    let up = on("ratelimitd_store_node_up", "memcached", &addr);
    let scrape = scrape_with(&s, &up).await;
    assert_eq!(scrape.value(&up), 1, "{}", &*scrape);
    let value = |name: &str| scrape.value(&on(name, "memcached", &addr));
    // The support server runs with -m 64.
    assert_eq!(value("ratelimitd_store_max_memory_bytes"), 64 * 1024 * 1024);
    assert_eq!(value("ratelimitd_store_evicted_keys_total"), 0);
    value("ratelimitd_store_used_memory_bytes");
    value("ratelimitd_store_keys");
    assert!(value("ratelimitd_store_connected_clients") >= 1);
}
