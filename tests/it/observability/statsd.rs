//! The StatsD sink: a UDP listener on 127.0.0.1 receives the Go wire format with `EXTRA_TAGS`
//! (`support::statsd`: the only flush is the one at shutdown, no waiting on time).

use crate::support::statsd::flushed_lines;
use crate::support::*;

#[tokio::test]
async fn counters_arrive_as_go_lines_with_sorted_tags() {
    let env = [("USE_STATSD", "true"), ("EXTRA_TAGS", "foo:bar,a:b")];
    let lines = flushed_lines(&env, async |s| {
        for _ in 0..25 {
            s.rl("another", &[&[("key2", "R")]]).await;
        }
        s.rl("nope", &[&[("a", "b")]]).await;
    })
    .await;
    let tags = ".__a=b.__foo=bar";
    for expected in [
        format!("ratelimit.service.rate_limit.another.key2.total_hits{tags}:25|c"),
        format!("ratelimit.service.rate_limit.another.key2.over_limit{tags}:5|c"),
        format!("ratelimit.service.rate_limit.another.key2.near_limit{tags}:4|c"),
        format!("ratelimit.service.rate_limit.another.key2.within_limit{tags}:20|c"),
        format!("ratelimit.service.rate_limit.nope.domain_not_found{tags}:1|c"),
        format!("ratelimit.service.config_load_success{tags}:1|c"),
        format!("ratelimit_server.ShouldRateLimit.total_requests{tags}:26|c"),
    ] {
        assert!(
            lines.contains(&expected),
            "missing {expected} in {lines:#?}"
        );
    }
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("shadow_mode") || l.contains(":0|c")),
        "zero deltas are skipped: {lines:#?}"
    );
    let timers = lines
        .iter()
        .filter(|l| {
            l.starts_with(&format!(
                "ratelimit_server.ShouldRateLimit.response_time{tags}:"
            )) && l.ends_with("|ms")
        })
        .count();
    assert_eq!(timers, 26);
}

#[tokio::test]
async fn an_unreachable_statsd_never_affects_requests() {
    // Nothing listens on this TCP port (bound then dropped); the flush fails quietly.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let s = TestServer::start(
        &[("another.yaml", CFG_INT_ANOTHER)],
        &[
            ("USE_STATSD", "true"),
            ("STATSD_HOST", "127.0.0.1"),
            ("STATSD_PORT", port.as_str()),
            ("STATS_FLUSH_INTERVAL", "10ms"),
        ],
    )
    .await;
    for i in 0..5 {
        let r = s.rl("another", &[&[("key2", "R")]]).await;
        assert_eq!(st(&r, 0), (Code::Ok, lim(20, "MINUTE"), 19 - i));
    }
    s.shutdown().await;
}

#[tokio::test]
async fn reported_usage_arrives_as_a_counter_per_limit() {
    let lines = flushed_lines(&[("USE_STATSD", "true")], async |s| {
        for cost in [7, 30] {
            let body = serde_json::json!({
                "domain": "another", "client_key": "c", "cost": cost, "report": true,
                "descriptors": [{"entries": [{"key": "key2", "value": "R"}]}],
            });
            assert_eq!(s.check(&body).await.status, 200);
        }
    })
    .await;
    let want = "ratelimitd.another.key2.usage_reported:37|c";
    assert!(
        lines.iter().any(|l| l == want),
        "missing {want} in {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l == "ratelimit.service.rate_limit.another.key2.total_hits:37|c"),
        "{lines:#?}"
    );
}
