//! Accuracy of the approximate window algorithms against the exact sliding log, on a long
//! synthetic trace (not a test: a measurement for README). Two comparisons per algorithm:
//! - *estimate*: each decision against the exact count of the hits this same algorithm admitted
//!   in the last window (how often the estimate itself is wrong; Cloudflare's measure);
//! - *trajectory*: each decision against an exact sliding log fed the same requests on its own,
//!   as two deployments would see them (errors then compound, since histories diverge).
//!
//! "Wrongly allowed" means admitted although the exact count was at the limit, "wrongly denied"
//! the reverse. Clients (seeded, so runs repeat): a share `abusive` is bursty (idle gaps of ~5
//! minutes, then ~20-second bursts at 2–10× the rate); the others are steady (Poisson at 0.1× to
//! `steady_max`× the rate).
//!
//! `cargo run --release --example accuracy [clients] [minutes] [abusive share] [steady_max]`
//! (defaults: 1000 clients, 120 min, 0.6, 1.2)

use ratelimitd::algorithm::{Algorithm, AlgorithmState, LimitSpec, apply};
use ratelimitd::clock::Timestamp;

const LIMIT: u64 = 60;
const WINDOW_SECS: u64 = 60;

/// Exponentially distributed waiting time with `mean` microseconds.
fn exp(rng: &mut fastrand::Rng, mean: f64) -> u64 {
    (-(1.0 - rng.f64()).ln() * mean) as u64
}

/// Every request time of one client, in microseconds from 0 to `end`.
fn client_trace(rng: &mut fastrand::Rng, end: u64, (abusive, steady_max): (f64, f64)) -> Vec<u64> {
    let per_request = WINDOW_SECS as f64 * 1e6 / LIMIT as f64; // µs between requests at the limit
    let mut out = Vec::new();
    if rng.f64() >= abusive {
        let mean = per_request / (0.1 + (steady_max - 0.1) * rng.f64());
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

impl Tally {
    fn count(&mut self, over: bool, truth: bool) {
        match (over, truth) {
            (false, true) => self.wrongly_allowed += 1,
            (true, false) => self.wrongly_denied += 1,
            _ => {}
        }
    }

    fn line(&self, n: f64) -> String {
        let pct = |x: u64| 100.0 * x as f64 / n;
        format!(
            "wrong {:>8.4}% (wrongly allowed {:.4}%, wrongly denied {:.4}%)",
            pct(self.wrongly_allowed + self.wrongly_denied),
            pct(self.wrongly_allowed),
            pct(self.wrongly_denied)
        )
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let clients: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let minutes: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(120);
    let abusive: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0.6);
    let steady_max: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1.2);
    let end = minutes * 60 * 1_000_000;
    let mut rng = fastrand::Rng::with_seed(20_261_121);
    let mut events: Vec<(u64, u32)> = Vec::new();
    for c in 0..clients {
        events.extend(
            client_trace(&mut rng, end, (abusive, steady_max))
                .into_iter()
                .map(|t| (t, c as u32)),
        );
    }
    events.sort_unstable();

    let spec = |algorithm| LimitSpec {
        algorithm,
        limit: LIMIT,
        window: ratelimitd::algorithm::Window::from_secs(WINDOW_SECS).unwrap(),
        burst: LIMIT,
    };
    let exact = spec(Algorithm::SlidingLog);
    let compared = [Algorithm::SlidingWindow, Algorithm::FixedWindow].map(spec);
    let mut log_state: Vec<Option<AlgorithmState>> = vec![None; clients];
    let mut states: Vec<Vec<Option<AlgorithmState>>> = vec![vec![None; clients]; compared.len()];
    let mut trajectory: Vec<Tally> = compared.iter().map(|_| Tally::default()).collect();
    let mut estimate: Vec<Tally> = compared.iter().map(|_| Tally::default()).collect();
    // Per algorithm and client: the times of the hits that algorithm admitted, oldest first.
    let mut own: Vec<Vec<std::collections::VecDeque<u64>>> =
        vec![vec![std::collections::VecDeque::new(); clients]; compared.len()];
    let window = WINDOW_SECS * 1_000_000;
    let mut exact_denied = 0u64;
    // A fixed start far from the epoch, so windows are not aligned with the trace start.
    let origin = 1_700_000_017_000_000u64;
    for &(t, c) in &events {
        let now = Timestamp::from_micros(origin + t);
        let truth = apply(&mut log_state[c as usize], &exact, 1, now).over_limit;
        exact_denied += u64::from(truth);
        for (i, s) in compared.iter().enumerate() {
            let over = apply(&mut states[i][c as usize], s, 1, now).over_limit;
            trajectory[i].count(over, truth);
            let admitted = &mut own[i][c as usize];
            while admitted.front().is_some_and(|&a| a + window <= t) {
                admitted.pop_front();
            }
            estimate[i].count(over, admitted.len() as u64 >= LIMIT);
            if !over {
                admitted.push_back(t);
            }
        }
    }
    let n = events.len() as f64;
    println!(
        "{} requests from {clients} clients ({:.0}% bursty, steady up to {steady_max}x) over \
         {minutes} min; limit {LIMIT} per {WINDOW_SECS} s; the sliding log denied {:.2}%",
        events.len(),
        100.0 * abusive,
        100.0 * exact_denied as f64 / n
    );
    for (i, s) in compared.iter().enumerate() {
        println!(
            "{:<15} estimate   {}",
            s.algorithm.name(),
            estimate[i].line(n)
        );
        println!("{:<15} trajectory {}", "", trajectory[i].line(n));
    }
}
