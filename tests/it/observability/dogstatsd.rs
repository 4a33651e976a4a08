//! `USE_DOG_STATSD=true`: the StatsD sink in gostats' Datadog flavour, received on a UDP
//! listener on 127.0.0.1: Go's stat names, with `EXTRA_TAGS` as DogStatsD tags after the type.
//! The only flush is the one at shutdown (`crate::support::statsd`): no waiting on time.

use crate::support::statsd::flushed_lines;

#[tokio::test]
async fn counters_arrive_with_dogstatsd_tags() {
    let env = [
        ("USE_DOG_STATSD", "true"),
        ("USE_STATSD", "false"),
        ("EXTRA_TAGS", "foo:bar,a:b"),
    ];
    let lines = flushed_lines(&env, async |s| {
        for _ in 0..3 {
            s.rl("another", &[&[("key2", "R")]]).await;
        }
    })
    .await;
    let tags = "|#a:b,foo:bar";
    for expected in [
        format!("ratelimit.service.rate_limit.another.key2.total_hits:3|c{tags}"),
        format!("ratelimit_server.ShouldRateLimit.total_requests:3|c{tags}"),
    ] {
        assert!(
            lines.contains(&expected),
            "missing {expected} in {lines:#?}"
        );
    }
    let timing = lines
        .iter()
        .find(|l| l.starts_with("ratelimit_server.ShouldRateLimit.response_time:"));
    assert!(
        timing.is_some_and(|l| l.ends_with(&format!("|ms{tags}"))),
        "response time with tags: {lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains(".__")),
        "no gostats name tags: {lines:#?}"
    );
}
