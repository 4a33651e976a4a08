//! An open-loop run at a fixed rate (`--rate`). The runtime's one task keeps the schedule
//! (`pacer.rs`) by checking the clock between yields, busy, on the core the generator is pinned
//! to: tokio's timer rounds up to the next millisecond (at 35 000 requests per second, 35 requests
//! would then leave together each millisecond, each counted late by up to a millisecond), and a
//! pacing thread of its own would wake the runtime's thread for every few requests, which costs
//! more than the sends. A due request leaves as soon as fewer than `--concurrency` are in flight,
//! on the connections in turn; the sends are polled by that task, not spawned.
//!
//! Latency counts from the due time: a server that stalls delays every request that should have
//! left meanwhile, and that is what its users see; counted from the actual send, a stall would
//! only show in the few requests in flight when it began (coordinated omission). So that a
//! generator falling behind is not mistaken for a slow server, how late each request left (its
//! actual send against its due time) is printed apart, as is the number of due requests that
//! were never sent because `--concurrency` requests stayed in flight until the end.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use prost::bytes::BytesMut;
use ratelimitd_core::clock::Stopwatch;

use super::grpc::{self, Connection};
use super::pacer::Pacer;
use super::{Args, Outcome, micros, next_value, percentile, request};

/// Runs `rate` requests per second for `run_for` (at most `--max-requests`) and prints how late
/// they left.
pub(crate) async fn run(
    a: &Args,
    rate: u64,
    connections: &[Connection],
    run_for: Duration,
) -> Outcome {
    let watch = Stopwatch::start();
    let mut pacer = Pacer::new(rate, a.max_requests);
    let limit = a.concurrency.max(1);
    // Due but not sent yet (all `limit` in flight), oldest first.
    let mut waiting: VecDeque<u64> = VecDeque::new();
    let mut in_flight = FuturesUnordered::new();
    let mut tally = Tally::default();
    // Request `i`, due at `due`.
    let send = |i: u64, due: Duration| {
        let mut connection = connections[i as usize % connections.len()].clone();
        let message = request(&a.domain, &a.key, (next_value(i) >> 33) % a.keys);
        async move {
            let frame = grpc::frame(&message, &mut BytesMut::new());
            let sent = watch.elapsed();
            let code = connection.call(frame, &mut BytesMut::new()).await.ok();
            (
                micros(watch.elapsed().saturating_sub(due)),
                micros(sent.saturating_sub(due)),
                code,
            )
        }
    };
    loop {
        let now = watch.elapsed();
        if now >= run_for {
            break;
        }
        waiting.extend(pacer.release(now));
        while in_flight.len() < limit
            && let Some(i) = waiting.pop_front()
        {
            in_flight.push(send(i, pacer.due(i)));
        }
        while let Some(Some(done)) = in_flight.next().now_or_never() {
            tally.add(done);
        }
        if waiting.is_empty() && pacer.next_due().is_none_or(|at| at >= run_for) {
            break;
        }
        // Between checks the task only yields, so the connections' tasks run and the next due
        // request leaves within microseconds of its time: the generator's core is its own.
        tokio::task::yield_now().await;
    }
    // Still all in flight at the end: what waits behind them stays unsent.
    let unsent = waiting.len() as u64;
    while let Some(done) = in_flight.next().await {
        tally.add(done);
    }
    tally.finish(rate, unsent, limit)
}

/// What a paced run counted: the answers by kind, each request's latency from its due time and
/// how late it left, in microseconds.
#[derive(Default)]
pub(crate) struct Tally {
    all: Vec<u32>,
    late: Vec<u32>,
    ok: u64,
    over: u64,
    errors: u64,
}

impl Tally {
    /// One request: its latency and lateness, and the answer's `overall_code` (`None`: failed).
    pub(crate) fn add(&mut self, (took, lag, code): (u32, u32, Option<i32>)) {
        match code {
            Some(1) => self.ok += 1,
            Some(_) => self.over += 1,
            None => self.errors += 1,
        }
        // Two million samples are plenty for a p99; memory stays bounded on long runs.
        if self.all.len() < 2_000_000 {
            self.all.push(took);
            self.late.push(lag);
        }
    }

    /// Prints how late the sends of a run at `rate` left and how many due requests stayed unsent
    /// behind `limit` in flight; returns the run's outcome.
    pub(crate) fn finish(mut self, rate: u64, unsent: u64, limit: usize) -> Outcome {
        self.late.sort_unstable();
        println!(
            "paced at {rate}/s: sent late by p50 {:.3}  p99 {:.3}  max {:.3} ms; {unsent} due but never sent (all {limit} in flight until the end)",
            percentile(&self.late, 0.50),
            percentile(&self.late, 0.99),
            percentile(&self.late, 1.0),
        );
        (self.all, self.ok, self.over, self.errors)
    }
}
