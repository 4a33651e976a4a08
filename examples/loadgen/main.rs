//! Load generator: drives a running ratelimitd over gRPC with a fixed number of concurrent
//! clients for a bounded time, then prints decisions per second and latency percentiles.
//!
//! ```sh
//! cargo run --release --example loadgen -- --target 127.0.0.1:8081 --concurrency 64 --seconds 10 --keys 1000
//! ```
//! Every request carries one descriptor `(remote_address, 10.0.<n>)` of domain `example` (see
//! `examples/config/example.yaml`), spread over `--keys` distinct values. Loopback targets only are
//! expected; the run stops by itself after `--seconds` (and after `--max-requests`, if given).
//!
//! `--connections N` spreads the clients over N HTTP/2 connections (default 1). Without `--rate`
//! every client sends as fast as its answers come back (closed loop: saturation). `--rate R` paces
//! the run at R requests per second in total, open loop (`paced.rs`): request `i` is due `i / R`
//! seconds after the start, sent when due with at most `--concurrency` in flight, and its latency
//! counts from when it was due, not from when it left, so a stalled server (or generator) shows
//! in the percentiles instead of slowing the load down (coordinated omission). How late the sends
//! left is printed apart, so a generator falling behind is told from a slow server.
//!
//! `--client raw` makes a paced run's calls with a hand-written HTTP/2 client (`raw.rs`) instead
//! of the `h2` crate's (`--client h2`, the default): the same requests under the same headers, at a
//! fraction of the cost, so that the generator keeps its schedule at rates where the `h2` client
//! would fill its own core and its lateness would show up as the server's latency.
//!
//! `--server-pid PID` also reports the CPU time the server used during the run (Linux, from
//! `/proc/PID/stat`) and the decisions per server CPU-second: on a small machine the load generator
//! competes for the same cores, so decisions/s alone measures both programs, while decisions per
//! CPU-second is what one core of the server sustains. The generator's own CPU time per request is
//! printed too.
//!
//! The generator is built to cost much less CPU per request than the server spends per decision,
//! so that pinned to a core of its own it can keep one server core saturated: one thread (a
//! current-thread runtime: pinned to one core, more threads would only wake each other), the
//! calls made with `h2` directly on each connection (`grpc.rs`: no tonic `Channel`, no per-request
//! task), and in the closed loop all clients polled by one task, each reusing its request message
//! and buffers. It prints its own CPU time per request, to be read against the server's. On one
//! connection the two programs take turns (a batch of answers in one write, then the next batch of
//! requests in one write), so the server's core is not saturated; a few connections
//! (`--connections 4`) keep it busy.

mod grpc;
mod paced;
mod pacer;
mod raw;

use std::fmt::Write as _;
use std::time::Duration;

use prost::bytes::BytesMut;
use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry,
};
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use ratelimitd_core::clock::Stopwatch;

use grpc::Connection;

/// What a run measured: latency samples in microseconds, then the ok, over-limit and failed
/// answers.
type Outcome = (Vec<u32>, u64, u64, u64);

struct Args {
    target: String,
    concurrency: usize,
    seconds: u64,
    keys: u64,
    domain: String,
    key: String,
    max_requests: u64,
    server_pid: Option<u32>,
    connections: usize,
    rate: Option<u64>,
    /// `--client raw`: the paced run's hand-written HTTP/2 client (`raw.rs`).
    raw: bool,
}

fn args() -> Args {
    let mut a = Args {
        target: "127.0.0.1:8081".into(),
        concurrency: 64,
        seconds: 10,
        keys: 1000,
        domain: "example".into(),
        key: "remote_address".into(),
        max_requests: u64::MAX,
        server_pid: None,
        connections: 1,
        rate: None,
        raw: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let v = pair.get(1).cloned().unwrap_or_default();
        let num = || {
            v.parse::<u64>()
                .unwrap_or_else(|_| panic!("{} takes a number", pair[0]))
        };
        match pair[0].as_str() {
            "--target" => a.target = v.clone(),
            "--concurrency" => a.concurrency = num() as usize,
            "--seconds" => a.seconds = num().min(600),
            "--keys" => a.keys = num().max(1),
            "--domain" => a.domain = v.clone(),
            "--key" => a.key = v.clone(),
            "--max-requests" => a.max_requests = num(),
            "--server-pid" => a.server_pid = Some(num() as u32),
            "--connections" => a.connections = (num() as usize).clamp(1, 64),
            "--rate" => a.rate = Some(num().max(1)),
            "--client" => {
                a.raw = match v.as_str() {
                    "h2" => false,
                    "raw" => true,
                    other => panic!("--client takes h2 or raw, not {other:?}"),
                }
            }
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        !a.raw || a.rate.is_some(),
        "--client raw paces its run: it needs --rate"
    );
    a
}

/// The next state of the generator that picks descriptor values (a 64-bit LCG, seeded per client
/// or per request index, so that two runs send the same values in the same order).
fn next_value(n: u64) -> u64 {
    n.wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
}

/// `ShouldRateLimit` for one descriptor `(key, 10.0.<value>)` of `domain`.
fn request(domain: &str, key: &str, value: u64) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: key.to_owned(),
                value: format!("10.0.{value}"),
            }],
            limit: None,
            hits_addend: None,
            is_negative_hits: false,
        }],
        hits_addend: 1,
    }
}

/// Sets the value of `request`'s one descriptor entry (built by [`request`]) to `10.0.<value>`,
/// in place.
fn set_value(request: &mut RateLimitRequest, value: u64) {
    let v = &mut request.descriptors[0].entries[0].value;
    v.clear();
    write!(v, "10.0.{value}").expect("writing to a String");
}

/// A latency sample in microseconds.
fn micros(d: Duration) -> u32 {
    d.as_micros().min(u128::from(u32::MAX)) as u32
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

/// CPU seconds (user + system) process `pid` (the server's or the generator's own) has used so
/// far, from `/proc/PID/stat`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/stat (--server-pid or the generator's own): {e}"));
    // Fields 14 and 15 (utime, stime), counted after the parenthesised command name, which may
    // itself hold spaces.
    let after_name = &stat[stat.rfind(')').expect("a /proc stat line") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    let per_second = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(100.0);
    ticks / per_second
}

/// Every client sends its next request as soon as the answer to the last one came back. The
/// clients are futures polled by the calling task, not tasks of their own: an answer wakes its
/// client without a trip through the scheduler.
async fn closed_loop(a: &Args, connections: &[Connection], run_for: Duration) -> Outcome {
    let watch = Stopwatch::start();
    let per_worker = a.max_requests / a.concurrency.max(1) as u64;
    let workers = (0..a.concurrency).map(|w| {
        let mut connection = connections[w % connections.len()].clone();
        let mut message = request(&a.domain, &a.key, 0);
        async move {
            let mut samples: Vec<u32> = Vec::with_capacity(100_000);
            let (mut ok, mut over, mut errors) = (0u64, 0u64, 0u64);
            let (mut out, mut answer) = (BytesMut::new(), BytesMut::new());
            let mut n = w as u64;
            while watch.elapsed() < run_for && ok + over + errors < per_worker.max(1) {
                n = next_value(n);
                set_value(&mut message, (n >> 33) % a.keys);
                let frame = grpc::frame(&message, &mut out);
                let from = watch.elapsed();
                match connection.call(frame, &mut answer).await {
                    Ok(1) => ok += 1,
                    Ok(_) => over += 1,
                    Err(_) => errors += 1,
                }
                if samples.len() < 2_000_000 {
                    samples.push(micros(watch.elapsed().saturating_sub(from)));
                }
            }
            (samples, ok, over, errors)
        }
    });
    let (mut all, mut ok, mut over, mut errors) = (Vec::new(), 0, 0, 0);
    for (s, o, v, e) in futures_util::future::join_all(workers).await {
        all.extend(s);
        ok += o;
        over += v;
        errors += e;
    }
    (all, ok, over, errors)
}

fn main() {
    let a = args();
    // h2 opens tracing spans on every frame it reads or writes. With no subscriber set, tracing's
    // `log` feature (which a dependency turns on) still builds each span for the `log` crate:
    // about a tenth of the generator's instructions. A subscriber that wants nothing disables them
    // at their call sites.
    tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::default())
        .expect("no other tracing subscriber is set");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(run(a));
}

async fn run(a: Args) {
    let mut connections = Vec::new();
    // The raw client opens its own connections.
    for _ in 0..if a.raw { 0 } else { a.connections } {
        let connection = Connection::open(&a.target).await;
        connections.push(connection.expect("ratelimitd is listening on --target"));
    }
    let run_for = Duration::from_secs(a.seconds);
    let cpu_before = a.server_pid.map(cpu_seconds);
    let own_before = cpu_seconds(std::process::id());
    let started = Stopwatch::start();
    let (mut all, ok, over, errors) = match a.rate {
        Some(rate) if a.raw => raw::run(&a, rate, run_for),
        Some(rate) => paced::run(&a, rate, &connections, run_for).await,
        None => closed_loop(&a, &connections, run_for).await,
    };
    let elapsed = started.elapsed().as_secs_f64();
    let own_cpu = cpu_seconds(std::process::id()) - own_before;
    let server_cpu = a
        .server_pid
        .zip(cpu_before)
        .map(|(p, b)| cpu_seconds(p) - b);
    all.sort_unstable();
    let total = ok + over + errors;
    println!(
        "requests {total} in {elapsed:.1}s: {:.0} decisions/s (ok {ok}, over_limit {over}, errors {errors})",
        total as f64 / elapsed
    );
    println!(
        "latency ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}",
        percentile(&all, 0.50),
        percentile(&all, 0.90),
        percentile(&all, 0.99),
        percentile(&all, 1.0)
    );
    println!(
        "loadgen cpu {own_cpu:.2}s ({:.0}% of one core): {:.2} us per request",
        100.0 * own_cpu / elapsed,
        1e6 * own_cpu / (total.max(1) as f64)
    );
    if let Some(cpu) = server_cpu {
        println!(
            "server cpu {cpu:.2}s ({:.0}% of one core): {:.0} decisions per server cpu-second",
            100.0 * cpu / elapsed,
            total as f64 / cpu.max(0.01)
        );
    }
}
