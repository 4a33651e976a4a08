//! What an operator reads about the limits and the counters: `/rlconfig` gives a limit with
//! priority classes, a soft zone or another algorithm than Go's fixed window what sets it apart
//! (after Go's fields), and the console, without a stats sink, says the counters are off and why
//! instead of blaming `DISABLE_STATS` alone.

use crate::support::TestServer;

const CFG: &str = "domain: d
descriptors:
  - key: service
    rate_limit:
      unit: second
      requests_per_unit: 1000
      priorities: {critical: 1.0, write: 0.9, read: 0.8}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 100, soft: {up_to: 1.2, breach_ratio: 0.8}}
  - key: log
    rate_limit: {unit: minute, requests_per_unit: 7, algorithm: sliding_log}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket, burst: 20}
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 5}
";

async fn text(s: &TestServer, url: String) -> String {
    s.http.get(url).send().await.unwrap().text().await.unwrap()
}

#[tokio::test]
async fn rlconfig_shows_classes_soft_zones_and_algorithms_after_gos_fields() {
    let s = TestServer::start(&[("d.yaml", CFG)], &[]).await;
    let rlconfig = text(&s, s.debug_url("/rlconfig")).await;
    let mut limits: Vec<&str> = rlconfig.lines().filter(|l| !l.starts_with('#')).collect();
    limits.sort_unstable();
    let go = ", shadow_mode: false, quota_mode: false";
    assert_eq!(
        limits,
        [
            format!(
                "d.bucket: unit=SECOND requests_per_unit=5{go}, algorithm: token_bucket burst=20"
            ),
            format!("d.log: unit=MINUTE requests_per_unit=7{go}, algorithm: sliding_log"),
            format!("d.plain: unit=SECOND requests_per_unit=5{go}"),
            format!(
                "d.service: unit=SECOND requests_per_unit=1000{go}, priorities: critical=1 \
                 write=0.9 read=0.8 (key priority, default read)"
            ),
            format!(
                "d.user: unit=MINUTE requests_per_unit=100{go}, soft: up_to=1.2 breach_ratio=0.8"
            ),
        ]
    );
    s.shutdown().await;
}

#[tokio::test]
async fn the_console_without_a_stats_sink_names_every_setting_that_turns_the_counters_off() {
    // USE_STATSD=false and no other sink: nothing counts, though DISABLE_STATS is not set.
    let env = [("ADMIN_TRUST_LOOPBACK", "true"), ("USE_STATSD", "false")];
    let s = TestServer::start(&[("d.yaml", CFG)], &env).await;
    let page = text(&s, s.admin_url("/")).await;
    assert!(page.contains("<h1>ratelimitd console</h1>"), "{page}");
    let why = "the counters are off (DISABLE_STATS=true, or USE_STATSD=false with neither \
               USE_PROMETHEUS nor USE_DOG_STATSD)";
    for place in [
        format!("not counted: {why}"),
        format!("no usage is kept: {why}"),
    ] {
        assert!(page.contains(&place), "{place} in {page}");
    }
    assert!(!page.contains("stats are off (DISABLE_STATS)"), "{page}");
    s.shutdown().await;
}
