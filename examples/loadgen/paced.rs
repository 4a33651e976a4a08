//! An open-loop run at a fixed rate (`--rate`). A thread of its own keeps the schedule
//! (`pacer.rs`) with the operating system's sleep, which wakes within tens of microseconds where
//! tokio's timer rounds up to the next millisecond (at 35 000 requests per second, 35 requests
//! would then leave together each millisecond, each counted late by up to a millisecond). It hands
//! each due request's due time to the runtime, which sends it as soon as fewer than
//! `--concurrency` are in flight, on the connections in turn.
//!
//! Latency counts from the due time: a server that stalls delays every request that should have
//! left meanwhile, and that is what its users see; counted from the actual send, a stall would
//! only show in the few requests in flight when it began (coordinated omission). So that a
//! generator falling behind is not mistaken for a slow server, how late each request left (its
//! actual send against its due time) is printed apart, as is the number of due requests that
//! were never sent because `--concurrency` requests stayed in flight until the end.

use std::sync::Arc;
use std::time::Duration;

use prost::bytes::BytesMut;
use ratelimitd::clock::Stopwatch;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

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
    let (tx, mut due_times) = mpsc::unbounded_channel::<(u64, Duration)>();
    let mut pacer = Pacer::new(rate, a.max_requests);
    let pacing = std::thread::spawn(move || {
        loop {
            let now = watch.elapsed();
            if now >= run_for {
                return;
            }
            for i in pacer.release(now) {
                if tx.send((i, pacer.due(i))).is_err() {
                    return;
                }
            }
            let Some(next) = pacer.next_due().filter(|at| *at < run_for) else {
                return;
            };
            std::thread::sleep(next.saturating_sub(watch.elapsed()));
        }
    });
    let in_flight = Arc::new(Semaphore::new(a.concurrency.max(1)));
    let mut sends = JoinSet::new();
    let (mut all, mut late) = (Vec::new(), Vec::new());
    let (mut ok, mut over, mut errors, mut unsent) = (0u64, 0u64, 0u64, 0u64);
    let mut tally = |(took, lag, code): (u32, u32, Option<i32>)| {
        match code {
            Some(1) => ok += 1,
            Some(_) => over += 1,
            None => errors += 1,
        }
        if all.len() < 2_000_000 {
            all.push(took);
            late.push(lag);
        }
    };
    while let Some((i, due)) = due_times.recv().await {
        let permit = tokio::select! {
            p = in_flight.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            // Still all in flight at the end: this one and those queued behind it stay unsent.
            () = tokio::time::sleep(run_for.saturating_sub(watch.elapsed())) => {
                unsent += 1;
                break;
            }
        };
        let mut connection = connections[i as usize % connections.len()].clone();
        let message = request(&a.domain, &a.key, (next_value(i) >> 33) % a.keys);
        let frame = grpc::frame(&message, &mut BytesMut::new());
        sends.spawn(async move {
            let sent = watch.elapsed();
            let code = connection.call(frame, &mut BytesMut::new()).await.ok();
            drop(permit);
            (
                micros(watch.elapsed().saturating_sub(due)),
                micros(sent.saturating_sub(due)),
                code,
            )
        });
        while let Some(done) = sends.try_join_next() {
            tally(done.expect("a send finished"));
        }
    }
    due_times.close();
    while due_times.recv().await.is_some() {
        unsent += 1;
    }
    while let Some(done) = sends.join_next().await {
        tally(done.expect("a send finished"));
    }
    pacing.join().expect("the pacing thread finished");
    late.sort_unstable();
    println!(
        "paced at {rate}/s: sent late by p50 {:.3}  p99 {:.3}  max {:.3} ms; {unsent} due but never sent (all {} in flight until the end)",
        percentile(&late, 0.50),
        percentile(&late, 0.99),
        percentile(&late, 1.0),
        a.concurrency.max(1),
    );
    (all, ok, over, errors)
}
