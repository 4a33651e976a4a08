//! A StatsD receiver for the sink tests: a UDP listener on 127.0.0.1 and a service pointed at it
//! with a flush interval of an hour, so the only flush is the one at shutdown (no waiting on time).

use std::time::Duration;

use tokio::net::UdpSocket;

use super::{CFG_INT_ANOTHER, TestServer};

/// Starts a service on `CFG_INT_ANOTHER` with `env` on top of a UDP StatsD sink pointed at a
/// local listener, runs `requests` on it, shuts it down, and returns every line received.
pub(crate) async fn flushed_lines(
    env: &[(&str, &str)],
    requests: impl AsyncFnOnce(&TestServer),
) -> Vec<String> {
    let mut all = vec![("STATSD_PROTOCOL", "udp")];
    all.extend_from_slice(env);
    udp_lines(&all, requests).await
}

/// As [`flushed_lines`], but `STATSD_PROTOCOL` is left to `env`: the lines that reach a UDP
/// listener at `STATSD_HOST:STATSD_PORT`.
pub(crate) async fn udp_lines(
    env: &[(&str, &str)],
    requests: impl AsyncFnOnce(&TestServer),
) -> Vec<String> {
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = udp.local_addr().unwrap().port().to_string();
    let mut all = vec![
        ("STATSD_HOST", "127.0.0.1"),
        ("STATSD_PORT", port.as_str()),
        ("STATS_FLUSH_INTERVAL", "1h"),
    ];
    all.extend_from_slice(env);
    let s = TestServer::start(&[("another.yaml", CFG_INT_ANOTHER)], &all).await;
    requests(&s).await;
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
    lines
}
