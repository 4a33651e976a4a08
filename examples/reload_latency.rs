//! Measures what configuration reloads cost the traffic: gRPC `ShouldRateLimit` latency percentiles
//! in steady state, then with the configuration (10 000 descriptors) being rewritten and reloaded
//! back to back. Loopback only, bounded in time (two 3-second phases).
//!
//! `cargo run --release --example reload_latency`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ratelimitd::Settings;
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd::testing;
use ratelimitd_core::clock::Stopwatch;

const DESCRIPTORS: usize = 10_000;
const PHASE: Duration = Duration::from_secs(3);
const CLIENTS: usize = 16;

fn config(rpu: u32) -> String {
    let mut s = String::from("domain: big\ndescriptors:\n");
    for i in 0..DESCRIPTORS {
        s.push_str(&format!(
            "  - {{key: k, value: v{i}, rate_limit: {{unit: second, requests_per_unit: {rpu}}}}}\n"
        ));
    }
    s
}

/// Runs `CLIENTS` callers for `PHASE`; returns every latency in microseconds, sorted.
async fn traffic(addr: String) -> Vec<u64> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (addr, stop) = (addr.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut client = RateLimitServiceClient::connect(addr)
                .await
                .expect("connect");
            let mut lat = Vec::new();
            for n in 0..10_000_000usize {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let value = format!("v{}", (n * 7919 + c * 104_729) % DESCRIPTORS);
                let req = RateLimitRequest {
                    hits_addend: 1,
                    ..testing::request("big", &[&[("k", &value)]])
                };
                let t = Stopwatch::start();
                client.should_rate_limit(req).await.expect("answer");
                lat.push(t.elapsed().as_micros() as u64);
            }
            lat
        }));
    }
    tokio::time::sleep(PHASE).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client task"));
    }
    all.sort_unstable();
    all
}

fn report(name: &str, lat: &[u64]) {
    let p = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
    println!(
        "{name:<22} {:>8} requests {:>8.0}/s  p50 {:>5} µs  p99 {:>5} µs  p99.9 {:>6} µs  max {:>6} µs",
        lat.len(),
        lat.len() as f64 / PHASE.as_secs_f64(),
        p(0.50),
        p(0.99),
        p(0.999),
        lat[lat.len() - 1]
    );
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("big.yaml");
    std::fs::write(&file, config(1_000_000)).expect("write config");
    let quiet = [
        ("CONFIG_POLL_INTERVAL", "0"),
        ("RUNTIME_IGNOREDOTFILES", "true"),
    ];
    let mut vars: Vec<(String, String)> = (testing::LOOPBACK.iter().chain(&quiet))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vars.push(("RATELIMITD_CONFIG".into(), dir.path().display().to_string()));
    let settings = Settings::from_env(vars).expect("settings");
    let running = Arc::new(testing::start(&settings).await.expect("start"));
    let addr = format!("http://{}", running.grpc_addr);
    println!("{DESCRIPTORS} descriptors, {CLIENTS} concurrent gRPC callers, {PHASE:?} per phase");

    report("steady state", &traffic(addr.clone()).await);

    let reloading = Arc::new(AtomicBool::new(true));
    let (r, flag) = (running.clone(), reloading.clone());
    let reloader = tokio::spawn(async move {
        let (mut count, mut total) = (0u32, Duration::ZERO);
        while flag.load(Ordering::Relaxed) && count < 1000 {
            // Replace the file atomically, as a deployer would (the watcher sees it too), and
            // force a full load → compile → swap.
            let text = config(if count % 2 == 0 { 999_999 } else { 1_000_000 });
            let tmp = file.with_file_name(".big.yaml.tmp");
            tokio::fs::write(&tmp, text).await.expect("write config");
            tokio::fs::rename(&tmp, &file)
                .await
                .expect("replace config");
            let t = Stopwatch::start();
            r.reload_now().await;
            total += t.elapsed();
            count += 1;
        }
        (count, total)
    });
    let lat = traffic(addr).await;
    reloading.store(false, Ordering::Relaxed);
    let (count, total) = reloader.await.expect("reloader");
    report("during reloads", &lat);
    println!(
        "{count} reloads of {DESCRIPTORS} descriptors, {:.1} ms each (read + compile + swap)",
        total.as_secs_f64() * 1000.0 / f64::from(count.max(1))
    );
    println!(
        "config version now {} ({} successful loads, {} failed)",
        running.config.snapshot().map_or(0, |s| s.version),
        running.config.load_successes(),
        running.config.load_failures()
    );
    if let Ok(r) = Arc::try_unwrap(running) {
        r.shutdown().await;
    }
}
