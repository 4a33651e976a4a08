//! Prometheus's own checker on what ratelimitd publishes for Prometheus: `promtool check
//! metrics` on a real scrape of the running service (memory store, then Redis) after gRPC and
//! `/check` traffic has made the metrics exist, and `promtool test rules` on the alert rules of
//! `examples/prometheus/` — whose every metric must be in that real scrape, so a renamed metric
//! cannot leave a rule silently unable to fire.
//!
//! promtool is the Debian package `prometheus` (`tests/run.sh` installs it).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::*;
use serde_json::json;

/// ratelimitd's metrics under their previous names, kept for one release beside the renamed
/// ones (README "Metrics"): the only `ratelimitd_*` names promtool may complain about.
const DEPRECATED: [(&str, &str); 3] = [
    (
        "ratelimitd_violations_dropped",
        "ratelimitd_violations_dropped_total",
    ),
    (
        "ratelimitd_violations_written",
        "ratelimitd_violations_written_total",
    ),
    ("ratelimitd_hot_key_count", "ratelimitd_hot_key_hits"),
];

fn promtool() -> PathBuf {
    crate::support::require::find_on_path("promtool").unwrap_or_else(|| {
        panic!("no promtool: run `bash tests/run.sh` (installs the Debian package prometheus)")
    })
}

/// Runs promtool with `args` in `dir`, feeding it `stdin`: (success, stdout and stderr).
fn run_promtool(dir: &Path, args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = Command::new(promtool())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn prometheus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/prometheus")
}

/// A scrape of a service on `store` after traffic that moves every kind of metric it has:
/// gRPC calls within and over a limit, and `/check` answers 200, 429 and 400.
async fn scrape_after_traffic(store: StoreKind) -> String {
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let config = include_str!("../../../examples/check/api.yaml");
    let s = TestServer::start_with_store(&[("api.yaml", config)], &env, store).await;
    let search = [("client_key", "u1"), ("endpoint", "/api/v1/search")];
    for _ in 0..12 {
        s.rl("api", &[&search]).await;
    }
    let bodies = [
        json!({"client_key": "u2", "endpoint": "/api/v1/search"}),
        json!({"client_key": "u1", "endpoint": "/api/v1/search"}),
        json!({"endpoint": "/api/v1/search"}),
    ];
    for (body, want) in bodies.iter().zip([200, 429, 400]) {
        let r = s.post("/check", body.to_string()).await;
        assert_eq!(r.status(), want, "{body}");
    }
    let text = s.scrape().await;
    s.shutdown().await;
    text.to_string()
}

/// The metric families a scrape declares (`# TYPE` lines).
fn families(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next())
        .map(String::from)
        .collect()
}

/// The problems `promtool check metrics` finds in `scrape`, one `(metric, message)` each.
fn lint(scrape: &str) -> Vec<(String, String)> {
    let (ok, out) = run_promtool(&prometheus_dir(), &["check", "metrics"], scrape);
    let problems: Vec<(String, String)> = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, message) = l.split_once(' ').unwrap_or((l, ""));
            (name.to_string(), message.to_string())
        })
        .collect();
    // promtool fails on lint problems too; a failure without a single metric named is a
    // parse error of the exposition, which is ratelimitd's fault just the same.
    assert!(
        ok || problems.iter().all(|(n, _)| n.starts_with("ratelimit")),
        "promtool could not read the scrape:\n{out}"
    );
    problems
}

#[tokio::test]
async fn every_ratelimitd_metric_passes_promtool_check_metrics() {
    require!(Redis, Promtool);
    for store in [StoreKind::Memory, StoreKind::Redis] {
        let scrape = scrape_after_traffic(store).await;
        let have = families(&scrape);
        // The families that used to fail, and those only one store has, are all being checked.
        let mut want = vec![
            "ratelimitd_check_requests_total",
            "ratelimitd_check_response_time_seconds",
            "ratelimitd_decisions_total",
            "ratelimitd_violations_dropped_total",
            "ratelimitd_hot_key_hits",
        ];
        want.extend(match store {
            StoreKind::Memory => [
                "ratelimitd_memory_store_keys",
                "ratelimitd_memory_store_bytes",
            ],
            _ => [
                "ratelimitd_redis_breaker_state",
                "ratelimitd_lease_taken_total",
            ],
        });
        for family in want {
            assert!(have.contains(family), "{store:?}: no {family} in\n{scrape}");
        }
        let mut bad = Vec::new();
        for (name, message) in lint(&scrape) {
            // The Go service's names are kept exactly, conventions or not.
            let go = name.starts_with("ratelimit_service_");
            let deprecated = DEPRECATED.iter().any(|(old, _)| *old == name);
            if !go && !deprecated {
                bad.push(format!("{name} {message}"));
            }
        }
        assert!(
            bad.is_empty(),
            "{store:?}: promtool check metrics:\n{}",
            bad.join("\n")
        );
    }
}

#[tokio::test]
async fn the_deprecated_names_carry_the_same_samples_as_the_new_ones() {
    let scrape = scrape_after_traffic(StoreKind::Memory).await;
    for (old, new) in DEPRECATED {
        let samples = |name: &str| -> Vec<String> {
            scrape
                .lines()
                .filter_map(|l| l.strip_prefix(name))
                .filter(|rest| rest.starts_with(['{', ' ']))
                .map(String::from)
                .collect()
        };
        let (was, is) = (samples(old), samples(new));
        assert!(!is.is_empty(), "no {new} samples in\n{scrape}");
        assert_eq!(was, is, "{old} and {new} differ");
    }
}

#[test]
fn the_alert_rules_pass_promtool_check_and_their_unit_tests() {
    require!(Promtool);
    let dir = prometheus_dir();
    let (ok, out) = run_promtool(&dir, &["check", "rules", "alerts.yaml"], "");
    assert!(ok, "promtool check rules:\n{out}");
    let (ok, out) = run_promtool(&dir, &["test", "rules", "alerts.test.yaml"], "");
    assert!(ok, "promtool test rules:\n{out}");
}

/// Every metric name the alert rules' expressions use, without histogram suffixes.
fn alert_metrics() -> BTreeSet<String> {
    let text = std::fs::read_to_string(prometheus_dir().join("alerts.yaml")).unwrap();
    let rules: serde_yaml::Value = serde_yaml::from_str(&text).expect("alerts.yaml is YAML");
    let mut names = BTreeSet::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let expr = rule["expr"].as_str().expect("expr");
            let words = expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            for w in words.filter(|w| w.starts_with("ratelimit")) {
                names.insert(w.strip_suffix("_bucket").unwrap_or(w).to_string());
            }
        }
    }
    names
}

#[tokio::test]
async fn every_metric_the_alert_rules_use_is_in_a_real_scrape() {
    require!(Redis);
    let wanted = alert_metrics();
    assert!(wanted.len() >= 7, "{wanted:?}");
    // The Redis store has every family the rules use (the breaker state is Redis's).
    let have = families(&scrape_after_traffic(StoreKind::Redis).await);
    let missing: Vec<_> = wanted.difference(&have).collect();
    assert!(
        missing.is_empty(),
        "the alert rules use {missing:?}, not exposed"
    );
}
