//! An instance of us restarts under a new identity while us goes on: the demand its old identity
//! left on the board stops counting two intervals after its last round, instead of holding eu's
//! share down for the thirty intervals an entry lives (which is what a region cut off as a whole
//! keeps: `partition.rs`).

use super::world::{self, Region, round};
use crate::support::redis::RedisServer;
use crate::support::require;

/// 200 a minute worldwide, following demand with a floor of 0.1 and a step of 0.1 per sync.
const MOVING: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 200, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {floor: 0.1, max_step: 0.1}}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_instance_s_old_demand_stops_counting_after_two_intervals() {
    require!(Redis);
    let global = RedisServer::start();
    let env = world::global(true, global.socket().display().to_string());
    let eu = Region::start("eu", 1, MOVING, &env).await;
    let mut us = Region::start("us", 2, MOVING, &env).await;
    // eu asks 3 a second, us 6 (two instances): 0.1 + 0.8 × (1/3, 2/3).
    for _ in 0..8 {
        tokio::join!(eu.load("hot", 30), us.load("hot", 30));
        round(&[&eu, &us]).await;
    }
    // `/rlconfig` prints four decimals.
    let settled = eu.share().await;
    assert!((settled - (0.1 + 0.8 / 3.0)).abs() < 1e-4, "{settled}");
    // us's second instance restarts: a new identity; the old one's entry (3 a second) stays on
    // the board. us now asks 3 a second through its first instance, as much as eu.
    drop(us.instances.pop());
    us.add(MOVING, &env).await;
    let mut shares = Vec::new();
    for _ in 0..4 {
        tokio::join!(
            eu.load("hot", 30),
            world::load_one(&us.instances[0], "hot", 30)
        );
        round(&[&eu, &us]).await;
        shares.push(eu.share().await);
    }
    // Within two intervals of its last round the old entry still counts; after that eu's target
    // is half, and its share climbs toward it.
    assert!(
        (shares[0] - settled).abs() < 1e-9 && (shares[1] - settled).abs() < 1e-9,
        "{shares:?}"
    );
    assert!(shares[2] > settled + 0.09, "{shares:?}");
    assert!((shares[3] - 0.5).abs() < 1e-4, "{shares:?}");
}
