//! Token leases on token buckets, on a real Redis (README "Token leases"): three instances never
//! admit more than the bucket gives (the manual clock stands still, so nothing refills: the bound
//! is the capacity), cost a fraction of the Redis calls, and give unspent tokens back on reload,
//! when a lease's TTL passes and on shutdown.

use std::time::Duration;

use crate::support::TestServer;
use crate::support::leases;
use crate::support::redis::RedisServer;
use crate::support::require;

/// One hot token bucket holding `rpu` tokens, refilled by `rpu` per hour, leased `lease` at once.
fn config(rpu: u32, lease: u32) -> String {
    format!(
        "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {{unit: hour, requests_per_unit: {rpu}, algorithm: token_bucket, burst: {rpu}, lease: {lease}}}\n"
    )
}

async fn start(redis: &RedisServer, rpu: u32, lease: u32) -> TestServer {
    leases::start(redis, &config(rpu, lease)).await
}

/// Whole tokens in the hot bucket of 1000.
fn tokens(redis: &RedisServer) -> u64 {
    leases::tokens(redis, "hot", 1000, 3600)
}

/// Polls (10 s at most) until the hot bucket holds `want` tokens.
async fn until_tokens(redis: &RedisServer, want: u64, what: &str) {
    leases::until(what, want, || tokens(redis)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_never_take_more_than_the_bucket_holds() {
    require!(Redis);
    let redis = RedisServer::start();
    // 3000 requests on a bucket of 1000; the clock stands still, so nothing refills.
    let admitted =
        leases::three_instances_admit_at_most_1000(&redis, &config(1000, 100), ("b", "hot")).await;
    assert_eq!(
        tokens(&redis),
        1000 - admitted as u64,
        "after shutdown only the admitted requests took tokens"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_lease_of_100_costs_under_a_twentieth_of_the_redis_calls() {
    require!(Redis);
    let config = |lease| config(100_000, lease);
    leases::assert_a_lease_costs_under_a_twentieth(config, ("b", "hot")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unspent_tokens_go_back_on_reload_after_the_ttl_and_on_shutdown() {
    require!(Redis);
    let redis = RedisServer::start();
    let s = start(&redis, 1000, 100).await;
    leases::admit(&s, ("b", "hot"), 250).await;
    // 250 taken, and the rest of the third grant of 100 held by this instance.
    assert_eq!(
        tokens(&redis),
        1000 - 250 - 53,
        "three grants of 100 were taken"
    );
    // A reload (the lease size changes) gives the held tokens back.
    std::fs::write(s.dir.path().join("d.yaml"), config(1000, 50)).unwrap();
    s.running().reload_now().await;
    until_tokens(&redis, 750, "after the reload").await;

    // 10 more: a grant of 50, 9 of it served; 41 held. The TTL of a lease of 50 is the time the
    // bucket takes to refill 50 tokens: 50 × 3600 s / 1000 = 180 s.
    leases::admit(&s, ("b", "hot"), 10).await;
    assert_eq!(tokens(&redis), 750 - 10 - 41, "a new lease is held");
    s.advance(Duration::from_secs(179));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        tokens(&redis),
        750 - 10 - 41,
        "held while its TTL runs (the refill only shows on the next write)"
    );
    s.advance(Duration::from_secs(1));
    // 180 s refilled 50 tokens; the 41 unspent come back on top.
    until_tokens(&redis, 1000 - 260 + 50, "after the TTL").await;
    leases::assert_lease_counters(&s, 256, 94).await;
    // A third lease, given back by the shutdown drain.
    leases::admit(&s, ("b", "hot"), 5).await;
    assert!(tokens(&redis) < 1000 - 260 + 50 - 5, "a new lease is held");
    s.shutdown().await;
    assert_eq!(
        tokens(&redis),
        1000 - 265 + 50,
        "only the admitted requests took tokens"
    );
}

#[tokio::test]
async fn the_last_tokens_are_taken_from_redis_one_by_one() {
    require!(Redis);
    let redis = RedisServer::start();
    let s = start(&redis, 40, 100).await;
    // Tokens held by the lease after each admitted request: a grant is a quarter of what the
    // bucket holds after the request (9, 7, 5, 3, 2, 2), then none once that is under 2.
    let held = |n| 40 - n - leases::tokens(&redis, "hot", 40, 3600);
    leases::assert_the_last_hits_go_to_redis(&s, ("b", "hot"), held).await;
    s.shutdown().await;
}
