//! Accuracy of the approximate window algorithms against the exact sliding log (not a test: a
//! measurement for docs/configuration.md, *Accuracy*). Each traffic mix is a seeded synthetic trace
//! of many clients, each with its own limit of `limit` hits per minute, and every request is
//! decided by `sliding_window`, `fixed_window` and `sliding_log` (the pure functions of the core,
//! no server). Two comparisons per algorithm:
//! - *estimate*: each decision against the exact count of the hits this same algorithm admitted
//!   in the last window (how often the estimate itself is wrong; Cloudflare's measure);
//! - *trajectory*: each decision against an exact sliding log fed the same requests on its own,
//!   as two deployments would see them (errors then compound, since histories diverge).
//!
//! "Wrongly allowed" means admitted although the exact count was at the limit, "wrongly denied"
//! the reverse; both are shares of all requests of the row. Clients alternate between sending
//! (Poisson arrivals at their rate) and silent periods, both of exponential length, so arrivals
//! come in bursts; a client's rate while sending is drawn once, uniformly in its class's range.
//! The same seed prints the same table.
//!
//! `cargo run --release --example accuracy [seed] [minutes]` (defaults: 20261121, 60; a dev build
//! prints the same table, in about half a minute)

use std::collections::VecDeque;

use ratelimitd_core::algorithm::fixed_window::window_start;
use ratelimitd_core::algorithm::sliding_window::{SlidingWindowState, fits, previous_weight, roll};
use ratelimitd_core::algorithm::{Algorithm, AlgorithmState, LimitSpec, Window, apply};
use ratelimitd_core::clock::Timestamp;

#[path = "accuracy/traffic.rs"]
mod traffic;

use traffic::{Mix, client_trace, mixes};

const WINDOW_SECS: u64 = 60;
const WINDOW_MICROS: u64 = WINDOW_SECS * 1_000_000;

/// Wrong decisions of one algorithm, compared with the exact count.
#[derive(Default, Clone, Copy)]
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

    fn add(&mut self, other: &Tally) {
        self.wrongly_allowed += other.wrongly_allowed;
        self.wrongly_denied += other.wrongly_denied;
    }

    fn cell(&self, n: u64) -> String {
        format!(
            "{} ({} / {})",
            pct(self.wrongly_allowed + self.wrongly_denied, n),
            pct(self.wrongly_allowed, n),
            pct(self.wrongly_denied, n)
        )
    }
}

fn pct(x: u64, n: u64) -> String {
    if x == 0 {
        return "0".to_owned();
    }
    let p = 100.0 * x as f64 / n.max(1) as f64;
    if p >= 0.1 {
        format!("{p:.2}%")
    } else {
        format!("{p:.4}%")
    }
}

/// Cloudflare's rule, for comparison: the same estimate over *every* request, denied or not (a
/// client over its limit then stays far over it), against the exact count of every request in
/// the last window. Built here from the core's own pieces; no store decides this way.
#[derive(Default, Clone)]
struct CountEvery {
    counters: SlidingWindowState,
    log: VecDeque<u64>,
}

impl CountEvery {
    /// Counts one request at `t` (µs into the trace) and returns (estimate over, exact over).
    fn step(&mut self, limit: u64, window: Window, t: u64, now: Timestamp) -> (bool, bool) {
        roll(&mut self.counters, window_start(window, now), window);
        let weight = previous_weight(window, now);
        let over = !fits(
            limit,
            self.counters.previous,
            self.counters.current,
            weight,
            1,
        );
        self.counters.current += 1;
        while self.log.front().is_some_and(|&a| a + WINDOW_MICROS <= t) {
            self.log.pop_front();
        }
        let truth = self.log.len() as u64 >= limit;
        self.log.push_back(t);
        (over, truth)
    }
}

/// What one class of clients (or a whole mix) saw. Index 0 is `sliding_window`, 1 `fixed_window`.
#[derive(Default, Clone, Copy)]
struct Row {
    clients: u64,
    requests: u64,
    exact_denied: u64,
    estimate: [Tally; 2],
    trajectory: [Tally; 2],
    every: Tally,
}

impl Row {
    fn add(&mut self, other: &Row) {
        self.clients += other.clients;
        self.requests += other.requests;
        self.exact_denied += other.exact_denied;
        for i in 0..2 {
            self.estimate[i].add(&other.estimate[i]);
            self.trajectory[i].add(&other.trajectory[i]);
        }
        self.every.add(&other.every);
    }

    fn print(&self, mix: &str, class: &str, total: u64) {
        let n = self.requests;
        println!(
            "| {mix} | {class} | {} | {} ({}) | {} | {} | {} | {} | {} | {} |",
            self.clients,
            n,
            pct(n, total),
            pct(self.exact_denied, n),
            self.estimate[0].cell(n),
            self.trajectory[0].cell(n),
            self.estimate[1].cell(n),
            self.trajectory[1].cell(n),
            self.every.cell(n),
        );
    }
}

/// Runs one mix and returns a row per class.
fn run(mix: &Mix, seed: u64, minutes: u64) -> Vec<Row> {
    let end = minutes * 60 * 1_000_000;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut rows = vec![Row::default(); mix.classes.len()];
    let mut class_of = Vec::with_capacity(mix.clients);
    let mut events: Vec<(u64, u32)> = Vec::new();
    for c in 0..mix.clients {
        // Client c's class: the first whose cumulative share exceeds its position in the mix.
        let at = (c as f64 + 0.5) / mix.clients as f64;
        let mut cum = 0.0;
        let k = (mix.classes.iter())
            .position(|class| {
                cum += class.share;
                at < cum
            })
            .unwrap_or(mix.classes.len() - 1);
        class_of.push(k);
        rows[k].clients += 1;
        let times = client_trace(&mut rng, &mix.classes[k], mix.limit, end);
        events.extend(times.into_iter().map(|t| (t, c as u32)));
    }
    events.sort_unstable();

    let spec = |algorithm| LimitSpec {
        algorithm,
        limit: mix.limit,
        window: Window::from_secs(WINDOW_SECS).expect("a minute is a valid window"),
        burst: mix.limit,
    };
    let exact = spec(Algorithm::SlidingLog);
    let compared = [Algorithm::SlidingWindow, Algorithm::FixedWindow].map(spec);
    let mut log_state: Vec<Option<AlgorithmState>> = vec![None; mix.clients];
    let mut states = vec![vec![None; mix.clients]; 2];
    // Per algorithm and client: the times of the hits that algorithm admitted, oldest first.
    let mut own = vec![vec![VecDeque::<u64>::new(); mix.clients]; 2];
    let mut every = vec![CountEvery::default(); mix.clients];
    // A fixed start far from the epoch, so windows are not aligned with the trace start.
    let origin = 1_700_000_017_000_000u64;
    for &(t, c) in &events {
        let (c, row) = (c as usize, &mut rows[class_of[c as usize]]);
        let now = Timestamp::from_micros(origin + t);
        let truth = apply(&mut log_state[c], &exact, 1, now).over_limit;
        row.requests += 1;
        row.exact_denied += u64::from(truth);
        for (i, s) in compared.iter().enumerate() {
            let over = apply(&mut states[i][c], s, 1, now).over_limit;
            row.trajectory[i].count(over, truth);
            let admitted = &mut own[i][c];
            while admitted.front().is_some_and(|&a| a + WINDOW_MICROS <= t) {
                admitted.pop_front();
            }
            row.estimate[i].count(over, admitted.len() as u64 >= mix.limit);
            if !over {
                admitted.push_back(t);
            }
        }
        let (over, truth) = every[c].step(mix.limit, exact.window, t, now);
        row.every.count(over, truth);
    }
    rows
}

fn arg(args: &mut impl Iterator<Item = String>, name: &str, default: u64) -> u64 {
    match args.next() {
        None => default,
        Some(a) => a.parse().unwrap_or_else(|_| {
            eprintln!("accuracy: {name} must be a whole number, got {a:?}");
            std::process::exit(2)
        }),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seed = arg(&mut args, "seed", 20_261_121);
    let minutes = arg(&mut args, "minutes", 60).max(1);
    println!(
        "seed {seed}, {minutes} min per mix, window {WINDOW_SECS} s; wrong: all (allowed / denied)\n"
    );
    println!(
        "| mix | client class | clients | requests (share) | exact log denies | sliding_window estimate \
         | sliding_window trajectory | fixed_window estimate | fixed_window trajectory \
         | every request counted (Cloudflare's rule) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (m, mix) in mixes().iter().enumerate() {
        let rows = run(mix, seed.wrapping_add(m as u64), minutes);
        let mut all = Row::default();
        for r in &rows {
            all.add(r);
        }
        for (row, class) in rows.iter().zip(&mix.classes) {
            row.print(mix.name, class.name, all.requests);
        }
        let limit = format!("all (limit {}/min)", mix.limit);
        all.print(mix.name, &limit, all.requests);
    }
}
