//! The embedded store through the real gRPC server: exact admission under concurrency, the key
//! bound answering UNAVAILABLE for new keys while existing counters keep counting, and expired
//! keys reclaimed by the server's sweeper with no traffic at all.

use crate::support::reload::eventually;
use crate::support::*;

const CFG: &str =
    "domain: c\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 100}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_on_one_key_admit_exactly_the_limit() {
    let s = TestServer::start(&[("c.yaml", CFG)], &[]).await;
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let grpc = s.grpc.clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0u32;
            for _ in 0..5 {
                let r = grpc
                    .clone()
                    .should_rate_limit(request("c", &[&[("k", "hot")]]))
                    .await
                    .unwrap()
                    .into_inner();
                ok += u32::from(overall(&r) == Code::Ok);
            }
            ok
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    assert_eq!(admitted, 100, "320 concurrent requests on a 100/minute key");
}

#[tokio::test]
async fn a_full_store_refuses_new_keys_but_keeps_old_counters() {
    let s = TestServer::start(&[("c.yaml", CFG)], &[("MEMORY_MAX_KEYS", "2")]).await;
    s.rl("c", &[&[("k", "a")]]).await;
    s.rl("c", &[&[("k", "b")]]).await;
    let e = s.call(request("c", &[&[("k", "c")]])).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
    assert!(e.message().contains("MEMORY_MAX_KEYS"), "{}", e.message());
    let r = s.rl("c", &[&[("k", "a")]]).await;
    assert_eq!(st(&r, 0).2, 98, "the old counter kept counting");
    // Once the minute is over the old keys expire and make room.
    s.advance(std::time::Duration::from_secs(60));
    assert_eq!(st(&s.rl("c", &[&[("k", "c")]]).await, 0).2, 99);
}

/// The sweeper the server starts with the memory store: once the window has passed, the held
/// keys go away by themselves (the gauge an operator watches drops to 0), without a request
/// that would reclaim them on the way.
#[tokio::test]
async fn the_server_sweeps_expired_keys_without_traffic() {
    let prom = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("c.yaml", CFG)], &prom).await;
    s.rl("c", &[&[("k", "a")]]).await;
    s.rl("c", &[&[("k", "b")]]).await;
    let keys = "ratelimitd_memory_store_keys";
    assert_eq!(s.scrape().await.count(keys), Some(2));
    s.advance(std::time::Duration::from_secs(60));
    // The sweeper runs once a (real) second.
    eventually(
        "the memory store's keys swept after their minute",
        || async { s.scrape().await.count(keys) == Some(0) },
    )
    .await;
    s.shutdown().await;
}
