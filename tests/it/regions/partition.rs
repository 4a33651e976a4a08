//! A region cut off from the global store (an in-test TCP proxy between us and the global Redis):
//! the global store's own breaker opens and the rounds stop calling it, us keeps enforcing its last
//! share and stays ready (`/healthcheck`), eu keeps us's last demand and so does not take the whole
//! limit, the cut shows in `/rlconfig`, the metrics and the status page; once the proxy lets
//! connections through again, us's next round closes the breaker and syncs, and the shares
//! converge on the demand.

use std::time::Duration;

use super::world::{self, Region, round};
use crate::support::chaos::Proxy;
use crate::support::redis::RedisServer;
use crate::support::require;
use ratelimitd_core::clock::Clock;

/// 200 a minute worldwide, following demand with a floor of 0.1 and a step of 0.1 per sync.
const MOVING: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 200, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {floor: 0.1, max_step: 0.1}}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_region_keeps_its_last_share_and_catches_up_after() {
    require!(Redis);
    let global = RedisServer::start();
    let proxy = Proxy::start(&global).await;
    let direct = world::global(false, format!("127.0.0.1:{}", global.port));
    let mut through_proxy = world::global(false, format!("127.0.0.1:{}", proxy.port));
    for (k, v) in [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
        // Longer than two rounds: an open breaker then keeps whole rounds from the global store.
        ("REDIS_BREAKER_COOLDOWN", "25s"),
        // The status page reads without a token from loopback.
        ("ADMIN_TRUST_LOOPBACK", "true"),
    ] {
        through_proxy.push((k.to_string(), v.to_string()));
    }
    let eu = Region::start("eu", 2, MOVING, &direct).await;
    let us = Region::start("us", 2, MOVING, &through_proxy).await;
    let now = |r: &Region| {
        let clock = r.instances[0].running().manual_clock.clone().unwrap();
        clock.now().as_secs()
    };
    // 20 s into a window: the ten rounds below end on the start of a window, where the cut
    // begins, well within us's lease of 100 s at the last of the six rounds after.
    let into = Duration::from_secs((80 - now(&us) % 60) % 60);
    for s in eu.instances.iter().chain(&us.instances) {
        s.advance(into);
    }
    // eu 3 times us's demand: from their floors, the shares settle at 0.1 + 0.8 × (3/4, 1/4) =
    // (0.7, 0.3).
    for _ in 0..10 {
        tokio::join!(eu.load("hot", 30), us.load("hot", 10));
        round(&[&eu, &us]).await;
    }
    let (eu_before, us_before) = (eu.share().await, us.share().await);
    assert!(
        (eu_before - 0.7).abs() < 1e-9 && (us_before - 0.3).abs() < 1e-9,
        "{eu_before} {us_before}"
    );
    proxy.cut();
    // A fresh window, so that what us admits in it is exactly its share.
    assert_eq!(now(&us) % 60, 0, "the rounds end on a window's start");
    // All the load moves to us while it is cut off: 80 a round, 480 in the window.
    let mut admitted = 0;
    for i in 0..6 {
        admitted += us.load("hot", 40).await;
        round(&[&eu, &us]).await;
        if i == 3 {
            // Three failed rounds opened the breaker: this round made no call at all.
            let line = us.sync_line().await;
            assert!(
                line.ends_with("breaker open, last error: the global store's circuit breaker is open; no call until its cool-down passes"),
                "{line}"
            );
        }
        // eu's instances round one after the other while eu's demand fades out (it is measured
        // over the last rounds), so each may read the other's last post or the one before.
        let eu_now = eu.shares().await.into_iter().fold(0.0, f64::max);
        let us_now = us.share().await;
        assert_eq!(us_now, us_before, "us keeps its last share");
        assert!(
            eu_now <= eu_before + 1e-9,
            "eu takes nothing of us's share: {eu_now}"
        );
        assert!(eu_now + us_now <= 1.0 + 1e-9);
    }
    assert_eq!(
        admitted, 60,
        "us admits its last share of 200, never the whole limit nor none"
    );
    let line = us.sync_line().await;
    assert!(
        line.starts_with("# region_sync: failing") && line.contains("6 failed rounds"),
        "{line}"
    );
    // The metrics say so too.
    let m = us.instances[0].scrape().await;
    let share = m.get("ratelimitd_region_share{limit=\"d.k\",region=\"us\"}");
    assert!(
        share.is_some_and(|s| (s - us_before).abs() < 1e-4),
        "{share:?}"
    );
    assert_eq!(m.value("ratelimitd_region_sync_failures_total"), 6);
    let age = m.get("ratelimitd_region_sync_age_seconds").unwrap();
    assert!(
        age >= 60.0,
        "no success since the cut, a minute of rounds ago at least: {age}"
    );
    // The global store's breaker under its own label, apart from the regional Redis's.
    let breaker = |m: &crate::support::scrape::Scrape, target: &str| {
        m.get(&format!(
            "ratelimitd_redis_breaker_state{{target=\"{target}\"}}"
        ))
    };
    assert_eq!(breaker(&m, "main"), Some(0.0), "the regional Redis answers");
    assert!(
        breaker(&m, "global").is_some_and(|s| s >= 1.0),
        "open or probing: {:?}",
        breaker(&m, "global")
    );
    let opened = "ratelimitd_redis_breaker_transitions_total{target=\"global\",to=\"open\"}";
    assert!(m.value(opened) >= 1);
    // Still ready: the region decides on its own Redis and its last shares.
    for s in &us.instances {
        let health = s.http.get(s.http_url("/healthcheck")).send().await.unwrap();
        assert_eq!(health.status(), 200, "{}", health.text().await.unwrap());
    }
    let s = &us.instances[0];
    let page = s.http.get(s.admin_url("/")).send().await.unwrap();
    let page = page.text().await.unwrap();
    assert!(
        page.contains("<tr><td>global</td><td>half-open</td>"),
        "{page}"
    );
    assert!(page.contains("region_sync: failing"), "{page}");
    proxy.restore();
    // The next round reaches the global store: us's demand is posted, and its share rises at
    // the post after (once eu's lower share shows).
    us.load("hot", 30).await;
    round(&[&eu, &us]).await;
    assert!(
        us.sync_line().await.starts_with("# region_sync: ok"),
        "{}",
        us.sync_line().await
    );
    us.load("hot", 30).await;
    round(&[&eu, &us]).await;
    assert!(
        us.share().await > us_before + 0.09,
        "us catches up within two intervals"
    );
    let m = us.instances[0].scrape().await;
    assert_eq!(breaker(&m, "global"), Some(0.0), "the probe closed it");
    // eu is idle: the shares converge on (0.1, 0.9).
    for _ in 0..8 {
        us.load("hot", 30).await;
        round(&[&eu, &us]).await;
    }
    assert!((us.share().await - 0.9).abs() < 1e-9);
    assert!((eu.share().await - 0.1).abs() < 1e-9);
}
