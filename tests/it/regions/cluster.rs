//! A Redis Cluster as the global store: two regions, each on its own redis-server, exchange one
//! key's demand through the Cluster this run's tests share. Every call touches the keys of one
//! hash slot (a key's boards share the key's hash tag; the instances' lines and the announced
//! keys share `{ratelimitd_regions}`), so the Cluster runs them as a single Redis would: the load
//! moves eu's share up, then both regions asking alike moves both shares to half and half.

use super::world::{Region, round};
use crate::support::redis::RedisServer;
use crate::support::require;
use crate::support::stores::shared_cluster;

/// 200 a minute worldwide, following demand with a floor of 0.1 and a step of 0.1 per sync,
/// between two regions whose names no other test of this run gives the shared Cluster.
const MOVING: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 200, regions: {shares: {c-eu: 0.5, c-us: 0.5}, follow_demand: {floor: 0.1, max_step: 0.1}}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_regions_converge_through_a_redis_cluster() {
    require!(Redis);
    let cluster = shared_cluster();
    let urls: Vec<String> = cluster.nodes.iter().map(RedisServer::addr).collect();
    let env: Vec<(String, String)> = [
        ("GLOBAL_REDIS_TYPE", "cluster"),
        ("GLOBAL_REDIS_SOCKET_TYPE", "tcp"),
        ("GLOBAL_REDIS_URL", &urls.join(",")),
        // Generous: the machine is loaded.
        ("GLOBAL_REDIS_RESPONSE_TIMEOUT", "2s"),
        // Boards of this test's keys only, on a Cluster other tests write to.
        ("CACHE_KEY_PREFIX", "regions-cluster:"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let eu = Region::start("c-eu", 2, MOVING, &env).await;
    let us = Region::start("c-us", 2, MOVING, &env).await;
    // eu alone, well above its share: from its floor, it posts, holds two rounds, then rises by
    // the step.
    let mut eu_shares = Vec::new();
    for _ in 0..5 {
        eu.load("hot", 30).await;
        round(&[&eu, &us]).await;
        eu_shares.push(eu.share().await);
    }
    let expected = [0.1, 0.1, 0.2, 0.3, 0.4];
    for (got, want) in eu_shares.iter().zip(expected) {
        assert!((got - want).abs() < 1e-9, "eu rises: {eu_shares:?}");
    }
    let boards = cluster.keys_per_node("{regions-cluster:*:region:*");
    assert_eq!(boards.iter().sum::<usize>(), 1, "eu's board: {boards:?}");
    assert!(eu.sync_line().await.starts_with("# region_sync: ok"));
    // Both regions ask alike: the shares converge on half each, never more than the whole.
    let mut both = Vec::new();
    for _ in 0..10 {
        tokio::join!(eu.load("hot", 30), us.load("hot", 30));
        round(&[&eu, &us]).await;
        let (e, u) = (eu.share().await, us.share().await);
        assert!(e + u <= 1.0 + 1e-9, "{both:?} then ({e}, {u})");
        both.push((e, u));
    }
    let (e, u) = both[both.len() - 1];
    assert!(
        (e - 0.5).abs() < 1e-9 && (u - 0.5).abs() < 1e-9,
        "converged: {both:?}"
    );
    let boards = cluster.keys_per_node("{regions-cluster:*:region:*");
    assert_eq!(boards.iter().sum::<usize>(), 2, "both boards: {boards:?}");
    for r in [&eu, &us] {
        let line = r.sync_line().await;
        assert!(line.starts_with("# region_sync: ok"), "{}: {line}", r.name);
    }
}
