//! `rate_limits` through the real gRPC server on every store (memory, Redis, Redis Cluster), with
//! the manual clock: a token bucket for bursts and a daily quota on one descriptor. Every request
//! counts against both; the status reports whichever limit is most restrictive at that moment, by
//! name.

use crate::support::*;

const CFG: &str = "domain: a
descriptors:
  - key: api
    rate_limits:
      - {name: burst, unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 4}
      - {name: daily, unit: day, requests_per_unit: 10}
";

fn named(rpu: u32, unit: &str, name: &str) -> Option<(u32, String, String)> {
    Some((rpu, unit.to_string(), name.to_string()))
}

on_every_store!(bucket_and_daily_quota);
async fn bucket_and_daily_quota(store: StoreKind) {
    let s = TestServer::start_with_store(&[("a.yaml", CFG)], &[], store).await;
    s.set_time(T0);
    let burst = |remaining| (Code::Ok, named(2, "SECOND", "burst"), remaining);
    for remaining in [3, 2, 1, 0] {
        let r = s.rl("a", &[&[("api", "k")]]).await;
        assert_eq!(st(&r, 0), burst(remaining), "the bucket has the least left");
    }
    let r = s.rl("a", &[&[("api", "k")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, named(2, "SECOND", "burst"), 0));
    assert_eq!(
        dur(&r, 0),
        Some(1),
        "half a second until a token, rounded up"
    );
    // The daily window counted all 5 requests (fixed windows count every hit, as in Go).
    s.set_time(T0 + 1);
    for remaining in [1, 0] {
        assert_eq!(
            st(&s.rl("a", &[&[("api", "k")]]).await, 0),
            burst(remaining)
        );
    }
    // A full bucket again (4 tokens), but only 3 of the day's 10 are left: the quota reports.
    s.set_time(T0 + 3);
    let daily = |code, remaining| (code, named(10, "DAY", "daily"), remaining);
    for remaining in [2, 1, 0] {
        let r = s.rl("a", &[&[("api", "k")]]).await;
        assert_eq!(st(&r, 0), daily(Code::Ok, remaining));
    }
    let r = s.rl("a", &[&[("api", "k")]]).await;
    assert_eq!(st(&r, 0), daily(Code::OverLimit, 0));
    assert_eq!(
        dur(&r, 0),
        Some(86_400 - (T0 as i64 + 3)),
        "until the day ends"
    );
    // Another client has its own bucket and quota.
    let r = s.rl("a", &[&[("api", "other")]]).await;
    assert_eq!(st(&r, 0), burst(3));
}
