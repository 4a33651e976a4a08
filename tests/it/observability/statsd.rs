//! The StatsD sink: a UDP listener on 127.0.0.1 receives the Go wire format with EXTRA_TAGS.
//! The flush interval is an hour, so the only flush is the one at shutdown: no waiting on time.

use std::time::Duration;

use crate::support::*;
use tokio::net::UdpSocket;

#[tokio::test]
async fn counters_arrive_as_go_lines_with_sorted_tags() {
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = udp.local_addr().unwrap().port().to_string();
    let s = TestServer::start(
        &[("another.yaml", CFG_INT_ANOTHER)],
        &[
            ("USE_STATSD", "true"),
            ("STATSD_HOST", "127.0.0.1"),
            ("STATSD_PORT", port.as_str()),
            ("STATSD_PROTOCOL", "udp"),
            ("EXTRA_TAGS", "foo:bar,a:b"),
            ("STATS_FLUSH_INTERVAL", "1h"),
        ],
    )
    .await;
    for _ in 0..25 {
        s.rl("another", &[&[("key2", "R")]]).await;
    }
    s.rl("nope", &[&[("a", "b")]]).await;
    s.shutdown().await;

    let mut lines = Vec::new();
    let mut buf = vec![0u8; 65536];
    // Bounded: stop at the first quiet second (the flush already happened before shutdown returned).
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(1), udp.recv(&mut buf)).await {
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        lines.extend(text.lines().map(str::to_owned));
        if lines.len() > 1000 {
            break;
        }
    }
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
