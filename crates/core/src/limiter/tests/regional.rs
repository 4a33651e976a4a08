//! Regional limits through the limiter: a region counts a worldwide limit against its share on
//! its own store, reports the configured limit, and leaves other limits (and a process with no
//! region) alone.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, ManualClock};
use crate::limiter::*;
use crate::region::RegionShares;
use crate::store::memory::MemoryStore;
use crate::test_support::config;

const CFG: &str = r#"
domain: d
descriptors:
  - {key: world, rate_limit: {unit: minute, requests_per_unit: 10, regions: {shares: {eu: 0.6, us: 0.3}}}}
  - {key: bucket, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: token_bucket, burst: 20, regions: {shares: {eu: 0.5}}}}
  - {key: plain, rate_limit: {unit: minute, requests_per_unit: 10}}
  - key: both
    rate_limits:
      - {unit: minute, requests_per_unit: 100}
      - {unit: hour, requests_per_unit: 10, regions: {shares: {eu: 0.2}}}
  - {key: moving, rate_limit: {unit: hour, requests_per_unit: 100, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: true}}}
"#;

/// A limiter of `region` (none: `None`) on a memory store of its own, and the config.
fn region(name: Option<&str>) -> (RateLimiter, RateLimitConfig) {
    let shares = name.map_or_else(RegionShares::default, RegionShares::new);
    let (limiter, cfg, _) = region_with(Arc::new(shares));
    (limiter, cfg)
}

/// A limiter counting regional limits against `shares`, the config, and the limiter's clock.
fn region_with(shares: Arc<RegionShares>) -> (RateLimiter, RateLimitConfig, Arc<ManualClock>) {
    let cfg = config(CFG);
    let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_000)));
    let store = Arc::new(MemoryStore::new(100));
    let limiter =
        RateLimiter::new(store, clock.clone(), LimiterOptions::default()).with_regions(shares);
    (limiter, cfg, clock)
}

/// How many of `n` calls on `key` were admitted, and the last response.
async fn admitted(
    l: &RateLimiter,
    cfg: &RateLimitConfig,
    key: &str,
    n: usize,
) -> (usize, Response) {
    let req = Request::new("d", vec![Descriptor::of(&[(key, "x")])]);
    let mut ok = 0;
    let mut last = None;
    for _ in 0..n {
        let r = l.should_rate_limit(Some(cfg), &req).await.unwrap();
        ok += usize::from(r.overall_code == Code::Ok);
        last = Some(r);
    }
    (ok, last.unwrap())
}

#[tokio::test]
async fn each_region_admits_its_share_and_the_world_the_limit() {
    let (eu, cfg) = region(Some("eu"));
    let (us, _) = region(Some("us"));
    let (ap, _) = region(Some("ap"));
    let (eu_ok, first) = admitted(&eu, &cfg, "world", 1).await;
    // The answer reports the worldwide limit; what is left is this region's.
    let current = first.statuses[0].current_limit.clone().unwrap();
    assert_eq!(current.requests_per_unit, 10);
    assert_eq!(first.statuses[0].limit_remaining, 5);
    let eu_ok = eu_ok + admitted(&eu, &cfg, "world", 19).await.0;
    let us_ok = admitted(&us, &cfg, "world", 20).await.0;
    // A region not listed gets what the others leave (0.1 of 10).
    let ap_ok = admitted(&ap, &cfg, "world", 20).await.0;
    assert_eq!((eu_ok, us_ok, ap_ok), (6, 3, 1));
    assert_eq!(eu_ok + us_ok + ap_ok, 10, "the world admits the limit");
}

#[tokio::test]
async fn a_bucket_shares_its_burst_and_other_limits_are_untouched() {
    let (eu, cfg) = region(Some("eu"));
    assert_eq!(
        admitted(&eu, &cfg, "bucket", 30).await.0,
        10,
        "half the burst of 20"
    );
    assert_eq!(admitted(&eu, &cfg, "plain", 30).await.0, 10);
    // Of `rate_limits`, only the regional one is scaled: 0.2 of 10 an hour.
    assert_eq!(admitted(&eu, &cfg, "both", 30).await.0, 2);
}

#[tokio::test]
async fn without_a_region_a_regional_limit_is_the_whole_limit() {
    let (none, cfg) = region(None);
    assert_eq!(admitted(&none, &cfg, "world", 30).await.0, 10);
}

/// A demand-following key starts at its floor, before any sync as after: the floor is all a
/// region may hold that no entry on the board records. More holds only under the sync's lease,
/// which the decisions themselves check.
#[tokio::test]
async fn a_demand_following_share_starts_at_its_floor_and_holds_more_only_under_the_lease() {
    let shares = Arc::new(RegionShares::new("eu"));
    let (eu, cfg, clock) = region_with(shares.clone());
    // Not the listed 0.5 (50 of the 100 an hour): the floor, 0.05.
    assert_eq!(admitted(&eu, &cfg, "moving", 30).await.0, 5);
    // The sync round sees every hit asked for (admitted or not), once.
    let round = shares.take_round();
    assert_eq!(round.len(), 1);
    assert_eq!((round[0].hits, round[0].share), (30, 0.05));
    assert_eq!(shares.take_round()[0].hits, 0);
    // A sync moves eu to 0.8, under a lease of 100 s: 80 of the 100 an hour (the 30 asked
    // before count).
    let key = round[0].key.clone();
    shares.renew_lease(clock.now().saturating_add(Duration::from_secs(100)));
    shares.apply(&key, 0.8);
    assert_eq!(admitted(&eu, &cfg, "moving", 100).await.0, 50);
    let now = clock.now();
    assert_eq!(
        shares.current(now),
        vec![(key, "d.moving".to_string(), 0.8)]
    );
    // No round renews the lease (a stalled sync): when it runs out, decisions find the floor.
    clock.advance(Duration::from_secs(99));
    assert_eq!(shares.current(clock.now())[0].2, 0.8);
    clock.advance(Duration::from_secs(1));
    assert_eq!(shares.current(clock.now())[0].2, 0.05);
    let (_, r) = admitted(&eu, &cfg, "moving", 1).await;
    assert_eq!(
        r.overall_code,
        Code::OverLimit,
        "130 counted already, 5 allowed"
    );
    assert_eq!(
        shares.take_round()[0].share,
        0.05,
        "lowered for the sync too"
    );
    // Idle keys are forgotten after a while; a key new again starts at the floor.
    for _ in 0..=crate::region::table::IDLE_ROUNDS + 1 {
        shares.take_round();
    }
    assert!(shares.current(clock.now()).is_empty());
    admitted(&eu, &cfg, "moving", 1).await;
    assert_eq!(shares.current(clock.now())[0].2, 0.05);
}

#[tokio::test]
async fn keys_past_the_cap_keep_their_floor_and_are_not_synced() {
    let shares = Arc::new(RegionShares::new("eu").with_max_keys(0));
    let (eu, cfg, _) = region_with(shares.clone());
    assert_eq!(admitted(&eu, &cfg, "moving", 60).await.0, 5);
    assert!(shares.take_round().is_empty());
}

#[tokio::test]
async fn the_cap_counts_keys_across_shards_and_frees_with_forgotten_ones() {
    let shares = Arc::new(RegionShares::new("eu").with_max_keys(3));
    let (eu, cfg, clock) = region_with(shares.clone());
    let ask = |values: std::ops::Range<u32>| {
        let (eu, cfg) = (&eu, &cfg);
        async move {
            for v in values {
                let d = Descriptor::of(&[("moving", &v.to_string())]);
                let req = Request::new("d", vec![d]);
                eu.should_rate_limit(Some(cfg), &req).await.unwrap();
            }
        }
    };
    // 40 keys spread over the shards: 3 tracked in all, not 3 per shard (nor 3 / 16 each).
    ask(0..40).await;
    assert_eq!(shares.current(clock.now()).len(), 3);
    for _ in 0..=crate::region::table::IDLE_ROUNDS + 1 {
        shares.take_round();
    }
    assert!(shares.current(clock.now()).is_empty());
    ask(40..50).await;
    assert_eq!(
        shares.current(clock.now()).len(),
        3,
        "room again once they were forgotten"
    );
}

/// Shares written in decimals are enforced exactly: 0.57 of 100 is 57, 0.29 is 29, and a region
/// not listed gets the 0.14 they leave, 14: the world admits the 100 written.
#[tokio::test]
async fn decimal_shares_are_enforced_exactly() {
    const EXACT: &str = "domain: d\ndescriptors:\n  - {key: world, rate_limit: {unit: minute, requests_per_unit: 100, regions: {shares: {eu: 0.57, us: 0.29}}}}\n";
    let cfg = config(EXACT);
    let mut got = Vec::new();
    for r in ["eu", "us", "ap"] {
        let (limiter, _) = region(Some(r));
        got.push(admitted(&limiter, &cfg, "world", 120).await.0);
    }
    assert_eq!(got, vec![57, 29, 14]);
}
