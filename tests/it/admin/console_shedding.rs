//! The usage of a limit with priority classes against each class's threshold, on the status page
//! of the real admin listener and in the `ratelimitd_shed_usage_ratio` gauge of the real
//! Prometheus endpoint: the value the store counted at this instance's latest decision, refused
//! requests not counted, gone once that decision's window ended (manual clock).

use crate::grpc::shedding::SHOP;
use crate::support::*;

const GAUGE: &str = "ratelimitd_shed_usage_ratio{key=\"shop.service_api\"}";

async fn hit(s: &TestServer, class: &str) -> Code {
    overall(
        &s.rl("shop", &[&[("service", "api"), ("priority", class)]])
            .await,
    )
}

/// The page's row of the shop's limit (its `<tr>` line).
async fn row(s: &TestServer) -> String {
    let page = s.http.get(s.admin_url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let text = page.text().await.unwrap();
    let section = text
        .split("<h2 id=\"shedding\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no shedding section:\n{text}"));
    let section = section.split("<h2").next().unwrap_or_default();
    section
        .lines()
        .find(|l| l.contains("shop.service_api"))
        .unwrap_or(section)
        .to_string()
}

#[tokio::test]
async fn the_status_page_shows_usage_against_each_class_threshold() {
    let env = [
        ("ADMIN_TRUST_LOOPBACK", "true"),
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("shop.yaml", SHOP)], &env).await;
    // The first second of the next minute window (T0 = 1234).
    s.set_time(1260);
    assert!(
        row(&s)
            .await
            .contains("no decision on a limit with priorities yet")
    );
    for _ in 0..8 {
        assert_eq!(hit(&s, "critical").await, Code::Ok);
    }
    // Refused test hits count nothing: the usage stays at 8 of 10.
    assert_eq!(hit(&s, "test").await, Code::OverLimit);
    let r = row(&s).await;
    assert!(r.contains("usage 80% of 10"), "{r}");
    assert!(
        r.contains("test (70%) and read (80%) shed; write (90%) and critical (100%) admitted"),
        "{r}"
    );
    assert_eq!(s.scrape().await.get(GAUGE), Some(0.8));
    assert_eq!(hit(&s, "write").await, Code::Ok);
    let r = row(&s).await;
    assert!(r.contains("usage 90% of 10"), "{r}");
    assert!(
        r.contains("test (70%), read (80%) and write (90%) shed; critical (100%) admitted"),
        "{r}"
    );
    // The window of that decision ends at 1320: the page says so and the gauge has no series.
    s.set_time(1320);
    let r = row(&s).await;
    assert!(
        r.contains("no decision in the current window (the last one: 90% of 10)"),
        "{r}"
    );
    assert_eq!(s.scrape().await.get(GAUGE), None);
    s.shutdown().await;
}
