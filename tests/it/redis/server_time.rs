//! `REDIS_USE_SERVER_TIME`: two instances whose clocks are days apart (manual clocks) share one
//! Redis. On their own clocks they count in different daily windows; on Redis's clock they count
//! in the same one, so the limit holds across the fleet.

use crate::support::redis::RedisServer;
use crate::support::*;

const CFG: &str = "domain: a
descriptors:
  - {key: k, rate_limit: {unit: day, requests_per_unit: 3}}
";

/// Sends `n` requests to `s` and returns how many were admitted.
async fn admitted(s: &TestServer, n: u32) -> u32 {
    let mut ok = 0;
    for _ in 0..n {
        ok += u32::from(overall(&s.rl("a", &[&[("k", "v")]]).await) == Code::Ok);
    }
    ok
}

/// Starts two instances on `r`, three days apart, and returns (admitted on A, then on B).
async fn skewed_pair(r: &RedisServer, server_time: &str) -> (u32, u32) {
    let later = (T0 + 3 * 86_400).to_string();
    let a = TestServer::start_on(
        &[("a.yaml", CFG)],
        &[("REDIS_USE_SERVER_TIME", server_time)],
        Some(r),
    )
    .await;
    let b = TestServer::start_on(
        &[("a.yaml", CFG)],
        &[
            ("REDIS_USE_SERVER_TIME", server_time),
            ("RATELIMITD_TEST_MANUAL_CLOCK", &later),
        ],
        Some(r),
    )
    .await;
    (admitted(&a, 2).await, admitted(&b, 3).await)
}

#[tokio::test]
async fn skewed_instances_share_windows_on_the_redis_clock() {
    require!(Redis);
    let r = RedisServer::start();
    assert_eq!(
        skewed_pair(&r, "false").await,
        (2, 3),
        "on their own clocks the instances count in different days"
    );
    let r = RedisServer::start();
    assert_eq!(
        skewed_pair(&r, "true").await,
        (2, 1),
        "on the Redis clock both count in today's window"
    );
}
