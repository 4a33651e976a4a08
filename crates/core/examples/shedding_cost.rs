//! What priority shedding and soft limits cost the limiter: decisions per CPU-second of the same
//! requests against a plain limit, a limit with priority classes, and a limit with a soft zone
//! (the same `fixed_window` of 10 a second, over 10 000 keys), on the memory store. Run by
//! `bench/shedding.sh`; the figures are in `docs/performance.md`.
//!
//! The limiter runs on this thread (a current-thread runtime), and the CPU time is this thread's
//! own (`/proc/thread-self/schedstat`), so other processes on the machine do not count. The clock
//! is a manual one that moves one second every 10 000 decisions: each key then takes about one
//! hit a second, under its limit, as most production traffic does. Rounds alternate the three
//! limits, and the median round of each is printed.

use std::sync::Arc;
use std::time::Duration;

use ratelimitd_core::random::SeededRandom;
use ratelimitd_core::{
    CompileOptions, ConfigFile, Descriptor, LimiterOptions, ManualClock, MemoryStore, RateLimiter,
    Request, Timestamp, compile,
};

const CONFIG: &str = "domain: bench
descriptors:
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: classes
    rate_limit:
      unit: second
      requests_per_unit: 10
      priorities: {critical: 1.0, write: 0.9, read: 0.8}
  - key: soft
    rate_limit: {unit: second, requests_per_unit: 10, soft: {up_to: 1.2, breach_ratio: 0.8}}
";

const KEYS: usize = 10_000;
const DECISIONS: usize = 200_000;
const ROUNDS: usize = 5;

/// Nanoseconds this thread has run on a CPU.
fn thread_cpu_nanos() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("Linux /proc/thread-self/schedstat")
}

/// The requests of one limit: one key per request, and the class entry where there are classes.
fn requests(key: &str) -> Vec<Request> {
    let classes = ["critical", "write", "read"];
    (0..KEYS)
        .map(|i| {
            let id = i.to_string();
            let mut entries = vec![(key, id.as_str())];
            if key == "classes" {
                entries.push(("priority", classes[i % 3]));
            }
            Request::new("bench", vec![Descriptor::of(&entries)])
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file = ConfigFile {
        name: "bench.yaml".into(),
        contents: CONFIG.into(),
    };
    let config = compile(&[file], &CompileOptions::default())?;
    let limits = ["plain", "classes", "soft"];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); limits.len()];
    for _ in 0..ROUNDS {
        for (i, key) in limits.iter().enumerate() {
            let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_700_000_000)));
            let store = Arc::new(MemoryStore::new(1_000_000));
            let limiter = RateLimiter::new(store, clock.clone(), LimiterOptions::default())
                .with_random(Arc::new(SeededRandom::new(7)));
            let reqs = requests(key);
            let start = thread_cpu_nanos();
            for n in 0..DECISIONS {
                if n % KEYS == 0 {
                    clock.advance(Duration::from_secs(1));
                }
                limiter
                    .should_rate_limit(Some(&config), &reqs[n % KEYS])
                    .await?;
            }
            let cpu = (thread_cpu_nanos() - start) as f64 / 1e9;
            rates[i].push(DECISIONS as f64 / cpu);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let plain = median(&mut rates[0].clone());
    for (key, r) in limits.iter().zip(&mut rates) {
        let m = median(r);
        println!(
            "{key:>8}: {m:>9.0} decisions per CPU-second (median of {ROUNDS}), {:+.1}% against plain",
            100.0 * (m / plain - 1.0)
        );
    }
    Ok(())
}
