//! Token leases beyond one in-process Redis service: three instances on a 3-master Redis Cluster
//! never admit more than the limit, for fixed windows and token buckets alike; and the real
//! binary, stopped with SIGTERM, gives its unspent hits and tokens back to Redis before it exits;
//! killed with SIGKILL, it leaves at most its lease counted, in a counter that expires with the
//! window.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::support::leases::{self, stop_all};
use crate::support::redis::RedisServer;
use crate::support::require;
use crate::support::stores::shared_cluster;
use crate::support::{StoreKind, TestServer, process, request};
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd_core::clock::Stopwatch;

/// A fixed window `k` and a token bucket `b`, each 300 an hour, leased 20 at a time.
const FLEET: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 300, lease: 20}\n  - key: b\n    rate_limit: {unit: hour, requests_per_unit: 300, algorithm: token_bucket, lease: 20}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_on_a_cluster_never_admit_more_than_the_limit() {
    require!(Redis);
    // The shared Cluster with one key prefix for the three instances: they share the counters.
    let env = [("CACHE_KEY_PREFIX", "leases_fleet_cluster:")];
    let mut servers = Vec::new();
    for _ in 0..3 {
        let s = TestServer::start_with_store(&[("d.yaml", FLEET)], &env, StoreKind::Cluster);
        servers.push(Arc::new(s.await));
    }
    for key in ["k", "b"] {
        // 3 × 4 clients × 50 = 600 requests on 300 (the manual clock stands still).
        let admitted = leases::load(&servers, 50, (key, "hot")).await;
        assert!(
            admitted <= 300,
            "{key}: the fleet admitted {admitted} of 300"
        );
        assert!(admitted >= 300 - 3 * 20, "{key}: only {admitted} admitted");
    }
    let keys = shared_cluster().keys_per_node("leases_fleet_cluster:*");
    let keys: usize = keys.iter().sum();
    assert!(keys >= 2, "the counters live in the Cluster ({keys} keys)");
    stop_all(servers).await;
}

/// A fixed window `k` and a token bucket `b` (burst 1000), each 1000 an hour, leased 100 at once.
const ONE: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1000, lease: 100}\n  - key: b\n    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: token_bucket, lease: 100}\n";

/// The real binary serving [`ONE`] on a Redis of its own (keep the directory while it runs).
fn spawn_one() -> (RedisServer, tempfile::TempDir, process::Spawned) {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.yaml"), ONE).unwrap();
    let mut env = redis.env();
    env.push(("RATELIMITD_CONFIG".into(), dir.path().display().to_string()));
    let s = process::spawn(&env);
    (redis, dir, s)
}

#[test]
fn sigterm_gives_the_unspent_hits_back_before_the_binary_exits() {
    require!(Redis);
    let (redis, _dir, mut s) = spawn_one();
    let watch = Stopwatch::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let url = format!("http://{}", s.grpc_addr);
        let mut c = RateLimitServiceClient::connect(url).await.unwrap();
        let req = request("d", &[&[("k", "hot")], &[("b", "hot")]]);
        for n in 0..250 {
            let r = c.should_rate_limit(req.clone()).await.unwrap();
            assert_eq!(r.into_inner().overall_code, Code::Ok as i32, "request {n}");
        }
    });
    // 250 counted, 53 more held by this instance's leases on each key.
    assert_eq!(
        leases::counter(&redis, "k=3:hot"),
        303,
        "the window's grants"
    );
    assert!(
        leases::tokens(&redis, "b=3:hot", 1000, 3600) < 750,
        "the bucket's grants"
    );
    let ok = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let exit = Stopwatch::start();
    let status = loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            break status;
        }
        assert!(exit.elapsed() < Duration::from_secs(20), "did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        leases::counter(&redis, "k=3:hot"),
        250,
        "only the admitted hits stay counted"
    );
    // The real clock ran: the bucket refilled at most 1000 tokens an hour since the first request.
    let refill = watch.elapsed().as_secs() * 1000 / 3600 + 1;
    let tokens = leases::tokens(&redis, "b=3:hot", 1000, 3600);
    assert!(
        (750..=750 + refill).contains(&tokens),
        "only the admitted requests took tokens: {tokens} left"
    );
}

#[test]
fn a_killed_instance_leaves_at_most_its_lease_counted_and_only_until_the_window_ends() {
    require!(Redis);
    let (redis, _dir, mut s) = spawn_one();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let url = format!("http://{}", s.grpc_addr);
        let mut c = RateLimitServiceClient::connect(url).await.unwrap();
        let req = request("d", &[&[("k", "hot")]]);
        for n in 0..10 {
            let r = c.should_rate_limit(req.clone()).await.unwrap();
            assert_eq!(r.into_inner().overall_code, Code::Ok as i32, "request {n}");
        }
    });
    let counted = leases::counter(&redis, "k=3:hot");
    let held = counted - 10;
    assert!(
        (1..=100).contains(&held),
        "the instance holds part of a lease of 100: {held}"
    );
    // SIGKILL: no drain, nothing given back.
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    assert_eq!(
        leases::counter(&redis, "k=3:hot"),
        counted,
        "a killed instance's unspent hits stay counted"
    );
    // ... but only in this window's counter, which Redis drops when the hour ends.
    let key = leases::key_with(&redis, "k=3:hot").unwrap();
    let ttl: i64 = redis.cli(&["TTL", &key]).trim().parse().unwrap();
    assert!(
        (1..=3600).contains(&ttl),
        "the held hits expire with the window: TTL {ttl} s"
    );
}
