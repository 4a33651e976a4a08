//! A key asked in bursts, in one region only, counted on the global redis-server itself
//! (`INFO commandstats`): a burst whose demand presses on the key's share posts once, climbs while
//! its demand still presses (a post per step: a share rises only as the global store records
//! it), and parks once it no longer presses, its entry kept to record the share; the demand
//! shrinking on its way out of the measured rounds is not written while no other region asks for
//! the key.

use super::world::{self, Region, calls, round};
use crate::support::redis::RedisServer;
use crate::support::require;

/// 200 a minute worldwide (3.33 a second), following demand with a floor of 0.1 and a step of
/// 0.1 per sync.
const MOVING: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 200, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {floor: 0.1, max_step: 0.1}}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_in_one_region_posts_once_per_step_and_parks() {
    require!(Redis);
    let global = RedisServer::start();
    let env = world::global(true, global.socket().display().to_string());
    let eu = Region::start("eu", 1, MOVING, &env).await;
    let us = Region::start("us", 1, MOVING, &env).await;
    // Both have reached the global store: a new key starts at the floor.
    round(&[&eu, &us]).await;
    global.cli(&["CONFIG", "RESETSTAT"]);
    // 24 requests in one interval of 10 s, then none: over the measured 8 rounds the demand is
    // 2.4, 1.2, 0.8, 0.6, 0.48, … a second, pressing on a share s while it is at least 1.67 × s.
    eu.load("burst", 24).await;
    let mut shares = Vec::new();
    for _ in 0..12 {
        round(&[&eu, &us]).await;
        shares.push(eu.key_share("burst"));
    }
    // Two rounds on the board, then up by the step while the demand presses, each step asked
    // for at one round and granted at the next round's post: 0.2, 0.3, 0.4, where 0.48 a second
    // no longer presses on 0.4.
    let want = [0.1, 0.1, 0.2, 0.3, 0.4, 0.4];
    for (got, want) in shares.iter().zip(want) {
        assert!((got - want).abs() < 1e-9, "{shares:?}");
    }
    assert!(
        shares[5..].iter().all(|s| (s - 0.4).abs() < 1e-9),
        "{shares:?}"
    );
    // 2 instances × 12 rounds of their own line (HSET, PEXPIRE); for the burst one announcement
    // (ZADD, PEXPIRE), one post (HSET, PEXPIRE) and one more per step its share rose (3): a share
    // rises only as the global store records it. No leave: above its floor the entry stays,
    // recording the 0.4 it holds. The board calls of the rounds eu was on the board (5: the first
    // post, a read that asks to rise, and the three posts of the steps, the last of which parks).
    let stats = global.cli(&["INFO", "commandstats"]);
    assert_eq!(calls(&global, "hset"), 24 + 4, "{stats}");
    assert_eq!(calls(&global, "pexpire"), 24 + 1 + 4, "{stats}");
    assert_eq!(calls(&global, "zadd"), 1, "{stats}");
    assert_eq!(calls(&global, "hdel"), 0, "{stats}");
    assert_eq!(calls(&global, "evalsha"), 24 + 5, "{stats}");
}
