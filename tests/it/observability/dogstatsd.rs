//! `USE_DOG_STATSD=true`: the StatsD sink in Go's DogStatsD flavour, received on a UDP listener
//! on 127.0.0.1: Go's stat names, with `EXTRA_TAGS` as DogStatsD tags after the type, over UDP
//! whatever the StatsD default, and names rewritten by Go's mogrifiers. The only flush is the one
//! at shutdown (`crate::support::statsd`): no waiting on time.

use crate::support::statsd::{flushed_lines, udp_lines};

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

#[tokio::test]
async fn dogstatsd_is_sent_over_udp_without_statsd_protocol() {
    // No STATSD_PROTOCOL: StatsD's default is TCP, DogStatsD's (Go's datadog-go) is UDP.
    let env = [("USE_DOG_STATSD", "true"), ("USE_STATSD", "false")];
    let lines = udp_lines(&env, async |s| {
        s.rl("another", &[&[("key2", "R")]]).await;
    })
    .await;
    let expected = "ratelimit.service.rate_limit.another.key2.total_hits:1|c";
    assert!(
        lines.iter().any(|l| l == expected),
        "missing {expected} on the UDP listener: {lines:#?}"
    );
}

/// Mogrifiers after the example of Go's README: the per-limit stats become one name per stat with the domain and the
/// descriptor as tags, the gRPC stats one name with the method as a tag; names neither pattern
/// finds go out unchanged. The mogrifiers' tags follow `EXTRA_TAGS`.
#[tokio::test]
async fn mogrifiers_rewrite_names_into_tags() {
    let env = [
        ("USE_DOG_STATSD", "true"),
        ("USE_STATSD", "false"),
        ("EXTRA_TAGS", "a:b"),
        ("USE_DOG_STATSD_MOGRIFIERS", "quota,server"),
        (
            "DOG_STATSD_MOGRIFIER_QUOTA_PATTERN",
            r"ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$",
        ),
        (
            "DOG_STATSD_MOGRIFIER_QUOTA_NAME",
            "ratelimit.service.rate_limit.$3",
        ),
        ("DOG_STATSD_MOGRIFIER_QUOTA_TAGS", "domain:$1,descriptor:$2"),
        (
            "DOG_STATSD_MOGRIFIER_SERVER_PATTERN",
            r"^ratelimit_server\.(\w+)\.(\w+)$",
        ),
        ("DOG_STATSD_MOGRIFIER_SERVER_NAME", "ratelimit_server.$2"),
        ("DOG_STATSD_MOGRIFIER_SERVER_TAGS", "method:$1"),
    ];
    let lines = udp_lines(&env, async |s| {
        for _ in 0..3 {
            s.rl("another", &[&[("key2", "R")]]).await;
        }
    })
    .await;
    for expected in [
        "ratelimit.service.rate_limit.total_hits:3|c|#a:b,domain:another,descriptor:key2",
        "ratelimit.service.rate_limit.within_limit:3|c|#a:b,domain:another,descriptor:key2",
        "ratelimit_server.total_requests:3|c|#a:b,method:ShouldRateLimit",
        "ratelimit.service.config_load_success:1|c|#a:b",
    ] {
        assert!(
            lines.iter().any(|l| l == expected),
            "missing {expected} in {lines:#?}"
        );
    }
    let timers = lines
        .iter()
        .filter(|l| l.starts_with("ratelimit_server.response_time:"))
        .filter(|l| l.ends_with("|ms|#a:b,method:ShouldRateLimit"))
        .count();
    assert_eq!(timers, 3, "{lines:#?}");
    assert!(
        !lines.iter().any(|l| l.contains("another.key2")),
        "no per-limit name is left unrewritten: {lines:#?}"
    );
}
