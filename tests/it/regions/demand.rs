//! Demand-following shares through the global store: load on one key moves from eu to us; us's
//! share grows every interval while eu's falls to its floor and stays there, and in every window
//! the world admits no more than the bound derived from the sync interval and the step.

use super::world::{self, Region, round};
use crate::support::redis::RedisServer;
use crate::support::require;
use ratelimitd_core::clock::Clock;
use ratelimitd_core::region::share::over_admission_bound;

/// 200 a minute worldwide, listed half and half, following demand with a floor of 0.1 and a step
/// of 0.05 per sync.
const MOVING: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 200, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {floor: 0.1, max_step: 0.05}}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_moving_between_regions_moves_the_shares_within_the_bound() {
    require!(Redis);
    let global = RedisServer::start();
    let env = world::global(true, global.socket().display().to_string());
    let eu = Region::start("eu", 2, MOVING, &env).await;
    let us = Region::start("us", 2, MOVING, &env).await;
    // 10 s rounds in 60 s windows, steps of 0.05, two regions.
    let bound = over_admission_bound(200, 60.0, 10.0, 0.05, 2) as usize;
    assert_eq!(bound, 320);
    let mut windows = std::collections::BTreeMap::<u64, usize>::new();
    let minute = |r: &Region| {
        r.instances[0]
            .running()
            .manual_clock
            .as_ref()
            .unwrap()
            .now()
            .as_secs()
            / 60
    };
    // eu alone: 60 requests a round (360 a window, above the whole limit).
    let mut eu_shares = Vec::new();
    for _ in 0..6 {
        *windows.entry(minute(&eu)).or_default() += eu.load("hot", 30).await;
        round(&[&eu, &us]).await;
        eu_shares.push(eu.share().await);
    }
    // It starts at its floor, not its listed half (no entry on the board records more yet); its
    // first two rounds on the board hold (every other region sees it before it rises).
    let expected = [0.1, 0.1, 0.15, 0.2, 0.25, 0.3];
    for (got, want) in eu_shares.iter().zip(expected) {
        assert!(
            (got - want).abs() < 1e-9,
            "eu rises by the step: {eu_shares:?}"
        );
    }
    // The load moves to us. Its first request finds the floor: the others may hold the rest. It
    // climbs to all it can hold (0.9) and keeps it for a whole window.
    let mut us_shares = Vec::new();
    for _ in 0..24 {
        *windows.entry(minute(&us)).or_default() += us.load("hot", 30).await;
        us_shares.push(us.share().await);
        round(&[&eu, &us]).await;
    }
    us_shares.push(us.share().await);
    assert!(
        (us_shares[0] - 0.1).abs() < 1e-9,
        "us starts at its floor: {us_shares:?}"
    );
    assert!(
        us_shares[..3].iter().all(|s| (s - 0.1).abs() < 1e-9),
        "two rounds on the board before it rises: {us_shares:?}"
    );
    assert!(
        us_shares
            .windows(2)
            .skip(2)
            .take(8)
            .all(|w| w[1] > w[0] + 0.04),
        "then us grows every interval: {us_shares:?}"
    );
    assert!(
        us_shares[6] >= 0.3 - 1e-9,
        "within a few intervals: {us_shares:?}"
    );
    // eu, idle now, falls to its floor and keeps it.
    assert!((eu.share().await - 0.1).abs() < 1e-9, "eu keeps its floor");
    for (w, total) in &windows {
        assert!(
            *total <= bound,
            "window {w}: the world admitted {total} (bound {bound})"
        );
    }
    // Under full load the world admitted close to the limit, not a fraction of it.
    let busiest = windows.values().max().copied().unwrap_or_default();
    assert!(
        busiest >= 150,
        "the world admitted {busiest} at most in a window: {windows:?}"
    );
    assert!(eu.sync_line().await.starts_with("# region_sync: ok"));
}
