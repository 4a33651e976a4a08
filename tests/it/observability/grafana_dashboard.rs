//! The Grafana dashboard in `examples/grafana/` against what ratelimitd exposes: every metric a
//! panel queries is one ratelimitd declares (a renamed metric would leave a panel silently empty),
//! the request panels' series appear on a real scrape after gRPC traffic, and the dashboard links
//! to the alert rules of `examples/prometheus/alerts.yaml` (each rule named by a panel).

use std::collections::BTreeSet;

use crate::support::*;

const DASHBOARD: &str = include_str!("../../../examples/grafana/ratelimitd.json");

/// Every metric name the dashboard's queries use, without histogram suffixes.
fn queried_metrics() -> BTreeSet<String> {
    let dash: serde_json::Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8, "one panel per insight question");
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

/// Every quoted string in the metrics sources: the names ratelimitd declares (the stats' own in
/// `src/metrics`, each feature's in its folder).
fn declared_names() -> String {
    let mut all = String::new();
    let dirs = [
        "src/metrics",
        "src/rlqs",
        "src/http/check",
        "src/policy/violations",
        "src/insight",
        "src/region",
        "src/fleet",
        "src/store",
    ];
    for dir in dirs {
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
    assert!(
        names.contains("ratelimitd_violations_dropped_total"),
        "{names:?}"
    );
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
    let text = s.scrape().await;
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

const ALERTS: &str = include_str!("../../../examples/prometheus/alerts.yaml");

/// The `alert:` names of the alert rules file.
fn alert_names() -> BTreeSet<String> {
    let rules: serde_yaml::Value = serde_yaml::from_str(ALERTS).expect("alerts.yaml is YAML");
    let mut names = BTreeSet::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            names.insert(rule["alert"].as_str().expect("alert name").to_string());
        }
    }
    names
}

#[test]
fn the_dashboard_links_to_the_alert_rules_and_each_rule_has_a_panel() {
    let dash: serde_json::Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let alerts = alert_names();
    assert_eq!(alerts.len(), 11, "{alerts:?}");
    // The dashboard link opens Grafana's alert list searched for the prefix every rule shares.
    let links = dash["links"].as_array().expect("dashboard links");
    let url = links
        .iter()
        .filter_map(|l| l["url"].as_str())
        .find(|u| u.starts_with("/alerting/list"))
        .expect("a link to the alert list");
    let prefix = url.rsplit_once("search=").expect("a search").1;
    assert!(alerts.iter().all(|a| a.starts_with(prefix)), "{prefix}");
    // Every rule is named in the description of a panel showing its metric, and every rule
    // name a panel gives exists.
    let mut named = BTreeSet::new();
    for p in dash["panels"].as_array().expect("panels") {
        let text = p["description"].as_str().unwrap_or_default();
        let words = text.split(|c: char| !c.is_ascii_alphanumeric());
        named.extend(words.filter(|w| w.starts_with(prefix)).map(String::from));
    }
    assert_eq!(named, alerts);
}
