//! An instance of us restarts under a new identity while us goes on: the share its old identity's
//! entry recorded still holds eu down until that identity's lease has run out (an instance that
//! stops running rounds may still be enforcing its share for `LEASE_INTERVALS` intervals), then
//! eu's share climbs, instead of waiting the thirty intervals an entry lives.

use super::world::{self, Region, round};
use crate::support::redis::RedisServer;
use crate::support::require;

/// 200 a minute worldwide, following demand with a floor of 0.1 and a step of 0.1 per sync.
const MOVING: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 200, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {floor: 0.1, max_step: 0.1}}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_instance_s_old_share_stops_counting_once_its_lease_has_run_out() {
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
    let lapse = ratelimitd::testing::LEASE_INTERVALS as usize + 2;
    let mut shares = Vec::new();
    for _ in 0..lapse + 3 {
        tokio::join!(
            eu.load("hot", 30),
            world::load_one(&us.instances[0], "hot", 30)
        );
        round(&[&eu, &us]).await;
        shares.push(eu.share().await);
    }
    // The old identity ran its last round one interval before the first of these: until its
    // lease (and the margin) has run out, the 0.63 it recorded holds eu where it was; then eu
    // climbs to half, as the demand asks.
    assert!(
        shares[..lapse - 2]
            .iter()
            .all(|s| (s - settled).abs() < 1e-9),
        "{shares:?}"
    );
    assert!(shares[lapse + 1] > settled + 0.09, "{shares:?}");
    assert!((shares[lapse + 2] - 0.5).abs() < 1e-4, "{shares:?}");
}
