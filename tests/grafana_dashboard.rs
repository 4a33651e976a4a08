//! The Grafana dashboard in `examples/grafana/` against what ratelimitd exposes: every metric a
//! panel queries is one ratelimitd declares (a renamed metric would leave a panel silently empty),
//! and the request panels' series appear on a real scrape after gRPC traffic.

mod common;

use std::collections::BTreeSet;

use common::*;

const DASHBOARD: &str = include_str!("../examples/grafana/ratelimitd.json");

/// Every metric name the dashboard's queries use, without histogram suffixes.
fn queried_metrics() -> BTreeSet<String> {
    let dash: serde_json::Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8, "one panel per issue-17 question");
    let mut names = BTreeSet::new();
    for p in panels {
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("expr");
            let words = expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            for w in words.filter(|w| w.starts_with("ratelimit")) {
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| w.strip_suffix(s))
                    .unwrap_or(w);
                names.insert(base.to_string());
            }
        }
    }
    names
}

/// Every quoted string in the metrics sources: the names ratelimitd declares.
fn declared_names() -> String {
    let mut all = String::new();
    for dir in ["src/metrics", "src/rlqs"] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "rs") {
                all.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    all
}

#[test]
fn every_metric_the_dashboard_queries_is_declared_by_ratelimitd() {
    let names = queried_metrics();
    assert!(names.contains("ratelimitd_decisions_total"), "{names:?}");
    assert!(names.contains("ratelimitd_violations_dropped"), "{names:?}");
    let declared = declared_names();
    for n in &names {
        assert!(
            declared.contains(&format!("\"{n}\"")),
            "the dashboard queries {n}, which ratelimitd does not expose"
        );
    }
}

#[tokio::test]
async fn the_request_panels_have_series_after_traffic() {
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("another.yaml", CFG_INT_ANOTHER)], &env).await;
    for _ in 0..25 {
        s.rl("another", &[&[("key2", "R")]]).await;
    }
    let addr = s.running().metrics_addr.expect("Prometheus listens");
    let url = format!("http://{addr}/metrics");
    let text = s.http.get(url).send().await.unwrap().text().await.unwrap();
    for n in [
        "ratelimitd_decisions_total{code=\"over_limit\",source=\"store\"}",
        "ratelimitd_decisions_total{code=\"ok\",source=\"store\"}",
        "ratelimit_service_rate_limit_over_limit{",
        "ratelimit_service_rate_limit_near_limit{",
        "ratelimitd_store_latency_seconds_bucket{",
        "ratelimit_service_response_time_seconds_bucket{",
    ] {
        assert!(text.contains(n), "no {n} series after traffic:\n{text}");
    }
}
