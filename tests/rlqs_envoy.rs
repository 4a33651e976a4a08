//! End to end with real Envoy 1.40 and its `rate_limit_quota` filter (`envoy/rlqs-envoy.yaml`):
//! two Envoys against one ratelimitd share one global budget of 20 requests a second. Real time
//! (Envoy's): a bounded load of ~12 s, measured after a 3 s warm-up in which the first
//! assignments arrive.

mod common;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::TestServer;
use common::envoy::envoy_bin;
use common::guard::{guarded, stop};
use common::redis::free_port;
use ratelimitd::clock::Stopwatch;

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
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("envoy.yaml");
        std::fs::write(&cfg, yaml).unwrap();
        let log = std::fs::File::create(dir.path().join("envoy.log")).unwrap();
        let child = guarded(envoy_bin())
            .arg("-c")
            .arg(&cfg)
            .args(["--disable-hot-restart", "--concurrency", "1", "-l", "error"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("envoy runs");
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
    let s = TestServer::start(&[("quota.yaml", CONFIG)], &[]).await;
    let rl_port = s.running().grpc_addr.port();
    let a = QuotaEnvoy::start(rl_port).await;
    let b = QuotaEnvoy::start(rl_port).await;
    let (warmup, total) = (Duration::from_secs(3), Duration::from_secs(13));
    let ((ok_a, den_a), (ok_b, den_b)) =
        tokio::join!(load(a.port, warmup, total), load(b.port, warmup, total));
    let secs = (total - warmup).as_secs_f64();
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
