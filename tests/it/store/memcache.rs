//! The memcached backend (`BACKEND_TYPE=memcache`) against a real `memcached`: the SPEC's
//! fixed-window scenarios, Go's key read back from memcached, three ratelimitd processes on one
//! memcached admitting exactly the limit under concurrent load, other algorithms refused when the
//! configuration loads, and a memcached that is down answered by each limit's `failure_mode`.

use crate::ops::loud_config::{refused, stderr};
use std::time::Duration;

use crate::support::memcached::Memcached;
use crate::support::process::spawn;
use crate::support::require;
use crate::support::*;
use futures_util::future::join_all;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;

const CONFIG: &str = r#"
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: other
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: open
    rate_limit: {unit: minute, requests_per_unit: 1, failure_mode: allow}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 1, failure_mode: deny}
  - key: strict
    rate_limit: {unit: minute, requests_per_unit: 1}
"#;

async fn start(m: &Memcached, prefix: &str) -> TestServer {
    let env = m.env(&[("CACHE_KEY_PREFIX", prefix)]);
    TestServer::start(&[("c.yaml", CONFIG)], &env).await
}

/// SPEC fixed-window behaviour on memcached: counts up to the limit then `OVER_LIMIT` with the
/// limit and the time to the window's end; a new window (the manual clock moves) starts from 0;
/// one descriptor over makes the request over while the other still counts.
#[tokio::test]
async fn fixed_windows_count_limit_and_reset_on_memcached() {
    require!(Memcached);
    let m = Memcached::start();
    let s = start(&m, "spec_").await;
    for remaining in [2, 1, 0] {
        let r = s.rl("d", &[&[("k", "a")]]).await;
        assert_eq!(st(&r, 0), (Code::Ok, lim(3, "MINUTE"), remaining));
    }
    let r = s.rl("d", &[&[("k", "a")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, lim(3, "MINUTE"), 0));
    // T0 = 1234: the minute window ends at 1260.
    assert_eq!(dur(&r, 0), Some(26));
    // Another value is another counter.
    assert_eq!(st(&s.rl("d", &[&[("k", "b")]]).await, 0).0, Code::Ok);
    // Two descriptors: one over makes the request over; the other is counted all the same.
    let r = s.rl("d", &[&[("k", "a")], &[("other", "x")]]).await;
    assert_eq!(overall(&r), Code::OverLimit);
    assert_eq!(st(&r, 1), (Code::Ok, lim(1, "HOUR"), 0));
    // The next minute is a new window (a new key).
    s.advance(Duration::from_secs(26));
    let r = s.rl("d", &[&[("k", "a")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(3, "MINUTE"), 2));
    s.shutdown().await;
}

/// The counter lives under Go's key (`prefix` + `domain_key_value_` + window start), holding the
/// hits as a decimal number, so a Go instance on the same memcached reads and adds to it.
#[tokio::test]
async fn counters_use_gos_key_and_value() {
    require!(Memcached);
    let m = Memcached::start();
    let s = start(&m, "go_").await;
    for _ in 0..2 {
        s.rl("d", &[&[("k", "v")]]).await;
    }
    assert_eq!(m.get("go_d_k_v_1200").as_deref(), Some("2"));
    // A Go instance adding a hit on the same key: ratelimitd sees it.
    assert_eq!(m.command("incr go_d_k_v_1200 1\r\n").as_deref(), Some("3"));
    let r = s.rl("d", &[&[("k", "v")]]).await;
    assert_eq!(st(&r, 0).0, Code::OverLimit);
    assert_eq!(m.get("go_d_k_v_1200").as_deref(), Some("4"));
    s.shutdown().await;
}

/// Three ratelimitd processes on one memcached, 40 concurrent requests each on a limit of 50:
/// exactly 50 are admitted and memcached holds all 120 hits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_on_one_memcached_admit_exactly_the_limit() {
    require!(Memcached);
    let m = Memcached::start();
    let dir = tempfile::tempdir().unwrap();
    let yaml = "domain: fleet\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 50}\n";
    std::fs::write(dir.path().join("c.yaml"), yaml).unwrap();
    let (config, clock) = (dir.path().display().to_string(), T0.to_string());
    let e: Vec<(String, String)> = m
        .env(&[
            ("CACHE_KEY_PREFIX", "fleet_"),
            ("RATELIMITD_CONFIG", &config),
            ("RATELIMITD_TEST_MANUAL_CLOCK", &clock),
        ])
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let fleet: Vec<_> = (0..3).map(|_| spawn(&e)).collect();
    let mut admitted = 0;
    let mut calls = Vec::new();
    for p in &fleet {
        let client = RateLimitServiceClient::connect(format!("http://{}", p.grpc_addr))
            .await
            .unwrap();
        for _ in 0..40 {
            let mut c = client.clone();
            calls.push(async move {
                let call = c.should_rate_limit(request("fleet", &[&[("k", "v")]]));
                tokio::time::timeout(Duration::from_secs(30), call).await
            });
        }
    }
    for r in join_all(calls).await {
        let r = r
            .expect("answered within 30 s")
            .expect("decided")
            .into_inner();
        admitted += usize::from(overall(&r) == Code::Ok);
    }
    assert_eq!(admitted, 50, "exactly the limit, across three instances");
    assert_eq!(m.get("fleet_fleet_k_v_0").as_deref(), Some("120"));
}

/// A token bucket on memcached is refused when the configuration loads, naming the limit, the
/// algorithm and the backend; the binary does not start on it.
#[test]
fn other_algorithms_are_refused_at_load() {
    require!(Memcached);
    let m = Memcached::start();
    let dir = tempfile::tempdir().unwrap();
    let yaml = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket}\n";
    std::fs::write(dir.path().join("c.yaml"), yaml).unwrap();
    let config = dir.path().display().to_string();
    let vars = m.env(&[("CACHE_KEY_PREFIX", ""), ("RATELIMITD_CONFIG", &config)]);
    let out = refused(&vars);
    let err = stderr(&out);
    assert!(!out.status.success(), "refused to start: {err}");
    for says in ["d.k", "token_bucket", "BACKEND_TYPE=memcache", "c.yaml"] {
        assert!(err.contains(says), "names {says}: {err}");
    }
}

/// Health is OK while memcached answers (Go's memcache backend never reports OK). With
/// memcached gone, each limit answers by its failure mode: `allow` admits, `deny` refuses, and
/// the default (`error`, as Go's Redis backend) fails the call with UNAVAILABLE; health turns
/// unhealthy once the once-a-second probe sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_down_is_answered_by_each_limits_failure_mode() {
    require!(Memcached);
    let m = Memcached::start();
    let s = start(&m, "down_").await;
    let health = || async {
        let r = reqwest::get(s.http_url("/healthcheck")).await.unwrap();
        r.status().as_u16()
    };
    assert_eq!(health().await, 200);
    assert_eq!(overall(&s.rl("d", &[&[("strict", "x")]]).await), Code::Ok);
    m.kill();
    assert_eq!(overall(&s.rl("d", &[&[("open", "x")]]).await), Code::Ok);
    assert_eq!(
        overall(&s.rl("d", &[&[("closed", "x")]]).await),
        Code::OverLimit
    );
    let e = s
        .call(request("d", &[&[("strict", "x")]]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    s.shutdown().await;
}

/// A counter someone overwrote with text is one key's problem: memcached refuses to `incr` it,
/// that limit answers by its failure mode, and the request's other keys and later requests are
/// counted as usual (the server is not taken for down).
#[tokio::test]
async fn a_non_numeric_counter_is_answered_by_its_failure_mode_alone() {
    require!(Memcached);
    let m = Memcached::start();
    let s = start(&m, "poison_").await;
    let poisoned = m.command("set poison_d_open_x_1200 0 0 5\r\nhello\r\n");
    assert_eq!(poisoned.as_deref(), Some("STORED"));
    for _ in 0..3 {
        // `open` fails open; `k` (3 per minute) is counted each time.
        let r = s.rl("d", &[&[("open", "x")], &[("k", "v")]]).await;
        assert_eq!(st(&r, 0).0, Code::Ok);
    }
    assert_eq!(m.get("poison_d_k_v_1200").as_deref(), Some("3"));
    let r = s.rl("d", &[&[("k", "v")]]).await;
    assert_eq!(
        st(&r, 0).0,
        Code::OverLimit,
        "still counted after the refusals"
    );
    assert_eq!(m.get("poison_d_open_x_1200").as_deref(), Some("hello"));
    s.shutdown().await;
}

/// With two servers each key lives on server `crc32(key) % 2` in `MEMCACHE_HOST_PORT` order, as
/// Go's client places it (the expected servers were computed with Python's `zlib.crc32`, the same
/// IEEE CRC-32 as Go's `crc32.ChecksumIEEE`).
#[tokio::test]
async fn keys_are_spread_over_servers_as_gos_client_places_them() {
    require!(Memcached);
    let (a, b) = (Memcached::start(), Memcached::start());
    let hosts = format!("{},{}", a.addr(), b.addr());
    let env = [
        ("BACKEND_TYPE", "memcache"),
        ("MEMCACHE_HOST_PORT", hosts.as_str()),
        ("CACHE_KEY_PREFIX", "multi_"),
    ];
    let s = TestServer::start(&[("c.yaml", CONFIG)], &env).await;
    let expected = [1, 0, 0, 1, 1, 0];
    for (i, server) in expected.into_iter().enumerate() {
        s.rl("d", &[&[("k", &format!("v{i}"))]]).await;
        let key = format!("multi_d_k_v{i}_1200");
        let (on, off) = if server == 0 { (&a, &b) } else { (&b, &a) };
        assert_eq!(
            on.get(&key).as_deref(),
            Some("1"),
            "{key} on server {server}"
        );
        assert_eq!(off.get(&key), None, "{key} only there");
    }
    s.shutdown().await;
}

/// A usage report on memcached (a fixed window, `usage: report`): counted past the limit and
/// answered OK; the local over-limit cache that then knows the key is over does not swallow the
/// next report; the new window starts from 0.
#[tokio::test]
async fn usage_reports_go_into_debt_on_memcached() {
    require!(Memcached);
    let m = Memcached::start();
    let env = m.env(&[
        ("CACHE_KEY_PREFIX", "usage_"),
        ("LOCAL_CACHE_SIZE_IN_BYTES", "1000000"),
    ]);
    let cfg = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10, usage: report}\n";
    let s = TestServer::start(&[("c.yaml", cfg)], &env).await;
    let send = |hits: u64| {
        let mut req = request("d", &[&[("k", "a")]]);
        req.descriptors[0].hits_addend = Some(hits);
        s.call(req)
    };
    let code = |r: Result<_, tonic::Status>| {
        let r = r.expect("ShouldRateLimit succeeds");
        let (code, _, remaining) = st(&r, 0);
        (code, remaining)
    };
    assert_eq!(code(send(25).await), (Code::Ok, 0));
    assert_eq!(code(send(0).await).0, Code::OverLimit);
    assert_eq!(code(send(0).await).0, Code::OverLimit);
    // Answered by memcached, not by the cache (whose answer would be OVER_LIMIT).
    assert_eq!(code(send(5).await), (Code::Ok, 0));
    s.set_time(1_260);
    assert_eq!(code(send(0).await), (Code::Ok, 10));
}
