//! Exact counting across instances: three real ratelimitd processes share one Redis (and then one
//! Redis Cluster; both again on Valkey); 64 concurrent clients hammer one key; exactly
//! `requests_per_unit` are admitted.
//! Not on `on_every_store!` (`support/stores.rs`): a memory store is per process, so it cannot be
//! shared by three, and these tests count the keys they wrote: on a Redis of their own, or under a
//! key prefix of their own on the run's shared Cluster.

use crate::support::process;
use crate::support::redis::{Flavor, RedisServer};
use crate::support::stores::shared_cluster_of;
use crate::support::*;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;

const LIMIT: u32 = 300;
const CFG: &str = "domain: x\ndescriptors:\n  - {key: k, rate_limit: {unit: hour, requests_per_unit: 300}}\n  - {key: other, rate_limit: {unit: hour, requests_per_unit: 1000}}\n";

/// Three binaries on `env`, 64 clients spread over them, 8 calls each (512 > 300).
async fn admitted_by_three_instances(env: Vec<(String, String)>) -> u32 {
    // One fixed instant for all three, so the hour window cannot roll over mid-test.
    let three = process::three_instances(env, CFG).await;
    let clients = &three.clients;
    let mut tasks = Vec::new();
    for i in 0..64 {
        let client = clients[i % 3].clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0;
            for _ in 0..8 {
                // Two descriptors per request: the hot key and a per-client one in another slot.
                let req = request("x", &[&[("k", "hot")], &[("other", &i.to_string())]]);
                let r = client
                    .clone()
                    .should_rate_limit(req)
                    .await
                    .unwrap()
                    .into_inner();
                ok += u32::from(st(&r, 0).0 == Code::Ok);
                assert_eq!(st(&r, 1).0, Code::Ok);
            }
            ok
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total
}

/// Three processes on one server of `flavor`: exactly the limit admitted, every hit counted.
async fn exact_on_one_server(flavor: Flavor) {
    let r = RedisServer::start_on(flavor, &[]);
    assert_eq!(
        admitted_by_three_instances(r.env()).await,
        LIMIT,
        "{flavor:?}"
    );
    assert_eq!(
        r.cli(&["GET", "{1:x|1:k=3:hot}:fw:3600:997200"]),
        "512",
        "{flavor:?}: every hit was counted once"
    );
}

/// Three processes on the run's shared Cluster of `flavor`, under a key prefix of their own.
async fn exact_on_a_cluster(flavor: Flavor) {
    let c = shared_cluster_of(flavor);
    let mut env = c.env();
    env.push(("CACHE_KEY_PREFIX".into(), "exact_cluster:".into()));
    assert_eq!(admitted_by_three_instances(env).await, LIMIT, "{flavor:?}");
    let keys = c.keys_per_node("exact_cluster:*");
    assert_eq!(
        keys.iter().sum::<usize>(),
        65,
        "{flavor:?}: one hot key and 64 per-client keys: {keys:?}"
    );
    assert!(
        keys.iter().filter(|k| **k > 0).count() >= 2,
        "{flavor:?}: keys spread over the masters: {keys:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_one_redis_admit_exactly_the_limit() {
    require!(Redis);
    exact_on_one_server(Flavor::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_a_redis_cluster_admit_exactly_the_limit() {
    require!(Redis);
    exact_on_a_cluster(Flavor::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_one_valkey_admit_exactly_the_limit() {
    require!(Redis, Valkey);
    exact_on_one_server(Flavor::Valkey).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_a_valkey_cluster_admit_exactly_the_limit() {
    require!(Redis, Valkey);
    exact_on_a_cluster(Flavor::Valkey).await;
}

/// With `REDIS_STARTUP_MAX_ELAPSED_TIME` set (Go's behaviour; the default `0` opens the ports at
/// once and dials Redis in the background, `start_without_redis.rs`), the binary retries with
/// backoff and keeps its ports closed until Redis answers; then it becomes ready and Redis
/// decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_waits_for_redis_with_backoff_when_asked_to() {
    require!(Redis);
    let mut r = RedisServer::not_started(&[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.yaml"), CFG).unwrap();
    let mut env = r.env();
    env.push(("RATELIMITD_CONFIG".into(), dir.path().display().to_string()));
    env.push(("RATELIMITD_TEST_MANUAL_CLOCK".into(), "1000000".into()));
    env.push(("REDIS_STARTUP_MAX_ELAPSED_TIME".into(), "120s".into()));
    env.push(("REDIS_STARTUP_INITIAL_INTERVAL".into(), "50ms".into()));
    env.push(("REDIS_STARTUP_MAX_INTERVAL".into(), "200ms".into()));
    let mut starting = process::starting(&env);
    // Two failed attempts, each announcing a longer wait; `until_line` fails if the binary
    // reports its addresses first, so the ports stay closed while it waits.
    let first = starting.until_line("cannot reach Redis yet");
    let second = starting.until_line("cannot reach Redis yet");
    assert!(first.contains("50ms"), "{first}");
    assert!(second.contains("100ms"), "backoff: {second}");
    r.restart();
    let s = tokio::task::spawn_blocking(move || starting.listening())
        .await
        .unwrap();
    let readyz = format!("http://{}/readyz", s.http_addr);
    let watch = ratelimitd_core::clock::Stopwatch::start();
    loop {
        let status = reqwest::get(&readyz).await.map(|r| r.status().as_u16());
        if matches!(status, Ok(200)) {
            break;
        }
        assert!(
            watch.elapsed() < std::time::Duration::from_secs(30),
            "not ready with Redis up: {status:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut client = RateLimitServiceClient::connect(format!("http://{}", s.grpc_addr))
        .await
        .unwrap();
    let resp = client
        .should_rate_limit(request("x", &[&[("k", "a")]]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st(&resp, 0), (Code::Ok, lim(LIMIT, "HOUR"), LIMIT - 1));
    assert_eq!(
        r.cli(&["GET", "{1:x|1:k=1:a}:fw:3600:997200"]),
        "1",
        "decided by Redis"
    );
}
