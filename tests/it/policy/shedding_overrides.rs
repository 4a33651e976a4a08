//! A stored override of a limit with priority classes or a soft zone changes its number and keeps
//! its policy: written over the real admin API, enforced over real gRPC on the manual clock (and
//! a seeded random source for the soft zone), the class thresholds move with the new value.

use crate::support::policy::{TOKEN, create};
use crate::support::{Code, TestServer, overall, st};

/// `valid_until` of the overrides: second 1800, after every instant used here.
const UNTIL: &str = "1970-01-01T00:30:00Z";
/// The first second of a minute window after the test start (`T0` = 1234).
const WINDOW: u64 = 1260;

const CFG: &str = "domain: api
descriptors:
  - key: client_key
    value: acme
    rate_limit:
      unit: minute
      requests_per_unit: 10
      priorities: {critical: 1.0, read: 0.8, test: 0.5}
  - key: client_key
    value: soft
    rate_limit:
      unit: minute
      requests_per_unit: 10
      soft: {up_to: 2.0}
";

async fn start(data: &std::path::Path) -> TestServer {
    let dir = data.display().to_string();
    let env = [
        ("POLICY_ENABLED", "true"),
        ("RATELIMITD_DATA_DIR", dir.as_str()),
        ("ADMIN_TOKEN", TOKEN),
        ("RATELIMITD_TEST_RANDOM_SEED", "27"),
    ];
    TestServer::start(&[("api.yaml", CFG)], &env).await
}

/// How many hits of `client_key=value` as `class` in a row are admitted (at most `most` tries);
/// each answer reports the limit `rpu`.
async fn admitted_in_a_row(s: &TestServer, value: &str, class: &str, rpu: u32) -> usize {
    for n in 0..50 {
        let r = s
            .rl("api", &[&[("client_key", value), ("priority", class)]])
            .await;
        assert_eq!(st(&r, 0).1.expect("a current limit").0, rpu, "{class}");
        if overall(&r) == Code::OverLimit {
            return n;
        }
    }
    50
}

#[tokio::test]
async fn an_override_moves_the_class_thresholds_with_its_value() {
    let data = tempfile::tempdir().unwrap();
    let s = start(data.path()).await;
    s.set_time(WINDOW);
    // The configured 10: test stops at 5, read at 8, critical at 10.
    assert_eq!(admitted_in_a_row(&s, "acme", "test", 10).await, 5);
    assert_eq!(admitted_in_a_row(&s, "acme", "read", 10).await, 3);
    assert_eq!(admitted_in_a_row(&s, "acme", "critical", 10).await, 2);
    // Overridden to 20 (a new counter under the override's key, next window): the shares are of
    // 20 now — test stops at 10, read at 16, critical at 20 — and every class counts on one key.
    create(&s, "acme", 20, UNTIL).await;
    s.set_time(WINDOW + 60);
    assert_eq!(admitted_in_a_row(&s, "acme", "test", 20).await, 10);
    assert_eq!(admitted_in_a_row(&s, "acme", "read", 20).await, 6);
    assert_eq!(admitted_in_a_row(&s, "acme", "test", 20).await, 0);
    assert_eq!(admitted_in_a_row(&s, "acme", "critical", 20).await, 4);
    // Refused hits were not counted: nothing is left for anyone once critical filled it.
    assert_eq!(admitted_in_a_row(&s, "acme", "critical", 20).await, 0);
    s.shutdown().await;
}

#[tokio::test]
async fn an_override_keeps_the_soft_zone_as_a_multiple_of_its_value() {
    let data = tempfile::tempdir().unwrap();
    let s = start(data.path()).await;
    create(&s, "soft", 4, UNTIL).await;
    s.set_time(WINDOW);
    // Up to the overridden 4 every hit is admitted; from 8 (up_to 2.0 × 4) none is; between, the
    // seeded draws admit some: a plain limit of 4 would admit exactly 4.
    let mut admitted = 0;
    for n in 0..40 {
        let r = s.rl("api", &[&[("client_key", "soft")]]).await;
        assert_eq!(st(&r, 0).1.expect("a current limit").0, 4);
        let ok = overall(&r) == Code::Ok;
        if n < 4 {
            assert!(ok, "hit {} of the overridden 4", n + 1);
        }
        admitted += usize::from(ok);
    }
    assert!(
        (5..8).contains(&admitted),
        "{admitted} admitted: the soft zone of 4 up to 8 admits more than 4, fewer than 8"
    );
    s.shutdown().await;
}
