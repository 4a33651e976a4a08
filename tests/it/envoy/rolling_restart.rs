//! A rolling restart behind the real Envoy loses no decision. Two real ratelimitd binaries sit
//! behind one Envoy whose rate limit cluster health-checks them over gRPC health (service
//! `ratelimit`, i.e. readiness). Under a bounded load through Envoy each instance in turn gets
//! SIGTERM and is started again on its port: with `SHUTDOWN_DELAY` the terminating instance turns
//! unready at once but keeps answering until Envoy has stopped sending to it, so Envoy's rate
//! limit filter records no error and no failure-mode pass.

use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::envoy;
use crate::support::guard::stop;
use crate::support::process::{self, Spawned};
use crate::support::redis::free_port;
use crate::support::require;
use ratelimitd_core::clock::Stopwatch;

const CFG: &str = "domain: rolling\ndescriptors:\n  - {key: generic_key, value: all, rate_limit: {unit: second, requests_per_unit: 1000000}}\n";

/// Envoy: a front listener whose every request asks the `ratelimitd` cluster (two endpoints,
/// gRPC-health-checked every 100 ms), and a backend listener answering 200.
fn envoy_yaml(front: u16, backend: u16, admin: u16, instances: [u16; 2]) -> String {
    let head = envoy::front_listener_head(admin, front);
    let filters = envoy::ratelimit_and_router("rolling", "2s", false);
    let health = r#"      lb_policy: LEAST_REQUEST
      common_lb_config: { healthy_panic_threshold: { value: 0 } }
      health_checks:
        - timeout: 1s
          interval: 0.1s
          no_traffic_interval: 0.1s
          unhealthy_interval: 0.1s
          unhealthy_threshold: 1
          healthy_threshold: 1
          grpc_health_check: { service_name: ratelimit }
"#;
    let tail = envoy::backend_and_clusters_with(backend, health, &instances);
    format!(
        r#"{head}                            rate_limits: [{{ actions: [{{ generic_key: {{ descriptor_value: all }} }}] }}]
                http_filters:
{filters}{tail}"#
    )
}

struct Envoy {
    child: Child,
    dir: tempfile::TempDir,
    front: u16,
    admin: u16,
}

impl Drop for Envoy {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

impl Envoy {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default()
    }

    /// Envoy's counter `name` (0 while it was never incremented: Envoy creates them lazily).
    async fn counter(&self, name: &str) -> u64 {
        self.try_counter(name).await.unwrap()
    }

    /// [`Self::counter`], or the error while the admin interface does not answer yet.
    async fn try_counter(&self, name: &str) -> Result<u64, reqwest::Error> {
        let url = format!("http://127.0.0.1:{}/stats?filter={name}$", self.admin);
        let text = reqwest::get(url).await?.text().await?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .map_or(0, |v| v.trim().parse().unwrap()))
    }

    /// Decisions Envoy's rate limit filter received (OK answers).
    async fn decided(&self) -> u64 {
        self.counter("cluster.backend.ratelimit.ok").await
    }

    /// How many rate limit calls Envoy has sent to the instance on `port`.
    async fn routed_to(&self, port: u16) -> u64 {
        let url = format!("http://127.0.0.1:{}/clusters", self.admin);
        let text = reqwest::get(url).await.unwrap().text().await.unwrap();
        let row = format!("ratelimitd::127.0.0.1:{port}::rq_total::");
        text.lines()
            .find_map(|l| l.strip_prefix(&row))
            .map_or(0, |v| v.trim().parse().unwrap())
    }

    /// How many endpoints of the ratelimitd cluster Envoy counts as healthy.
    async fn healthy(&self) -> u64 {
        // A gauge, listed like the counters.
        self.counter("cluster.ratelimitd.membership_healthy").await
    }
}

async fn start_envoy(instances: [u16; 2]) -> Envoy {
    let (front, backend, admin) = (free_port(), free_port(), free_port());
    let (child, dir) = envoy::spawn(&envoy_yaml(front, backend, admin, instances), "warning");
    let envoy = Envoy {
        child,
        dir,
        front,
        admin,
    };
    let watch = Stopwatch::start();
    let healthy = "cluster.ratelimitd.membership_healthy";
    while envoy.try_counter(healthy).await.ok() != Some(2) {
        assert!(
            watch.elapsed() < Duration::from_secs(30),
            "Envoy not ready with both instances healthy:\n{}",
            envoy.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    envoy
}

/// One ratelimitd on gRPC port `grpc_port` with `CFG`. The shutdown delay covers the time Envoy
/// takes to stop picking an instance its health check failed: up to about a second here (checks
/// every 100 ms), seen to be longer than one second on a loaded machine; with no delay the same
/// restarts cost tens of failure-mode decisions.
fn instance(grpc_port: u16, dir: &tempfile::TempDir) -> Spawned {
    let env: Vec<(String, String)> = [
        ("RATELIMITD_CONFIG", dir.path().display().to_string()),
        ("GRPC_PORT", grpc_port.to_string()),
        ("SHUTDOWN_DELAY", "3s".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    process::spawn(&env)
}

/// A free loopback port below the kernel's ephemeral range (32768 and up on Linux), for an
/// instance restarted on the same port: a port from `free_port` could be handed to another test's
/// port-0 bind while the instance is down, and the restart would then fail to listen.
fn restart_port(from: u16) -> u16 {
    let start = from + (std::process::id() % 2_000) as u16;
    (start..from + 5_000)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port below the ephemeral range")
}

/// SIGTERM, then waits (bounded) for the exit code.
fn terminate(s: &mut Spawned) -> Option<i32> {
    let ok = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let watch = Stopwatch::start();
    while watch.elapsed() < Duration::from_secs(20) {
        if let Some(status) = s.child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("instance did not exit within 20 s of SIGTERM");
}

/// Requests through Envoy's front listener from 4 clients until `stop` (or 60 s, or 200 000
/// requests): (answered 200, other answers or failed).
fn load(front: u16, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<(u64, u64)> {
    tokio::spawn(async move {
        let (ok, bad) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let watch = Stopwatch::start();
        let clients = (0..4).map(|_| {
            let (ok, bad, stop) = (ok.clone(), bad.clone(), stop.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let url = format!("http://127.0.0.1:{front}/");
                while !stop.load(Ordering::Relaxed)
                    && watch.elapsed() < Duration::from_secs(60)
                    && ok.load(Ordering::Relaxed) + bad.load(Ordering::Relaxed) < 200_000
                {
                    match http.get(&url).send().await {
                        Ok(r) if r.status() == 200 => ok.fetch_add(1, Ordering::Relaxed),
                        _ => bad.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        });
        for c in clients.collect::<Vec<_>>() {
            c.await.unwrap();
        }
        (ok.load(Ordering::Relaxed), bad.load(Ordering::Relaxed))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarting_each_instance_under_load_loses_no_decision() {
    require!(Envoy);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rolling.yaml"), CFG).unwrap();
    let ports = [restart_port(20_000), restart_port(25_000)];
    let mut instances = [instance(ports[0], &dir), instance(ports[1], &dir)];
    let envoy = start_envoy(ports).await;
    let stop_load = Arc::new(AtomicBool::new(false));
    let traffic = load(envoy.front, stop_load.clone());
    // Some decisions before the first restart.
    let watch = Stopwatch::start();
    while envoy.decided().await < 200 && watch.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (i, port) in ports.into_iter().enumerate() {
        let before = envoy.decided().await;
        let code = {
            let s = &mut instances[i];
            tokio::task::block_in_place(|| terminate(s))
        };
        assert_eq!(code, Some(0), "instance {i} exits cleanly");
        instances[i] = tokio::task::block_in_place(|| instance(port, &dir));
        let watch = Stopwatch::start();
        while envoy.healthy().await != 2 {
            assert!(
                watch.elapsed() < Duration::from_secs(20),
                "restarted instance {i} not healthy in Envoy"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // As a rolling update waits for the new pod to be ready (and `minReadySeconds`), the
        // next instance is stopped only once Envoy routes decisions to this one.
        let routed = envoy.routed_to(port).await;
        while envoy.routed_to(port).await < routed + 200 {
            assert!(
                watch.elapsed() < Duration::from_secs(20),
                "Envoy sends nothing to restarted instance {i}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            envoy.decided().await > before,
            "decisions went on while instance {i} restarted"
        );
    }
    stop_load.store(true, Ordering::Relaxed);
    let (ok, bad) = traffic.await.unwrap();
    let errors = envoy.counter("cluster.backend.ratelimit.error").await;
    let failure_mode = envoy
        .counter("cluster.backend.ratelimit.failure_mode_allowed")
        .await;
    let decisions = envoy.decided().await;
    eprintln!(
        "requests ok={ok} other={bad}; Envoy: ratelimit.ok={decisions} error={errors} failure_mode_allowed={failure_mode}"
    );
    assert!(
        ok > 0 && decisions > 0,
        "the load ran: {ok} requests, {decisions} decisions"
    );
    assert_eq!(bad, 0, "every request through Envoy answered 200");
    assert_eq!(errors, 0, "no rate limit call failed during the restarts");
    assert_eq!(failure_mode, 0, "no request passed by failure mode");
}
