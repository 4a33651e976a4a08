//! A region whose sync stalls: its task runs no round for a while, then its round hangs on a
//! global store that answers nothing (a redis-server stopped with SIGSTOP). The share's lease is
//! checked where a decision reads the share, not in the sync's own round, so once
//! `LEASE_INTERVALS` intervals have passed since its last round that reached the global store the
//! region enforces its floor, the stalled round still pending; and when that round's answer
//! finally comes, after the lease ran out, it does not bring the share back: it rises again only
//! through what later rounds are granted.

use std::time::Duration;

use super::world::{Region, load_one, round};
use crate::support::chaos::Paused;
use crate::support::redis::RedisServer;
use crate::support::require;
use ratelimitd::testing::LEASE_INTERVALS;
use ratelimitd_core::clock::Clock;

/// 200 a minute worldwide, following demand with a floor of 0.1 and a step of 0.1 per sync.
const MOVING: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 200, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {floor: 0.1, max_step: 0.1}}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_sync_lets_the_share_fall_to_its_floor_when_its_lease_runs_out() {
    require!(Redis);
    let global = RedisServer::start();
    let env: Vec<(String, String)> = vec![
        ("GLOBAL_REDIS_SOCKET_TYPE".into(), "unix".into()),
        (
            "GLOBAL_REDIS_URL".into(),
            global.socket().display().to_string(),
        ),
        // The stalled round waits for the stopped redis-server instead of failing.
        ("GLOBAL_REDIS_RESPONSE_TIMEOUT".into(), "300s".into()),
    ];
    let eu = Region::start("eu", 1, MOVING, &env).await;
    let us = Region::start("us", 1, MOVING, &env).await;
    // us asks three times eu's demand: the shares settle on 0.1 + 0.8 × (1/4, 3/4).
    for _ in 0..14 {
        tokio::join!(eu.load("hot", 10), us.load("hot", 30));
        round(&[&eu, &us]).await;
    }
    let settled = us.key_share("hot");
    assert!((settled - 0.7).abs() < 1e-9, "{settled}");
    let clocks = || eu.instances.iter().chain(&us.instances);
    let interval = Duration::from_secs(10);
    // us's task runs no round for all but one interval of its lease; its share holds.
    for s in clocks() {
        s.advance(interval * (LEASE_INTERVALS - 1));
    }
    assert!((us.key_share("hot") - settled).abs() < 1e-9);
    // Then its round hangs: the global store answers nothing.
    let paused = Paused::stop(&global);
    let sync = us.instances[0].running().regions.sync.clone().unwrap();
    let mut stalled = Box::pin(sync.round());
    assert!(
        futures_util::poll!(&mut stalled).is_pending(),
        "the round waits for the stopped global store"
    );
    // The lease runs out while the round hangs: at the start of a fresh window us admits its
    // floor's 20 of the 200, not its last share's 140.
    let clock = us.instances[0].running().manual_clock.clone().unwrap();
    let to_window = interval + Duration::from_secs(60 - (clock.now().as_secs() + 10) % 60);
    for s in clocks() {
        s.advance(to_window);
    }
    assert!(
        (us.key_share("hot") - 0.1).abs() < 1e-9,
        "{}",
        us.key_share("hot")
    );
    assert_eq!(load_one(&us.instances[0], "hot", 40).await, 20);
    // The global store answers again and the round ends, after the lease ran out: the others may
    // have taken the share meanwhile, so its answer does not bring it back.
    paused.resume();
    stalled.await;
    assert!(us.sync_line().await.starts_with("# region_sync: ok"));
    assert!(
        (us.key_share("hot") - 0.1).abs() < 1e-9,
        "{}",
        us.key_share("hot")
    );
    assert_eq!(
        load_one(&us.instances[0], "hot", 40).await,
        0,
        "still the floor's 20 in this window"
    );
    // The rounds go on: us's share rises again, as the global store grants it.
    let mut trace = Vec::new();
    for _ in 0..8 {
        tokio::join!(eu.load("hot", 10), us.load("hot", 30));
        round(&[&eu, &us]).await;
        let (e, u) = (eu.key_share("hot"), us.key_share("hot"));
        trace.push((e, u));
        assert!(e + u <= 1.0 + 1e-9, "the shares in force: {trace:?}");
    }
    assert!(trace[trace.len() - 1].1 > 0.3, "us rises again: {trace:?}");
}
