//! The algorithm extensions through the real gRPC server, on both stores, with the manual clock:
//! the fixed window's boundary burst (up to 2× the limit across a window edge) next to a token
//! bucket that never exceeds `burst + refill` and a sliding log that never exceeds the limit in
//! any window-length interval, `unit_multiplier` windows, and what the response reports
//! (`current_limit.unit` stays the config unit; remaining and reset are the algorithm's).

mod common;

use std::time::Duration;

use common::redis::RedisServer;
use common::*;

const CFG: &str = "domain: a
descriptors:
  - {key: fw, rate_limit: {unit: minute, requests_per_unit: 10}}
  - {key: tb, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: token_bucket}}
  - {key: sl, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_log}}
  - {key: tb5, rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 4, unit_multiplier: 5}}
  - {key: fw5, rate_limit: {unit: minute, requests_per_unit: 3, unit_multiplier: 5}}
";

/// Sends `n` single-hit requests on `key` and returns how many were admitted.
async fn admitted(s: &TestServer, key: &str, n: u32) -> u32 {
    let mut ok = 0;
    for _ in 0..n {
        ok += u32::from(overall(&s.rl("a", &[&[(key, "x")]]).await) == Code::Ok);
    }
    ok
}

async fn boundary_burst(redis: Option<&RedisServer>) {
    let s = TestServer::start_on(&[("a.yaml", CFG)], &[], redis).await;
    // The sliding log gets 4 hits half a minute early, so its minute ends at different times.
    s.set_time(1230);
    assert_eq!(admitted(&s, "sl", 4).await, 4);
    // One second before a minute boundary, then at the boundary: 2 seconds apart.
    s.set_time(1259);
    assert_eq!(admitted(&s, "fw", 15).await, 10);
    assert_eq!(admitted(&s, "tb", 15).await, 10);
    assert_eq!(admitted(&s, "sl", 15).await, 6, "4 + 6 in the last minute");
    s.set_time(1260);
    assert_eq!(
        admitted(&s, "fw", 15).await,
        10,
        "a fixed window admits 2x its limit across the edge"
    );
    assert_eq!(
        admitted(&s, "tb", 15).await,
        0,
        "the bucket has not refilled"
    );
    assert_eq!(admitted(&s, "sl", 15).await, 0, "the log has no edge");
    let r = s.rl("a", &[&[("sl", "x")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, lim(10, "MINUTE"), 0));
    assert_eq!(dur(&r, 0), Some(30), "the 4 hits of 1230 leave at 1290");
    // 6 s refill one token of a 10/minute bucket; the answer says when the next one comes.
    s.set_time(1264);
    let r = s.rl("a", &[&[("tb", "x")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, lim(10, "MINUTE"), 0));
    assert_eq!(dur(&r, 0), Some(1));
    s.set_time(1265);
    let r = s.rl("a", &[&[("tb", "x")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(10, "MINUTE"), 0));
    assert_eq!(dur(&r, 0), Some(6), "time until one more token");
    // A hit exactly one window old is out: the 4 of 1230 leave at 1290, the 6 of 1259 at 1319.
    s.set_time(1289);
    assert_eq!(admitted(&s, "sl", 3).await, 0);
    s.set_time(1290);
    assert_eq!(admitted(&s, "sl", 15).await, 4);
    let r = s.rl("a", &[&[("sl", "x")]]).await;
    assert_eq!(dur(&r, 0), Some(29));
    // Over a whole minute from the first burst the bucket admitted burst + refill, not 2x.
    s.set_time(1259 + 60);
    assert_eq!(
        admitted(&s, "sl", 15).await,
        6,
        "every minute holds exactly 10"
    );
    assert_eq!(
        admitted(&s, "tb", 15).await,
        9,
        "9 tokens refilled since 1265"
    );
}

#[tokio::test]
async fn boundary_burst_on_memory() {
    boundary_burst(None).await;
}

#[tokio::test]
async fn boundary_burst_on_redis() {
    let r = RedisServer::start();
    boundary_burst(Some(&r)).await;
}

async fn multiplied_windows(redis: Option<&RedisServer>) {
    let s = TestServer::start_on(&[("a.yaml", CFG)], &[], redis).await;
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

#[tokio::test]
async fn unit_multiplier_windows_on_memory() {
    multiplied_windows(None).await;
}

#[tokio::test]
async fn unit_multiplier_windows_on_redis() {
    let r = RedisServer::start();
    multiplied_windows(Some(&r)).await;
}
