//! End to end with real Envoy 1.40 and its `rate_limit_quota` filter (`envoy/rlqs-envoy.yaml`):
//! two Envoys share one global budget of 20 requests a second, against one ratelimitd or two on
//! one Redis; a deny rule denies; a reload changes what Envoy admits; a stopped ratelimitd leaves
//! Envoy on its fallback (`ALLOW_ALL` once the assignment expires). Real time (Envoy's): each load
//! is bounded (at most 40 requests a second for a stated number of seconds).

use std::process::Child;
use std::time::Duration;

use crate::support::TestServer;
use crate::support::guard::stop;
use crate::support::redis::free_port;
use crate::support::require;
use crate::support::stores::{StoreKind, shared_redis};
use ratelimitd::testing::ReloadOutcome;
use ratelimitd_core::clock::Stopwatch;

const CONFIG: &str = "domain: quota
descriptors:
  - key: name
    value: api
    rate_limit: {unit: second, requests_per_unit: 20}
";

struct QuotaEnvoy {
    child: Child,
    _dir: tempfile::TempDir,
    port: u16,
}

impl Drop for QuotaEnvoy {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

impl QuotaEnvoy {
    async fn start(rl_port: u16) -> QuotaEnvoy {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("envoy/rlqs-envoy.yaml");
        let (port, admin) = (free_port(), free_port());
        let yaml = std::fs::read_to_string(path)
            .unwrap()
            .replace("port_value: 10100 ", &format!("port_value: {port} "))
            .replace(
                "port_value: 10102 ",
                &format!("port_value: {} ", free_port()),
            )
            .replace("port_value: 9911 ", &format!("port_value: {admin} "))
            .replace("port_value: 8081 ", &format!("port_value: {rl_port} "));
        let (child, dir) = crate::support::envoy::spawn(&yaml, "error");
        // Owned at once, so a failed wait below still stops the process (Drop).
        let envoy = QuotaEnvoy {
            child,
            _dir: dir,
            port,
        };
        let http = reqwest::Client::new();
        let ready = format!("http://127.0.0.1:{admin}/ready");
        let watch = Stopwatch::start();
        while watch.elapsed() < Duration::from_secs(30) {
            if let Ok(r) = http.get(&ready).send().await
                && r.status() == 200
            {
                return envoy;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("Envoy not ready within 30 s");
    }
}

/// Sends ~40 requests a second through `port` for `total`; returns the 200s after `warmup`.
async fn load(port: u16, warmup: Duration, total: Duration) -> (u64, u64) {
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/");
    let watch = Stopwatch::start();
    let (mut ok, mut denied) = (0, 0);
    let mut tick = tokio::time::interval(Duration::from_millis(25));
    // Bounded by `total` (at most total / 25 ms turns).
    while watch.elapsed() < total {
        tick.tick().await;
        let status = http.get(&url).send().await.map(|r| r.status().as_u16());
        if watch.elapsed() < warmup {
            continue;
        }
        match status {
            Ok(200) => ok += 1,
            Ok(429) => denied += 1,
            other => panic!("unexpected answer {other:?}"),
        }
    }
    (ok, denied)
}

/// Together the two Envoys admit the global 20/s within ±20% (measured 19–21/s): each holds a
/// bucket of its share refilled every second, and a newcomer's arrival cuts the other's share
/// within a second (ratelimitd re-splits on its own, not on Envoy's next report).
#[tokio::test]
async fn two_envoys_share_one_global_budget() {
    require!(Envoy);
    let s = TestServer::start(&[("quota.yaml", CONFIG)], &[]).await;
    let rl_port = s.running().grpc_addr.port();
    let a = QuotaEnvoy::start(rl_port).await;
    let b = QuotaEnvoy::start(rl_port).await;
    // RLQS_E2E_SECONDS measures longer by hand (README: one minute); the suite measures 10 s.
    let secs: u64 = std::env::var("RLQS_E2E_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        .clamp(1, 600);
    let (warmup, total) = (Duration::from_secs(3), Duration::from_secs(3 + secs));
    let ((ok_a, den_a), (ok_b, den_b)) =
        tokio::join!(load(a.port, warmup, total), load(b.port, warmup, total));
    let secs = total.saturating_sub(warmup).as_secs_f64();
    let rate = (ok_a + ok_b) as f64 / secs;
    eprintln!(
        "RLQS two Envoys: admitted {rate:.1}/s of a 20/s budget (A {ok_a} ok {den_a} denied, B {ok_b} ok {den_b} denied, over {secs} s)"
    );
    assert!(
        den_a + den_b > 0,
        "a demand of 80/s against 20/s is partly denied"
    );
    assert!(
        (16.0..=24.0).contains(&rate),
        "admitted {rate:.1}/s, expected 20/s ± 20%"
    );
    s.shutdown().await;
}

/// Sends requests through `port` until one is denied (within 5 s): the first assignment arrived.
async fn until_denied(port: u16) {
    let watch = Stopwatch::start();
    while watch.elapsed() < Duration::from_secs(5) {
        if load(port, Duration::ZERO, Duration::from_millis(100))
            .await
            .1
            > 0
        {
            return;
        }
    }
    panic!("no request denied within 5 s");
}

#[tokio::test]
async fn two_envoys_on_two_instances_share_one_redis_budget() {
    require!(Redis, Envoy);
    let _ = shared_redis();
    let mut env = StoreKind::Redis.env();
    // One key prefix for both instances: one fleet.
    env.retain(|(k, _)| k != "CACHE_KEY_PREFIX");
    env.push((
        "CACHE_KEY_PREFIX".into(),
        format!("rlqs-e2e-{}:", free_port()),
    ));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let one = TestServer::start(&[("quota.yaml", CONFIG)], &env).await;
    let two = TestServer::start(&[("quota.yaml", CONFIG)], &env).await;
    let a = QuotaEnvoy::start(one.running().grpc_addr.port()).await;
    let b = QuotaEnvoy::start(two.running().grpc_addr.port()).await;
    let (warmup, total) = (Duration::from_secs(3), Duration::from_secs(13));
    let ((ok_a, _), (ok_b, _)) =
        tokio::join!(load(a.port, warmup, total), load(b.port, warmup, total));
    let rate = (ok_a + ok_b) as f64 / total.saturating_sub(warmup).as_secs_f64();
    eprintln!("RLQS two Envoys, two instances: admitted {rate:.1}/s (A {ok_a}, B {ok_b})");
    assert!(
        (16.0..=24.0).contains(&rate),
        "admitted {rate:.1}/s through two instances, expected one global 20/s ± 20%"
    );
    one.shutdown().await;
    two.shutdown().await;
}

#[tokio::test]
async fn a_deny_rule_denies_and_a_stopped_ratelimitd_leaves_envoy_on_its_fallback() {
    require!(Envoy);
    let deny = CONFIG.replace("requests_per_unit: 20}", "requests_per_unit: 0}");
    // Short assignments, so the fallback shows within seconds of the stop.
    let env = [("RLQS_MIN_ASSIGNMENT_TTL", "2s")];
    let s = TestServer::start(&[("quota.yaml", &deny)], &env).await;
    let envoy = QuotaEnvoy::start(s.running().grpc_addr.port()).await;
    until_denied(envoy.port).await;
    let (ok, denied) = load(envoy.port, Duration::ZERO, Duration::from_secs(2)).await;
    assert_eq!(ok, 0, "DENY_ALL: every request is 429 ({denied} were)");
    // ratelimitd stops: the stream breaks; the DENY_ALL expires after its 2 s and Envoy falls
    // back to its expired_assignment_behavior, ALLOW_ALL.
    s.shutdown().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (ok, denied) = load(envoy.port, Duration::ZERO, Duration::from_secs(2)).await;
    assert_eq!(denied, 0, "the fallback allows every request ({ok} were)");
    assert!(ok > 0);
}

#[tokio::test]
async fn a_reload_changes_what_envoy_admits() {
    require!(Envoy);
    let s = TestServer::start(&[("quota.yaml", CONFIG)], &[]).await;
    let envoy = QuotaEnvoy::start(s.running().grpc_addr.port()).await;
    until_denied(envoy.port).await;
    let (ok, _) = load(envoy.port, Duration::ZERO, Duration::from_secs(4)).await;
    let before = ok as f64 / 4.0;
    let slower = CONFIG.replace("requests_per_unit: 20}", "requests_per_unit: 4}");
    std::fs::write(s.dir.path().join("quota.yaml"), slower).unwrap();
    let outcome = s.running().reload_now().await;
    assert!(
        matches!(outcome, ReloadOutcome::Loaded { domains: 1, .. }),
        "the reload puts the 4/s configuration in service: {outcome:?}"
    );
    // The stream pushes the new budget at its next configuration check (once a second): wait
    // until Envoy enforces it, i.e. one second of ~40 requests admits at most a fresh bucket of 4
    // plus 4 (at 20/s it admitted ~20), bounded: 10 s.
    let watch = Stopwatch::start();
    loop {
        let (ok, _) = load(envoy.port, Duration::ZERO, Duration::from_secs(1)).await;
        if ok <= 8 {
            break;
        }
        assert!(
            watch.elapsed() < Duration::from_secs(10),
            "Envoy still admitted {ok} requests a second 10 s after the reload to 4/s"
        );
    }
    let (ok, _) = load(envoy.port, Duration::ZERO, Duration::from_secs(5)).await;
    let after = ok as f64 / 5.0;
    eprintln!("RLQS reload: admitted {before:.1}/s at 20/s, then {after:.1}/s at 4/s");
    assert!((16.0..=24.0).contains(&before), "{before:.1}/s at 20/s");
    // A fresh bucket of 4 tokens plus 4 a second: at most 4.8/s over 5 s.
    assert!((3.0..=5.0).contains(&after), "{after:.1}/s at 4/s");
    s.shutdown().await;
}
