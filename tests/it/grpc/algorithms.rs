//! The algorithms through the real gRPC server on every store (memory, Redis, Redis Cluster),
//! with the manual clock: the fixed window's boundary burst (up to 2× the limit across a window
//! edge) next to a sliding window that admits nothing more at the edge, a sliding log that never
//! exceeds the limit in any window-long interval, and token and leaky buckets that never exceed
//! `burst + refill`; `hits_addend` and request overrides with every algorithm; `unit_multiplier`
//! windows; and what the response reports (`current_limit.unit` stays the config unit; remaining
//! and reset are the algorithm's).

use std::time::Duration;

use crate::support::*;
use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;

/// A limit of 10 a minute on each algorithm's key, and a few shapes more.
fn cfg() -> String {
    each_algorithm(
        "a",
        10,
        "minute",
        "  - {key: lb1, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: leaky_bucket, burst: 1}}
  - {key: tb5, rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 4, unit_multiplier: 5}}
  - {key: fw5, rate_limit: {unit: minute, requests_per_unit: 3, unit_multiplier: 5}}
",
    )
}

/// Sends `n` single-hit requests on `key` and returns how many were admitted.
async fn admitted(s: &TestServer, key: &str, n: u32) -> u32 {
    let mut ok = 0;
    for _ in 0..n {
        ok += u32::from(overall(&s.rl("a", &[&[(key, "x")]]).await) == Code::Ok);
    }
    ok
}

on_every_store!(boundary_burst);
async fn boundary_burst(store: StoreKind) {
    let s = TestServer::start_with_store(&[("a.yaml", &cfg())], &[], store).await;
    // The sliding log gets 4 hits half a minute early, so its minute ends at different times.
    s.set_time(1230);
    assert_eq!(admitted(&s, "sl", 4).await, 4);
    // One second before a minute boundary, then at the boundary: 2 seconds apart.
    s.set_time(1259);
    for key in ["fw", "sw", "tb", "lb"] {
        assert_eq!(admitted(&s, key, 15).await, 10, "{key}");
    }
    assert_eq!(admitted(&s, "sl", 15).await, 6, "4 + 6 in the last minute");
    assert_eq!(admitted(&s, "lb1", 15).await, 1, "burst 1: one hit per 6 s");
    s.set_time(1260);
    assert_eq!(
        admitted(&s, "fw", 15).await,
        10,
        "a fixed window admits 2x its limit across the edge"
    );
    for key in ["sw", "sl", "tb", "lb", "lb1"] {
        assert_eq!(admitted(&s, key, 15).await, 0, "{key} has no edge burst");
    }
    let r = s.rl("a", &[&[("sl", "x")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, lim(10, "MINUTE"), 0));
    assert_eq!(dur(&r, 0), Some(30), "the 4 hits of 1230 leave at 1290");
    // 6 s free room for one more hit of 10/minute in a bucket; the answer says when it fits.
    s.set_time(1264);
    for bucket in ["tb", "lb"] {
        let r = s.rl("a", &[&[(bucket, "x")]]).await;
        assert_eq!(
            st(&r, 0),
            (Code::OverLimit, lim(10, "MINUTE"), 0),
            "{bucket}"
        );
        assert_eq!(dur(&r, 0), Some(1), "{bucket}");
    }
    // The sliding window still weighs the previous 10 by 56/60 (9.33): no room yet; the answer
    // says when one more fits (just after 1266, see below), not when the window ends.
    let r = s.rl("a", &[&[("sw", "x")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, lim(10, "MINUTE"), 0));
    assert_eq!(dur(&r, 0), Some(3));
    s.set_time(1265);
    for bucket in ["tb", "lb", "lb1"] {
        let r = s.rl("a", &[&[(bucket, "x")]]).await;
        assert_eq!(st(&r, 0), (Code::Ok, lim(10, "MINUTE"), 0), "{bucket}");
        assert_eq!(dur(&r, 0), Some(6), "{bucket}: time until one more hit");
    }
    // At 1267 the previous window weighs 53/60 (8.83): one more fits, a second does not. (At
    // 1266, 9 + 1 would be exactly 10, but the weight is rounded up, never undercounting.)
    s.set_time(1266);
    assert_eq!(admitted(&s, "sw", 1).await, 0);
    s.set_time(1267);
    assert_eq!(admitted(&s, "sw", 3).await, 1);
    // A hit exactly one window old is out: the 4 of 1230 leave at 1290, the 6 of 1259 at 1319.
    s.set_time(1289);
    assert_eq!(admitted(&s, "sl", 3).await, 0);
    s.set_time(1290);
    assert_eq!(admitted(&s, "sl", 15).await, 4);
    let r = s.rl("a", &[&[("sl", "x")]]).await;
    assert_eq!(dur(&r, 0), Some(29));
    // Over a whole minute from the first burst the buckets admitted burst + refill, not 2x.
    s.set_time(1259 + 60);
    assert_eq!(
        admitted(&s, "sl", 15).await,
        6,
        "every minute holds exactly 10"
    );
    for bucket in ["tb", "lb"] {
        assert_eq!(
            admitted(&s, bucket, 15).await,
            9,
            "{bucket}: 9 hits' room freed since 1265"
        );
    }
    assert_eq!(admitted(&s, "lb1", 15).await, 1);
}

/// One request on `key` with a descriptor `hits_addend` (where 0 is a check; the request-level
/// field cannot say 0) and an optional override of `rpu` per minute.
async fn hit(s: &TestServer, key: &str, hits: u64, rpu: Option<u32>) -> (Code, u32) {
    let mut req = request("a", &[&[(key, "x")]]);
    req.descriptors[0].hits_addend = Some(hits);
    req.descriptors[0].limit = rpu.map(|requests_per_unit| RateLimitOverride {
        requests_per_unit,
        unit: 2, // MINUTE
    });
    let r = s.call(req).await.expect("ShouldRateLimit succeeds");
    let (code, _, remaining) = st(&r, 0);
    (code, remaining)
}

on_every_store!(hits_addend_and_overrides_with_every_algorithm);
async fn hits_addend_and_overrides_with_every_algorithm(store: StoreKind) {
    let s = TestServer::start_with_store(&[("a.yaml", &cfg())], &[], store).await;
    // Half a minute into a window, so no algorithm sees an edge.
    s.set_time(1230);
    for key in ALGORITHM_KEYS {
        // 0 only checks; 7 at once; 4 more do not fit (3 left).
        assert_eq!(hit(&s, key, 0, None).await, (Code::Ok, 10), "{key}");
        assert_eq!(hit(&s, key, 7, None).await, (Code::Ok, 3), "{key}");
        assert_eq!(hit(&s, key, 4, None).await, (Code::OverLimit, 0), "{key}");
        // Fixed windows count the denied hits too (as Go): 11 of 10, so even a check is over.
        // The other algorithms did not count them: a check finds 3 left.
        let check = if key == "fw" {
            (Code::OverLimit, 0)
        } else {
            (Code::Ok, 3)
        };
        assert_eq!(hit(&s, key, 0, None).await, check, "{key}");
        // A request above any limit is never admitted.
        assert_eq!(
            hit(&s, key, 30, Some(20)).await,
            (Code::OverLimit, 0),
            "{key}"
        );
    }
    // An override of 20 per minute keeps each algorithm and its state: 7 used, 5 more leave 8 of
    // 20 (the leaky bucket's backlog is time: 7 × 6 s = 42 s, plus 5 × 3 s, leaves room for 1
    // of 3 s in its 60 s queue). A fixed window stand-in would have started afresh (15 left).
    for (key, left) in [("sw", 8), ("sl", 8), ("tb", 8), ("lb", 1)] {
        assert_eq!(hit(&s, key, 5, Some(20)).await, (Code::Ok, left), "{key}");
    }
    assert_eq!(
        hit(&s, "fw", 5, Some(20)).await,
        (Code::OverLimit, 0),
        "46 of 20"
    );
}

on_every_store!(unit_multiplier_windows);
async fn unit_multiplier_windows(store: StoreKind) {
    let s = TestServer::start_with_store(&[("a.yaml", &cfg())], &[], store).await;
    // 2 per 5 s with a burst of 4: 4 at once, then one token every 2.5 s.
    assert_eq!(admitted(&s, "tb5", 6).await, 4);
    s.advance(Duration::from_millis(2500));
    let r = s.rl("a", &[&[("tb5", "x")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(2, "SECOND"), 0));
    assert_eq!(dur(&r, 0), Some(3), "2.5 s rounded up to whole seconds");
    // 3 per 5 minutes: the window is epoch-aligned on 300 s and the unit stays MINUTE.
    s.set_time(1499);
    assert_eq!(admitted(&s, "fw5", 4).await, 3);
    let r = s.rl("a", &[&[("fw5", "x")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, lim(3, "MINUTE"), 0));
    assert_eq!(dur(&r, 0), Some(1));
    s.set_time(1500);
    let r = s.rl("a", &[&[("fw5", "x")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(3, "MINUTE"), 2));
    assert_eq!(dur(&r, 0), Some(300));
}
