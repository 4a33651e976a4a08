//! Prometheus's own checker on what ratelimitd publishes for Prometheus: `promtool check
//! metrics` on a real scrape of the running service (memory store, then Redis) with every
//! feature that adds metrics switched on in the one process — the policy database, the violation
//! log, hot keys, RLQS, regions with their global store, token leases, priority shedding and soft
//! limits, concurrency limits — after gRPC, `/check` and RLQS traffic has made the metrics exist,
//! and `promtool test rules` on the alert rules of `examples/prometheus/` — whose every metric must
//! be in that real scrape, so a renamed metric cannot leave a rule silently unable to fire. (Fleet
//! mode is a store of its own, so it cannot join them; `tests/it/leases/fleet.rs` scrapes it.)
//!
//! promtool is the Debian package `prometheus` (`tests/run.sh` installs it).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::rlqs::{QuotaStream, bucket, usage};
use crate::support::*;
use serde_json::json;

/// ratelimitd's metrics under the names they had before they passed promtool's checks, and
/// their names now (docs/operations.md "Renamed metrics"): the old names are gone.
const RENAMED: [(&str, &str); 3] = [
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

/// A limit of each kind that adds metrics of its own, beside `examples/check/api.yaml`.
const EVERYTHING: &str = "domain: all
descriptors:
  - key: lease
    rate_limit: {unit: hour, requests_per_unit: 1000, lease: 10}
  - key: shared
    rate_limit: {unit: hour, requests_per_unit: 100, regions: {shares: {eu: 0.6, us: 0.4}}}
  - key: service
    value: api
    rate_limit: {unit: minute, requests_per_unit: 10, priorities: {critical: 1.0, read: 0.5}}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2, soft: {up_to: 1.5, breach_ratio: 0.8}}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: concurrency}
";

/// A limit whose regional shares follow demand, for a service with a global store.
const FOLLOW_DEMAND: &str = "  - key: demand
    rate_limit: {unit: hour, requests_per_unit: 100, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: true}}
";

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

/// A scrape of a service on `store` with every feature on, after traffic that moves every kind
/// of metric it has: gRPC calls within and over a limit (denials write violation records and rank
/// hot keys), `/check` answers 200, 429 and 400, an RLQS report, and calls on a limit of each kind
/// of [`EVERYTHING`]. On Redis the same server is the regions' global store.
async fn scrape_after_traffic(store: StoreKind) -> String {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().display().to_string();
    let mut env: Vec<(String, String)> = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
        ("POLICY_ENABLED", "true"),
        ("RATELIMITD_DATA_DIR", data_dir.as_str()),
        ("ADMIN_TOKEN", crate::support::policy::TOKEN),
        ("VIOLATIONS_LOG", "both"),
        ("VIOLATIONS_BATCH_DELAY", "10ms"),
        ("REGION", "eu"),
        ("RLQS_ENABLED", "true"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in store.env() {
        if let Some(global) = ["REDIS_SOCKET_TYPE", "REDIS_URL"].iter().find(|n| **n == k) {
            env.push((format!("GLOBAL_{global}"), v.clone()));
        }
        env.push((k, v));
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let api = include_str!("../../../examples/check/api.yaml");
    // Shares that follow demand need the global store, which the Redis run has.
    let everything = match store {
        StoreKind::Memory => EVERYTHING.to_string(),
        _ => format!("{EVERYTHING}{FOLLOW_DEMAND}"),
    };
    let files = [("api.yaml", api), ("all.yaml", everything.as_str())];
    let s = TestServer::start(&files, &env).await;
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
    for entry in [
        ("lease", "a"),
        ("shared", "a"),
        ("user", "a"),
        ("user", "a"),
        ("user", "a"),
        ("tenant", "a"),
        ("demand", "a"),
    ] {
        s.rl("all", &[&[entry]]).await;
    }
    for class in ["critical", "read"] {
        s.rl("all", &[&[("service", "api"), ("priority", class)]])
            .await;
    }
    let mut quota = QuotaStream::open(s.running().grpc_addr)
        .await
        .expect("an RLQS stream opens");
    quota
        .report("all", usage(bucket(&[("user", "b")]), 1, 0, 1))
        .await
        .expect("an RLQS answer");
    // The denials' violation records are written once the (manual) clock has moved by the
    // writer's batch delay; a sync round with the global store, when there is one, after a move
    // of one sync interval.
    s.advance(std::time::Duration::from_secs(10));
    if let Some(sync) = s.running().regions.sync.clone() {
        sync.round().await;
    }
    let written = "ratelimitd_violations_written_total";
    // Bounded: 30 s of wall time on a loaded machine.
    let watch = ratelimitd_core::clock::Stopwatch::start();
    let mut text = s.scrape().await;
    while text.value(written) == 0 && watch.elapsed() < std::time::Duration::from_secs(30) {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        text = s.scrape().await;
    }
    assert!(text.value(written) > 0, "no violation written:\n{text}");
    drop(quota);
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
            "ratelimitd_violations_written_total",
            "ratelimitd_hot_key_hits",
            "ratelimitd_policy_rules_shadowed",
            "ratelimitd_rlqs_streams",
            "ratelimitd_rlqs_assignments_total",
            "ratelimitd_rlqs_reported_requests_total",
            "ratelimitd_region_share",
            "ratelimitd_shed_total",
            "ratelimitd_soft_breach_total",
            "ratelimitd_concurrency_slots_in_use",
            "ratelimitd_limit_usage_keys_dropped_total",
        ];
        want.extend(match store {
            StoreKind::Memory => vec![
                "ratelimitd_memory_store_keys",
                "ratelimitd_memory_store_bytes",
            ],
            _ => vec![
                "ratelimitd_redis_breaker_state",
                "ratelimitd_lease_taken_total",
                "ratelimitd_region_sync_age_seconds",
                "ratelimitd_region_sync_failures_total",
                "ratelimitd_store_used_memory_bytes",
                "ratelimitd_store_max_memory_bytes",
                "ratelimitd_store_evicted_keys_total",
                "ratelimitd_store_keys",
                "ratelimitd_store_connected_clients",
                "ratelimitd_store_probe_round_trip_seconds",
                "ratelimitd_store_node_up",
            ],
        });
        for family in want {
            assert!(have.contains(family), "{store:?}: no {family} in\n{scrape}");
        }
        let mut bad = Vec::new();
        for (name, message) in lint(&scrape) {
            // The Go service's names are kept exactly, conventions or not.
            if !name.starts_with("ratelimit_service_") {
                bad.push(format!("{name} {message}"));
            }
        }
        assert!(
            bad.is_empty(),
            "{store:?}: promtool check metrics:\n{}",
            bad.join("\n")
        );
        for (old, new) in RENAMED {
            assert!(
                !have.contains(old) && have.contains(new),
                "{store:?}: {old} is renamed {new}:\n{scrape}"
            );
        }
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
