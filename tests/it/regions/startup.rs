//! A region whose link to the global store is cut from its start (an in-test TCP proxy) has
//! recorded no share on the board, so the connected region counts it at its floor and may take
//! all the rest: the cut region enforces its floor meanwhile, never its listed share, and the
//! shares in force never add up to more than the limit. Once the link returns, its share rises
//! only through what the global store grants.

use std::time::Duration;

use super::world::{self, Region, round};
use crate::support::chaos::Proxy;
use crate::support::redis::RedisServer;
use crate::support::require;
use ratelimitd_core::clock::{Clock, Stopwatch};

/// 200 a minute worldwide, listed half and half, following demand with a floor of 0.1 and a step
/// of 0.1 per sync.
const MOVING: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 200, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {floor: 0.1, max_step: 0.1}}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_cut_off_from_its_start_enforces_its_floor_until_its_share_is_recorded() {
    require!(Redis);
    let global = RedisServer::start();
    let proxy = Proxy::start(&global).await;
    proxy.cut();
    let direct = world::global(false, format!("127.0.0.1:{}", global.port));
    let mut cut_env = world::global(false, format!("127.0.0.1:{}", proxy.port));
    // A probe within two rounds of the link's return.
    cut_env.push(("REDIS_BREAKER_COOLDOWN".into(), "15s".into()));
    let eu = Region::start("eu", 1, MOVING, &direct).await;
    let us = Region::start("us", 1, MOVING, &cut_env).await;
    let minute = |r: &Region| {
        let clock = r.instances[0].running().manual_clock.clone().unwrap();
        clock.now().as_secs() / 60
    };
    // Whole windows from here.
    let now = us.instances[0].running().manual_clock.clone().unwrap();
    let to_window = Duration::from_secs(60 - now.now().as_secs() % 60);
    for s in eu.instances.iter().chain(&us.instances) {
        s.advance(to_window);
    }
    // Both regions busy (4 a second each against 3.33 worldwide), for two whole windows.
    let mut us_windows = std::collections::BTreeMap::<u64, usize>::new();
    let mut trace = Vec::new();
    for _ in 0..12 {
        let window = minute(&us);
        let (_, got) = tokio::join!(eu.load("hot", 40), us.load("hot", 40));
        *us_windows.entry(window).or_default() += got;
        round(&[&eu, &us]).await;
        let (e, u) = (eu.key_share("hot"), us.key_share("hot"));
        trace.push((e, u));
        assert!(e + u <= 1.0 + 1e-9, "the shares in force: {trace:?}");
    }
    assert!(
        us.sync_line().await.starts_with("# region_sync: failing"),
        "{}",
        us.sync_line().await
    );
    // eu counts us at its floor (us shows nothing on the board) and climbs to all but it; us
    // holds its floor, 20 of the 200 in each window, not the 100 its listed share would admit.
    let (e, u) = trace[trace.len() - 1];
    assert!((e - 0.9).abs() < 1e-9, "eu took the rest: {trace:?}");
    assert!((u - 0.1).abs() < 1e-9, "us holds its floor: {trace:?}");
    assert_eq!(
        us_windows.values().copied().collect::<Vec<_>>(),
        vec![20, 20],
        "us admits its floor's 20 in each window"
    );
    // The link returns: once us's rounds reach the global store (its client dials again on its
    // own schedule, in real time), us's demand shows on the board, eu gives way, and us rises only
    // as the global store grants it, the sum at most 1 all along, to half each.
    proxy.restore();
    let watch = Stopwatch::start();
    while !us.sync_line().await.starts_with("# region_sync: ok") {
        assert!(
            watch.elapsed() < Duration::from_secs(60),
            "us never reached the global store again: {}",
            us.sync_line().await
        );
        step(&eu, &us, &mut trace).await;
    }
    for _ in 0..8 {
        step(&eu, &us, &mut trace).await;
    }
    let (e, u) = trace[trace.len() - 1];
    assert!(
        (e - 0.5).abs() < 1e-9 && (u - 0.5).abs() < 1e-9,
        "converged: {trace:?}"
    );
}

/// One round of both regions busy alike; the shares in force, summed, stay at most 1.
async fn step(eu: &Region, us: &Region, trace: &mut Vec<(f64, f64)>) {
    tokio::join!(eu.load("hot", 40), us.load("hot", 40));
    round(&[eu, us]).await;
    let (e, u) = (eu.key_share("hot"), us.key_share("hot"));
    trace.push((e, u));
    assert!(e + u <= 1.0 + 1e-9, "the shares in force: {trace:?}");
}
