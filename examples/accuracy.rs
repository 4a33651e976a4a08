//! Accuracy of the approximate window algorithms against the exact sliding log, on a long
//! synthetic trace (not a test: a measurement for README). Each client is fed to every algorithm
//! independently, as separate deployments would see it, and every decision is compared with the
//! sliding log's: "wrongly allowed" means admitted although the exact count was at the limit,
//! "wrongly denied" the reverse.
//!
//! Clients (seeded, so runs repeat): 40% steady near the limit (0.3–1.5× its rate, Poisson), 60%
//! bursty (idle gaps of ~5 minutes, then ~20-second bursts at 2–10× the rate).
//!
//! `cargo run --release --example accuracy [clients] [minutes]` (defaults: 1000 clients, 120 min)

use ratelimitd::algorithm::{Algorithm, AlgorithmState, LimitSpec, apply};
use ratelimitd::clock::Timestamp;

const LIMIT: u64 = 60;
const WINDOW_SECS: u64 = 60;

/// Exponentially distributed waiting time with `mean` microseconds.
fn exp(rng: &mut fastrand::Rng, mean: f64) -> u64 {
    (-(1.0 - rng.f64()).ln() * mean) as u64
}

/// Every request time of one client, in microseconds from 0 to `end`.
fn client_trace(rng: &mut fastrand::Rng, end: u64) -> Vec<u64> {
    let per_request = WINDOW_SECS as f64 * 1e6 / LIMIT as f64; // µs between requests at the limit
    let mut out = Vec::new();
    if rng.f64() < 0.4 {
        let mean = per_request / (0.3 + 1.2 * rng.f64());
        let mut t = exp(rng, mean);
        while t < end {
            out.push(t);
            t += exp(rng, mean).max(1);
        }
    } else {
        let mut t = exp(rng, 300e6);
        while t < end {
            let burst_end = t + exp(rng, 20e6);
            let mean = per_request / (2.0 + 8.0 * rng.f64());
            while t < burst_end.min(end) {
                out.push(t);
                t += exp(rng, mean).max(1);
            }
            t = burst_end + exp(rng, 300e6);
        }
    }
    out
}

/// Counts of one algorithm's decisions compared with the sliding log's.
#[derive(Default)]
struct Tally {
    wrongly_allowed: u64,
    wrongly_denied: u64,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let clients: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let minutes: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(120);
    let end = minutes * 60 * 1_000_000;
    let mut rng = fastrand::Rng::with_seed(20_261_121);
    let mut events: Vec<(u64, u32)> = Vec::new();
    for c in 0..clients {
        events.extend(
            client_trace(&mut rng, end)
                .into_iter()
                .map(|t| (t, c as u32)),
        );
    }
    events.sort_unstable();

    let spec = |algorithm| LimitSpec {
        algorithm,
        limit: LIMIT,
        window_secs: WINDOW_SECS,
        burst: LIMIT,
    };
    let exact = spec(Algorithm::SlidingLog);
    let compared = [Algorithm::SlidingWindow, Algorithm::FixedWindow].map(spec);
    let mut log_state: Vec<Option<AlgorithmState>> = vec![None; clients];
    let mut states: Vec<Vec<Option<AlgorithmState>>> = vec![vec![None; clients]; compared.len()];
    let mut tallies: Vec<Tally> = compared.iter().map(|_| Tally::default()).collect();
    let mut exact_denied = 0u64;
    // A fixed start far from the epoch, so windows are not aligned with the trace start.
    let origin = 1_700_000_017_000_000u64;
    for &(t, c) in &events {
        let now = Timestamp::from_micros(origin + t);
        let truth = apply(&mut log_state[c as usize], &exact, 1, now).over_limit;
        exact_denied += u64::from(truth);
        for (i, s) in compared.iter().enumerate() {
            let over = apply(&mut states[i][c as usize], s, 1, now).over_limit;
            match (over, truth) {
                (false, true) => tallies[i].wrongly_allowed += 1,
                (true, false) => tallies[i].wrongly_denied += 1,
                _ => {}
            }
        }
    }
    let n = events.len() as f64;
    println!(
        "{} requests from {clients} clients over {minutes} min; limit {LIMIT} per {WINDOW_SECS} s; \
         the sliding log denied {:.2}%",
        events.len(),
        100.0 * exact_denied as f64 / n
    );
    for (s, t) in compared.iter().zip(&tallies) {
        let wrong = t.wrongly_allowed + t.wrongly_denied;
        println!(
            "{:<15} wrong {:>8.4}%  (wrongly allowed {:.4}%, wrongly denied {:.4}%)",
            s.algorithm.name(),
            100.0 * wrong as f64 / n,
            100.0 * t.wrongly_allowed as f64 / n,
            100.0 * t.wrongly_denied as f64 / n
        );
    }
}
