//! Priority shedding and soft limits through the real gRPC server on every store, on the manual
//! clock and a seeded random source (`RATELIMITD_TEST_RANDOM_SEED`): the exact usage at which
//! each class starts being refused, the soft zone's denial share against its linear curve, the
//! soft-breach signal from its ratio on, and three instances on one Redis holding the thresholds
//! fleet-wide.

use std::time::Duration;

use ratelimitd::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};

use crate::support::*;

/// A limit of 10 a minute on the shop's API with four priority classes (shared with the status
/// page's test of the same limit and the memcached backend's shedding test).
pub(crate) const SHOP: &str = "domain: shop
descriptors:
  - key: service
    value: api
    rate_limit:
      unit: minute
      requests_per_unit: 10
      priorities: {critical: 1.0, write: 0.9, read: 0.8, test: 0.7}
";

/// The first second of a minute window after `T0`, `k` windows on.
fn window(k: u64) -> u64 {
    (T0 / 60 + 1 + k) * 60
}

/// One hit on the shop's API as `class` (no class entry when `None`).
async fn hit(s: &TestServer, class: Option<&str>) -> RateLimitResponse {
    let mut entries = vec![("service", "api")];
    entries.extend(class.map(|c| ("priority", c)));
    s.rl("shop", &[&entries]).await
}

/// How many hits of `class` in a row are admitted (at most `most` tries).
async fn admitted_in_a_row(s: &TestServer, class: Option<&str>, most: usize) -> usize {
    for n in 0..most {
        if overall(&hit(s, class).await) == Code::OverLimit {
            return n;
        }
    }
    most
}

on_every_store!(each_class_is_shed_at_its_share_and_critical_keeps_the_rest);
async fn each_class_is_shed_at_its_share_and_critical_keeps_the_rest(store: StoreKind) {
    let s = TestServer::start_with_store(&[("shop.yaml", SHOP)], &[], store).await;
    // (class sent, usage from which it is refused): unknown and missing classes are the lowest.
    let cases = [
        (Some("test"), 7),
        (Some("read"), 8),
        (Some("write"), 9),
        (Some("critical"), 10),
        (Some("no-such-class"), 7),
        (None, 7),
    ];
    for (k, (class, share)) in cases.into_iter().enumerate() {
        s.set_time(window(k as u64));
        assert_eq!(admitted_in_a_row(&s, class, 20).await, share, "{class:?}");
        // Refused hits leave the counter alone: five more of them do not eat the rest.
        for _ in 0..5 {
            let r = hit(&s, class).await;
            assert_eq!(
                st(&r, 0),
                (Code::OverLimit, lim(10, "MINUTE"), 0),
                "{class:?}"
            );
        }
        // Critical traffic is admitted up to 100% of the one shared counter, not one hit more.
        let rest = admitted_in_a_row(&s, Some("critical"), 20).await;
        assert_eq!(
            rest,
            10 - share,
            "{class:?}: critical after the class filled its share"
        );
    }
    // A class fills its share with the others: reads stop at 8 whoever used the first 7.
    s.set_time(window(10));
    assert_eq!(admitted_in_a_row(&s, Some("test"), 20).await, 7);
    assert_eq!(admitted_in_a_row(&s, Some("read"), 20).await, 1);
    assert_eq!(admitted_in_a_row(&s, Some("write"), 20).await, 1);
    assert_eq!(admitted_in_a_row(&s, Some("critical"), 20).await, 1);
}

const SOFT: &str = "domain: soft
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 100
      soft: {up_to: 1.2}
";

/// One hit (or a check of `hits` 0) for user `u`.
async fn soft_call(s: &TestServer, hits: Option<u64>) -> Code {
    let mut d = descriptor(&[("user", "u")]);
    d.hits_addend = hits;
    let req = RateLimitRequest {
        domain: "soft".into(),
        descriptors: vec![d],
        hits_addend: 0,
    };
    overall(&s.call(req).await.expect("ShouldRateLimit succeeds"))
}

/// Hits until `usage` of them were admitted in this window (at most `tries` hits).
async fn fill_to(s: &TestServer, from: usize, usage: usize, tries: usize) {
    let mut admitted = from;
    for _ in 0..tries {
        if admitted == usage {
            return;
        }
        if soft_call(s, None).await == Code::Ok {
            admitted += 1;
        }
    }
    panic!("only {admitted} of {usage} hits admitted in {tries} tries");
}

on_every_store!(the_soft_zone_denies_along_its_linear_curve);
async fn the_soft_zone_denies_along_its_linear_curve(store: StoreKind) {
    let env = [("RATELIMITD_TEST_RANDOM_SEED", "27")];
    let s = TestServer::start_with_store(&[("soft.yaml", SOFT)], &env, store).await;
    s.set_time(window(0));
    // Up to the limit nothing is denied.
    for n in 0..100 {
        assert_eq!(soft_call(&s, None).await, Code::Ok, "hit {}", n + 1);
    }
    // Halfway into the zone (usage 110 of 100, up to 120), a check is denied when the draw puts
    // the request's limit below 110: with probability (110 − 100) / 20 = 0.5.
    fill_to(&s, 100, 110, 2_000).await;
    let mut denied = 0;
    for _ in 0..10_000 {
        denied += usize::from(soft_call(&s, Some(0)).await == Code::OverLimit);
    }
    // The share of 10 000 seeded draws: a binomial sd of 0.005, so ±0.02 is 4 sd.
    let share = denied as f64 / 10_000.0;
    assert!((share - 0.5).abs() <= 0.02, "denied share {share} at 110%");
    // At the top of the zone everything is denied: from 119, a hit would make 120.
    fill_to(&s, 110, 119, 5_000).await;
    for _ in 0..500 {
        assert_eq!(soft_call(&s, None).await, Code::OverLimit);
    }
}

const SIGNAL: &str = "domain: warn
descriptors:
  - key: own
    rate_limit: {unit: minute, requests_per_unit: 10, soft: {breach_ratio: 0.8}}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 10}
";

/// Whether the answer carries the soft-breach header and metadata.
fn breach_signal(r: &RateLimitResponse) -> (bool, bool) {
    let header = r
        .response_headers_to_add
        .iter()
        .any(|h| h.key == "x-ratelimit-soft-breach" && h.value == "true");
    let metadata = r
        .dynamic_metadata
        .as_ref()
        .and_then(|m| m.fields.get("softBreach"))
        .is_some();
    (header, metadata)
}

on_every_store!(the_soft_breach_signal_starts_exactly_at_its_ratio);
async fn the_soft_breach_signal_starts_exactly_at_its_ratio(store: StoreKind) {
    let env = [
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
        ("RESPONSE_DYNAMIC_METADATA", "true"),
        ("SOFT_BREACH_RATIO", "0.5"),
    ];
    let s = TestServer::start_with_store(&[("warn.yaml", SIGNAL)], &env, store).await;
    s.set_time(window(0));
    // The limit's own ratio (0.8) wins over the service's (0.5); a plain limit takes the service's.
    for (key, from) in [("own", 8), ("plain", 5)] {
        for usage in 1..=11u32 {
            let r = s.rl("warn", &[&[(key, "x")]]).await;
            let on = usage >= from;
            assert_eq!(breach_signal(&r), (on, on), "{key} at usage {usage}");
        }
    }
    // Without the header setting the signal stays in the metadata only.
    let s2 = TestServer::start_with_store(
        &[("warn.yaml", SIGNAL)],
        &[("RESPONSE_DYNAMIC_METADATA", "true")],
        store,
    )
    .await;
    s2.set_time(window(1));
    for usage in 1..=8 {
        let r = s2.rl("warn", &[&[("own", "y")]]).await;
        assert_eq!(breach_signal(&r), (false, usage >= 8), "usage {usage}");
    }
}

/// Three instances on one Redis share the counter: the shares hold for the whole fleet.
#[tokio::test]
async fn three_instances_on_one_redis_shed_at_the_fleet_wide_usage() {
    require!(Redis);
    let redis = stores::shared_redis();
    let prefix = format!("shed-fleet-{}:", std::process::id());
    let env = [("CACHE_KEY_PREFIX", prefix.as_str())];
    let mut fleet = Vec::new();
    for _ in 0..3 {
        fleet.push(TestServer::start_on(&[("shop.yaml", SHOP)], &env, Some(redis)).await);
    }
    for s in &fleet {
        s.set_time(window(0));
    }
    // Reads round-robin over the three: 8 admitted in all, not 8 per instance.
    let mut admitted = 0;
    for i in 0..30 {
        admitted += usize::from(overall(&hit(&fleet[i % 3], Some("read")).await) == Code::Ok);
    }
    assert_eq!(admitted, 8);
    let mut critical = 0;
    for i in 0..30 {
        critical += usize::from(overall(&hit(&fleet[i % 3], Some("critical")).await) == Code::Ok);
    }
    assert_eq!(
        critical, 2,
        "critical keeps exactly the last 20% fleet-wide"
    );
    // The next window starts over everywhere.
    for s in &fleet {
        s.advance(Duration::from_secs(60));
    }
    assert_eq!(overall(&hit(&fleet[1], Some("test")).await), Code::Ok);
}

/// The per-class counters and the soft-breach count, as Prometheus shows them.
#[tokio::test]
async fn shed_and_soft_breach_counts_are_exposed_per_limit_and_class() {
    let files = [("shop.yaml", SHOP), ("soft.yaml", SOFT)];
    let env = [
        ("SOFT_BREACH_RATIO", "0.9"),
        ("RATELIMITD_TEST_RANDOM_SEED", "1"),
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&files, &env).await;
    s.set_time(window(0));
    assert_eq!(admitted_in_a_row(&s, Some("read"), 20).await, 8);
    assert_eq!(admitted_in_a_row(&s, Some("critical"), 20).await, 2);
    // Past the top of its zone a soft limit denies hard; inside it, by the draw.
    fill_to(&s, 0, 119, 5_000).await;
    assert_eq!(soft_call(&s, None).await, Code::OverLimit);
    let m = s.scrape().await;
    let shed = |class: &str, outcome: &str, key: &str| {
        m.count(&format!(
            "ratelimitd_shed_total{{class=\"{class}\",key=\"{key}\",outcome=\"{outcome}\"}}"
        ))
    };
    assert_eq!(shed("read", "admitted", "shop.service_api"), Some(8));
    assert_eq!(shed("read", "shed", "shop.service_api"), Some(1));
    assert_eq!(shed("critical", "admitted", "shop.service_api"), Some(2));
    assert_eq!(shed("critical", "denied", "shop.service_api"), Some(1));
    assert_eq!(shed("", "admitted", "soft.user"), Some(119));
    assert_eq!(
        shed("", "denied", "soft.user"),
        Some(1),
        "usage 120 is the top"
    );
    assert!(shed("", "soft_denied", "soft.user").unwrap_or(0) > 0);
    // Usage 9 of 10 and 10 of 10 (and the denial at 11) reached 0.9; read's shed at 9 too.
    let breaches = m.value("ratelimitd_soft_breach_total{key=\"shop.service_api\"}");
    assert_eq!(breaches, 4);
}

/// Go's per-limit counters for a limit with priority classes: a request shed at its class's
/// share is over the limit it was judged by, so it counts in `over_limit`, as Go counts an
/// over-limit hit — not as `near_limit` hits of the full limit.
#[tokio::test]
async fn a_shed_request_counts_as_over_limit_in_go_stats() {
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("shop.yaml", SHOP)], &env).await;
    s.set_time(window(0));
    // `read` holds 0.8 of 10: eight admitted, then two shed.
    assert_eq!(admitted_in_a_row(&s, Some("read"), 8).await, 8);
    for _ in 0..2 {
        assert_eq!(overall(&hit(&s, Some("read")).await), Code::OverLimit);
    }
    let m = s.scrape().await;
    let v = |stat: &str| {
        m.count(&format!(
            "ratelimit_service_rate_limit_{stat}{{domain=\"shop\",key1=\"service_api\",key2=\"\"}}"
        ))
    };
    assert_eq!(v("total_hits"), Some(10), "{m}");
    assert_eq!(v("within_limit"), Some(8));
    assert_eq!(v("over_limit"), Some(2));
    assert_eq!(
        v("near_limit"),
        None,
        "no admitted hit passed 0.8 of 10: {m}"
    );
}
