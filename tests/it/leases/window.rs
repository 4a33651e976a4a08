//! Token leases on a real Redis (`lease:` on a fixed window, README "Token leases"): three
//! instances never admit more than the limit together and reach it within the documented bound,
//! cost a fraction of the Redis calls, give unspent hits back on reload and shutdown, and decide
//! the last hits of a window on Redis one by one.

use crate::support::TestServer;
use crate::support::leases;
use crate::support::redis::RedisServer;
use crate::support::require;

/// One hot key with `rpu` per hour, leased `lease` hits at a time.
fn config(rpu: u32, lease: u32) -> String {
    format!(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: hour, requests_per_unit: {rpu}, lease: {lease}}}\n"
    )
}

async fn start(redis: &RedisServer, rpu: u32, lease: u32) -> TestServer {
    leases::start(redis, &config(rpu, lease)).await
}

/// The hot key's counter in Redis (0 when absent).
fn counter(redis: &RedisServer) -> u64 {
    leases::counter(redis, "hot")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_never_admit_more_than_the_limit_and_reach_it() {
    require!(Redis);
    let redis = RedisServer::start();
    // 3 × 4 clients × 250 = 3000 requests on one key limited to 1000 an hour.
    leases::three_instances_admit_at_most_1000(&redis, &config(1000, 100), ("k", "hot")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_of_100_costs_under_a_twentieth_of_the_redis_calls() {
    require!(Redis);
    let config = |lease| config(100_000, lease);
    leases::assert_a_lease_costs_under_a_twentieth(config, ("k", "hot")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unspent_hits_go_back_on_reload_and_on_shutdown() {
    require!(Redis);
    let redis = RedisServer::start();
    let s = start(&redis, 100_000, 100).await;
    leases::admit(&s, ("k", "hot"), 250).await;
    // 250 admitted, the rest of the third grant held by this instance.
    assert_eq!(counter(&redis), 250 + 53, "three grants of 100 were taken");
    // A reload that changes the limit gives the held hits back.
    std::fs::write(s.dir.path().join("d.yaml"), config(50_000, 100)).unwrap();
    s.running().reload_now().await;
    leases::until("unspent hits given back after the reload", 250, || {
        counter(&redis)
    })
    .await;
    leases::admit(&s, ("k", "hot"), 10).await;
    assert!(counter(&redis) > 260, "a new lease is held");
    leases::assert_lease_counters(&s, 256, 53).await;
    // The shutdown drain (what SIGTERM runs) gives them back too.
    s.shutdown().await;
    assert_eq!(counter(&redis), 260, "only the admitted hits stay counted");
}

#[tokio::test]
async fn the_last_hits_of_a_window_go_to_redis_one_by_one() {
    require!(Redis);
    let redis = RedisServer::start();
    let s = start(&redis, 40, 100).await;
    // The counter after each admitted hit: grants are a quarter of the room after the hit
    // (9, 7, 5, 3, 2, 2), then none once that is under 2: hits 35 to 40 are counted one by one.
    let held = |n| counter(&redis) - n;
    leases::assert_the_last_hits_go_to_redis(&s, ("k", "hot"), held).await;
    s.shutdown().await;
}
