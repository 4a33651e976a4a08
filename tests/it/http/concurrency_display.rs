//! How a concurrency limit is shown to an operator: `/rlconfig` and the console's limits table
//! give its slots and lease timeout, not a rate of "N per unit" it does not have, while the
//! limits beside it keep their lines.

use crate::support::*;

const CFG: &str = "domain: d
descriptors:
  - key: pool
    rate_limit: {unit: minute, unit_multiplier: 2, requests_per_unit: 10, algorithm: concurrency}
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 5}
";

async fn text(s: &TestServer, url: String) -> String {
    s.http.get(url).send().await.unwrap().text().await.unwrap()
}

#[tokio::test]
async fn rlconfig_and_console_show_slots_and_lease_timeout() {
    let env = [("ADMIN_TRUST_LOOPBACK", "true")];
    let s = TestServer::start(&[("d.yaml", CFG)], &env).await;
    let rlconfig = text(&s, s.debug_url("/rlconfig")).await;
    let mut limits: Vec<&str> = rlconfig.lines().filter(|l| !l.starts_with('#')).collect();
    limits.sort_unstable();
    assert_eq!(
        limits,
        [
            "d.plain: unit=SECOND requests_per_unit=5, shadow_mode: false, quota_mode: false",
            "d.pool: algorithm=concurrency slots=10 lease_timeout=120s, shadow_mode: false, quota_mode: false",
        ]
    );
    let console = text(&s, s.admin_url("/")).await;
    assert!(
        console.contains("<td>10 slots, lease timeout 120 s</td>"),
        "{console}"
    );
    assert!(console.contains("<td>5 per SECOND</td>"), "{console}");
    assert!(!console.contains("10 per 2 MINUTE"), "{console}");
}
