//! Every core: decisions per second of one in-process [`RateLimiter`] driven from 1 and then from
//! 2 OS threads, and the ratio. No network, so a load generator does not compete for the cores and
//! what is left is the request path itself (plan, store, observers, stats) and what it shares
//! between threads.
//!
//! ```sh
//! cargo run --release --example cores -- 2000000 10
//! ```
//! Arguments: decisions per thread (at most 50 000 000, default 2 000 000), a time cap in
//! seconds per run (default 10) and rounds (default 3; each runs 1 then 2 threads, and the best
//! of each is reported, since a shared machine's speed drifts between runs). The limiter is built the way the server builds it: memory store,
//! the Prometheus metrics sink, the hot-key observer. The config has one descriptor key `client`
//! (1 000 a minute); requests go to 10 000 distinct clients, and every fourth one to a single hot
//! client that is soon over its limit. Each thread has its own single-threaded tokio runtime.
//! Besides wall-clock rates it prints decisions per CPU-second of the driving threads (Linux
//! `schedstat`), which stays meaningful when other processes share the cores.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ratelimitd::testing::{ConfigLoads, HotKeys, Metrics};
use ratelimitd_core::MemoryStore;
use ratelimitd_core::clock::{Clock, Stopwatch, SystemClock};
use ratelimitd_core::config::{self, CompileOptions, ConfigFile, RateLimitConfig};
use ratelimitd_core::limiter::{Descriptor, LimiterOptions, Observers, RateLimiter, Request};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CFG: &str = r#"
domain: bench
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 1000, name: per_client}
"#;

/// Distinct clients besides the hot one.
const KEYS: usize = 10_000;

fn limiter() -> RateLimiter {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = Arc::new(MemoryStore::new(1_000_000));
    let metrics = Metrics::new(10_000, Arc::new(ConfigLoads::default), false);
    let mut observers = Observers::default();
    observers.push(Arc::new(HotKeys::new(256, clock.clone())));
    RateLimiter::with_stats(store, clock, LimiterOptions::default(), Arc::new(metrics))
        .with_observers(observers)
}

/// CPU time this thread has run so far, from `/proc/thread-self/schedstat` (Linux), in seconds.
fn thread_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns: u64 = (stat.split_whitespace().next())
        .and_then(|f| f.parse().ok())
        .unwrap_or(0);
    ns as f64 / 1e9
}

/// Runs `n` decisions (or until `cap` passes) on one thread; returns how many were made and the
/// CPU seconds the thread spent on them.
fn drive(
    limiter: &RateLimiter,
    config: &RateLimitConfig,
    seed: usize,
    n: u64,
    cap: Duration,
) -> (u64, f64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime");
    let requests: Vec<Request> = (0..KEYS)
        .map(|i| {
            let client = if i % 4 == 0 {
                "hot".to_string()
            } else {
                format!("c{}", (i * 7919 + seed) % KEYS)
            };
            Request::new("bench", vec![Descriptor::of(&[("client", &client)])])
        })
        .collect();
    let cpu = thread_cpu_secs();
    let done = rt.block_on(async {
        let watch = Stopwatch::start();
        let mut done = 0u64;
        while done < n {
            let req = &requests[done as usize % requests.len()];
            limiter
                .should_rate_limit(Some(config), req)
                .await
                .expect("a memory-store decision");
            done += 1;
            if done.is_multiple_of(4096) && watch.elapsed() >= cap {
                break;
            }
        }
        done
    });
    (done, thread_cpu_secs() - cpu)
}

/// Decisions per wall second and per CPU second with `threads` threads sharing one limiter.
fn run(threads: usize, n: u64, cap: Duration) -> (f64, f64) {
    let limiter = Arc::new(limiter());
    let files = [ConfigFile {
        name: "bench.yaml".into(),
        contents: CFG.into(),
    }];
    let config = Arc::new(config::compile(&files, &CompileOptions::default()).expect("the config"));
    let watch = Stopwatch::start();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (limiter, config) = (limiter.clone(), config.clone());
            thread::spawn(move || drive(&limiter, &config, t * 31, n, cap))
        })
        .collect();
    let (mut total, mut cpu) = (0u64, 0f64);
    for h in handles {
        let (done, secs) = h.join().expect("a bench thread");
        total += done;
        cpu += secs;
    }
    (
        total as f64 / watch.elapsed().as_secs_f64(),
        total as f64 / cpu.max(1e-9),
    )
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = argv
        .first()
        .map_or(Ok(2_000_000), |v| v.parse())
        .expect("decisions per thread is a number")
        .min(50_000_000);
    let cap = Duration::from_secs(
        argv.get(1)
            .map_or(Ok(10), |v| v.parse())
            .expect("the time cap is a number of seconds")
            .min(600),
    );
    let rounds: usize = argv
        .get(2)
        .map_or(Ok(3), |v| v.parse())
        .expect("rounds is a number")
        .clamp(1, 20);
    // Rounds alternate 1 and 2 threads, and the best of each is compared: on a shared machine
    // the cores' speed drifts from one second to the next, and the best run is the one least
    // slowed by others.
    let (mut one, mut two) = ((0f64, 0f64), (0f64, 0f64));
    let mut ratios = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        let (w1, c1) = run(1, n, cap);
        let (w2, c2) = run(2, n, cap);
        println!(
            "round {round}: 1 thread {w1:.0}/s ({c1:.0} per CPU-second), \
             2 threads {w2:.0}/s ({c2:.0} per CPU-second), {:.2}x",
            w2 / w1
        );
        ratios.push(w2 / w1);
        one = (one.0.max(w1), one.1.max(c1));
        two = (two.0.max(w2), two.1.max(c2));
    }
    println!(
        "memory store, 1 thread:  {:.0} decisions/s, {:.0} per CPU-second (best of {rounds})",
        one.0, one.1
    );
    println!(
        "memory store, 2 threads: {:.0} decisions/s, {:.0} per CPU-second (best of {rounds})",
        two.0, two.1
    );
    // On an idle machine the first ratio is the scaling; when other work shares the cores, the
    // second (cost per decision with 2 threads against 1) shows what contention costs.
    println!(
        "ratio 2/1: {:.2} wall, {:.2} per CPU-second (bests); median of the rounds' ratios {:.2}",
        two.0 / one.0,
        two.1 / one.1,
        median(&mut ratios)
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
