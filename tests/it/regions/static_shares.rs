//! Static shares: two regions of two instances each, bounded load on one key from all four at
//! once; each region admits its share on its own Redis and the world admits the limit.

use super::world::Region;
use crate::support::require;

/// 100 an hour worldwide: 60 for eu, 40 for us.
const WORLD: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100, regions: {shares: {eu: 0.6, us: 0.4}}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_region_admits_its_share_and_the_world_the_limit() {
    require!(Redis);
    // The console reads without a token from loopback.
    let trusted = [("ADMIN_TRUST_LOOPBACK".to_string(), "true".to_string())];
    let eu = Region::start("eu", 2, WORLD, &trusted).await;
    let us = Region::start("us", 2, WORLD, &[]).await;
    // 4 instances × 80 requests on one key, 320 in all, at once.
    let (eu_ok, us_ok) = tokio::join!(eu.load("hot", 80), us.load("hot", 80));
    assert_eq!((eu_ok, us_ok), (60, 40), "each region admits its share");
    assert_eq!(eu_ok + us_ok, 100, "the world admits the limit");
    // Each region counted on its own Redis: nothing crossed regions.
    for r in [&eu, &us] {
        let keys = r.redis.cli(&["DBSIZE"]);
        assert_eq!(keys.trim(), "1", "{}: one counter", r.name);
    }
    assert_eq!(eu.share().await, 0.6);
    let s = &eu.instances[0];
    let page = s.http.get(s.admin_url("/")).send().await.unwrap();
    let page = page.text().await.unwrap();
    assert!(
        page.contains("<li>region_share: d.k eu=0.6000</li>"),
        "{page}"
    );
    assert_eq!(us.share().await, 0.4);
}
