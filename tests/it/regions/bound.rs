//! The bound of demand-following shares on real redis-servers: the shares in force of every
//! region (the largest of its instances', each read from the instance itself) are summed after
//! every single instance's sync round, in orders drawn from a seeded generator with now and then
//! a round left out (a late timer), while the demand moves between the regions and one region is
//! cut off from the global store (an in-test TCP proxy) and comes back: with two and with three
//! regions, the sum never passes 1. A region cut off keeps its share for `LEASE_INTERVALS`
//! intervals and nobody takes it meanwhile; then it holds its floor and the others take the rest.

use std::time::Duration;

use super::world::{self, Region, load_one};
use crate::support::chaos::Proxy;
use crate::support::redis::RedisServer;
use crate::support::require;
use ratelimitd::testing::LEASE_INTERVALS;
use ratelimitd_core::clock::Stopwatch;
use ratelimitd_core::random::{Random, SeededRandom};
use ratelimitd_core::region::share::{PPM, ppm};

/// The share in force of key `hot` on every instance of `region` (the largest): the floor on one
/// that has not seen it (its first request starts there).
fn held(region: &Region, floor: f64) -> u64 {
    let shares = region.instances.iter().map(|s| {
        let regions = &s.running().regions;
        let all = regions.shares.current(regions.clock.now());
        let hot = all.iter().find(|(key, _, _)| key.contains(":hot}"));
        ppm(hot.map_or(floor, |k| k.2))
    });
    shares.max().unwrap_or(0)
}

/// One tick: every instance's clock moves one interval (10 s), each region's instances take
/// `load[r]` requests between them, then the instances run their rounds in a drawn order (a few
/// left out); the sum of the shares in force is checked after each round. Returns each region's
/// share in force after the tick.
async fn tick(regions: &[&Region], load: &[usize], floor: f64, draw: &SeededRandom) -> Vec<u64> {
    for s in regions.iter().flat_map(|r| &r.instances) {
        s.advance(Duration::from_secs(10));
    }
    for (r, n) in regions.iter().zip(load) {
        let each = n / r.instances.len();
        let calls = r.instances.iter().map(|s| load_one(s, "hot", each));
        futures_util::future::join_all(calls).await;
    }
    let mut all: Vec<(usize, usize)> = (regions.iter().enumerate())
        .flat_map(|(i, r)| (0..r.instances.len()).map(move |j| (i, j)))
        .collect();
    for i in (1..all.len()).rev() {
        all.swap(i, (draw.unit() * (i + 1) as f64) as usize);
    }
    for (i, j) in all {
        if draw.unit() < 1.0 / 6.0 {
            continue;
        }
        let s = &regions[i].instances[j];
        let sync = s.running().regions.sync.clone().expect("a global store");
        sync.round().await;
        let now: Vec<u64> = regions.iter().map(|r| held(r, floor)).collect();
        let sum: u64 = now.iter().sum();
        assert!(
            sum <= PPM,
            "after {}#{j}'s round the shares in force add up to {sum} ppm: {now:?}",
            regions[i].name
        );
    }
    regions.iter().map(|r| held(r, floor)).collect()
}

/// `names` (the last one through a proxy to the global store), `per_region` instances each,
/// sharing 60 a minute: demand moves around (`phase` ticks each way), then the last region is
/// cut off while the demand goes to the first, and comes back.
async fn world(
    names: [&'static str; 3],
    (count, per_region): (usize, usize),
    follow: (f64, f64),
    phase: usize,
) {
    let names = &names[..count];
    let (floor, step) = follow;
    let shares: Vec<String> = (names.iter())
        .map(|n| format!("{n}: {}", 1.0 / count as f64))
        .collect();
    let yaml = format!(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: minute, requests_per_unit: 60, regions: {{shares: {{{}}}, follow_demand: {{floor: {floor}, max_step: {step}}}}}}}\n",
        shares.join(", ")
    );
    let global = RedisServer::start();
    let proxy = Proxy::start(&global).await;
    let direct = world::global(false, format!("127.0.0.1:{}", global.port));
    let mut cut_env = world::global(false, format!("127.0.0.1:{}", proxy.port));
    // A probe within two rounds of the link's return.
    cut_env.push(("REDIS_BREAKER_COOLDOWN".into(), "15s".into()));
    let mut regions = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let env = if i + 1 == count { &cut_env } else { &direct };
        regions.push(Region::start(name, per_region, &yaml, env).await);
    }
    let rs: Vec<&Region> = regions.iter().collect();
    let last = count - 1;
    let draw = SeededRandom::new(0x5eed_0000 + count as u64);
    // 60 a minute is 1 a second; 12 requests a tick (10 s) press on any share.
    let only =
        |r: usize| -> Vec<usize> { (0..count).map(|i| if i == r { 12 } else { 0 }).collect() };
    let even = vec![12; count];
    let mut trace = Vec::new();
    for load in [only(0), only(last), even.clone()] {
        for _ in 0..phase {
            trace.push(tick(&rs, &load, floor, &draw).await);
        }
    }
    let whole = ppm(1.0 - (count - 1) as f64 * floor);
    assert!(
        trace[..phase].iter().any(|t| t[0] >= whole)
            && trace[phase..2 * phase].iter().any(|t| t[last] >= whole),
        "the demand moved the shares: {trace:?}"
    );
    // The last region is cut off while all the demand goes to the first.
    proxy.cut();
    let at_cut = trace[trace.len() - 1].clone();
    let lease = LEASE_INTERVALS as usize;
    let mut cut = Vec::new();
    for _ in 0..lease + 8 {
        cut.push(tick(&rs, &only(0), floor, &draw).await);
    }
    // It keeps its share while its lease runs (rounds it left out count against it), and the
    // first region takes nothing of it meanwhile: the sum, checked after every round, stays at
    // most 1 with the cut region's share in it.
    assert!(at_cut[last] > ppm(floor), "{at_cut:?}");
    assert!(
        cut[..lease - 2].iter().all(|t| t[last] == at_cut[last]),
        "the cut region keeps its share: {at_cut:?} then {cut:?}"
    );
    // Then it holds its floor, and the first region takes the rest.
    let end = &cut[cut.len() - 1];
    assert_eq!(end[last], ppm(floor), "{cut:?}");
    assert!(end[0] > at_cut[0], "{at_cut:?} then {cut:?}");
    // The link returns and the demand goes to the cut region: once its rounds reach the global
    // store again (its client reconnects on its own schedule, in real time), it climbs again.
    proxy.restore();
    let mut back = Vec::new();
    let watch = Stopwatch::start();
    let cut_region = rs[last];
    while !cut_region
        .sync_line()
        .await
        .starts_with("# region_sync: ok")
    {
        assert!(
            watch.elapsed() < Duration::from_secs(60),
            "{} never reached the global store again: {}",
            cut_region.name,
            cut_region.sync_line().await
        );
        back.push(tick(&rs, &only(last), floor, &draw).await);
    }
    for _ in 0..phase {
        back.push(tick(&rs, &only(last), floor, &draw).await);
    }
    assert!(
        back[back.len() - 1][last] > ppm(0.5),
        "the region is back: {back:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_regions_never_hold_more_than_the_limit_through_moves_and_a_partition() {
    require!(Redis);
    world(["eu", "us", ""], (2, 2), (0.1, 0.2), 16).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_regions_never_hold_more_than_the_limit_through_moves_and_a_partition() {
    require!(Redis);
    world(["ap", "eu", "us"], (3, 1), (0.05, 0.2), 16).await;
}
