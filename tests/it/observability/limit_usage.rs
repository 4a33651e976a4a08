//! The per-limit usage gauges through a real scrape: traffic of several clients on the manual
//! clock, then the interval closed by moving the clock, shows each limit's active keys, those
//! near (80 %) and over its limit and the highest share used — one series per limit, no client in
//! any label.

use std::time::Duration;

use crate::support::*;
use ratelimitd_core::clock::Stopwatch;

const CFG: &str = "domain: u
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 10}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 5}
";

const PROM: [(&str, &str); 2] = [
    ("USE_PROMETHEUS", "true"),
    ("PROMETHEUS_ADDR", "127.0.0.1:0"),
];

fn series(name: &str, limit: &str) -> String {
    format!("{name}{{domain=\"u\",limit=\"{limit}\"}}")
}

#[tokio::test]
async fn usage_gauges_count_keys_per_limit_by_how_full_they_are() {
    let s = TestServer::start(&[("u.yaml", CFG)], &PROM).await;
    for (client, hits) in [("client-a", 9), ("client-b", 12), ("client-c", 2)] {
        for _ in 0..hits {
            s.rl("u", &[&[("user", client)]]).await;
        }
    }
    s.rl("u", &[&[("ip", "192.0.2.7")]]).await;
    // The interval (10 s of the service clock) closes once the clock has passed its end.
    s.advance(Duration::from_secs(10));
    let active = series("ratelimitd_limit_active_keys", "per_user");
    let watch = Stopwatch::start();
    let scrape = loop {
        let scrape = s.scrape().await;
        if scrape.count(&active).is_some() || watch.elapsed() > Duration::from_secs(10) {
            break scrape;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(scrape.value(&active), 3, "{}", &*scrape);
    assert_eq!(
        scrape.value(&series("ratelimitd_limit_keys_near_limit", "per_user")),
        2
    );
    assert_eq!(
        scrape.value(&series("ratelimitd_limit_keys_over_limit", "per_user")),
        1
    );
    // client-b's fixed window counted its two denied hits too: 12 of 10.
    let max = scrape.get(&series("ratelimitd_limit_max_usage_ratio", "per_user"));
    assert_eq!(max, Some(1.2), "{}", &*scrape);
    // An unnamed limit is labelled by its configuration path.
    assert_eq!(
        scrape.value(&series("ratelimitd_limit_active_keys", "u.ip")),
        1
    );
    assert_eq!(
        scrape.value(&series("ratelimitd_limit_keys_near_limit", "u.ip")),
        0
    );
    assert_eq!(
        scrape.get(&series("ratelimitd_limit_max_usage_ratio", "u.ip")),
        Some(0.2)
    );
    for client in ["client-a", "client-b", "client-c", "192.0.2.7"] {
        assert!(!scrape.contains(client), "{client} in the scrape");
    }
    let per_limit = scrape
        .lines()
        .filter(|l| l.starts_with("ratelimitd_limit_active_keys{"))
        .count();
    assert_eq!(per_limit, 2, "one series per limit");
}
