//! Hostile-client probes for the bounded-cost figures of the README, run against a ratelimitd
//! started by `bench/bounded_cost.sh` (domain `bc`, key `k` with any value, a huge hourly limit).
//! Each probe prints one summary line; every loop is bounded in count and time.
//!
//! ```sh
//! bounded_cost --target 127.0.0.1:8081 big-values 150 4000000
//! bounded_cost --target 127.0.0.1:8081 many-descriptors 100000
//! bounded_cost --target 127.0.0.1:8081 silent 370 10
//! bounded_cost --target 127.0.0.1:8081 hang 64 8 REDIS_PID
//! bounded_cost --target 127.0.0.1:8081 fill 200
//! ```

use std::time::Duration;

use futures_util::future::join_all;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use ratelimitd::testing;
use ratelimitd_core::clock::Stopwatch;
use tonic::transport::Channel;

type Client = RateLimitServiceClient<Channel>;

/// A request of domain `bc` with one descriptor `(k, value)` per value.
fn request(values: impl IntoIterator<Item = String>) -> RateLimitRequest {
    let descriptors = (values.into_iter())
        .map(|value| testing::descriptor(&[("k", &value)]))
        .collect();
    RateLimitRequest {
        domain: "bc".into(),
        descriptors,
        hits_addend: 1,
    }
}

/// One call: its time and its answer (`Err` holds the gRPC code's name).
async fn call(c: &Client, req: RateLimitRequest) -> (Duration, Result<RateLimitResponse, String>) {
    let t = Stopwatch::start();
    let r = c.clone().should_rate_limit(req).await;
    let r = r
        .map(tonic::Response::into_inner)
        .map_err(|s| format!("{:?}", s.code()));
    (t.elapsed(), r)
}

/// "OK x3, `InvalidArgument` x147"-style counts of answers.
fn tally<'a>(answers: impl Iterator<Item = &'a Result<RateLimitResponse, String>>) -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for a in answers {
        let name = match a {
            Ok(r) if r.overall_code == 1 => "OK".to_string(),
            Ok(_) => "OVER_LIMIT".to_string(),
            Err(code) => code.clone(),
        };
        *counts.entry(name).or_default() += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    parts.join(", ")
}

/// The p99 of `times`, in milliseconds.
fn p99(times: &mut [Duration]) -> f64 {
    times.sort();
    let i = ((times.len().max(1) - 1) as f64 * 0.99).round() as usize;
    times.get(i).map_or(0.0, |t| t.as_secs_f64() * 1000.0)
}

/// Small calls from 8 clients for `for_`: their answer times.
async fn background(c: &Client, for_: Duration) -> Vec<Duration> {
    let workers = (0..8).map(|w| async move {
        let (watch, mut times) = (Stopwatch::start(), Vec::new());
        for i in 0..1_000_000u32 {
            if watch.elapsed() >= for_ {
                break;
            }
            times.push(call(c, request([format!("bg{w}-{}", i % 100)])).await.0);
        }
        times
    });
    join_all(workers).await.concat()
}

/// `n` concurrent requests, each with one value of `bytes` bytes.
async fn big_values(c: &Client, n: usize, bytes: usize) {
    let value = |i: usize| format!("{i:04}{}", "x".repeat(bytes.saturating_sub(4)));
    let answers = join_all((0..n).map(|i| call(c, request([value(i)])))).await;
    println!(
        "big-values: {n} x {bytes} B: {}",
        tally(answers.iter().map(|a| &a.1))
    );
}

/// One request of `n` descriptors while 8 other clients call: its time, and their p99 before and
/// during it.
async fn many_descriptors(c: &Client, n: usize) {
    let mut quiet = background(c, Duration::from_secs(2)).await;
    let huge = request((0..n).map(|i| format!("d{i}")));
    let (mut during, (t, answer)) = tokio::join!(background(c, Duration::from_secs(2)), async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        call(c, huge).await
    });
    println!(
        "many-descriptors: {n} answered {} in {:.1} ms; others' p99 {:.2} ms before, {:.2} ms during",
        tally([&answer].into_iter()),
        t.as_secs_f64() * 1000.0,
        p99(&mut quiet),
        p99(&mut during)
    );
}

/// `n` connections that send nothing; new clients meanwhile; when the silent ones were closed.
async fn silent(target: &str, n: usize, limit_secs: u64) {
    let mut held = Vec::new();
    for _ in 0..n {
        match tokio::net::TcpStream::connect(target).await {
            Ok(s) => held.push(s),
            Err(e) => {
                println!("silent: connection {} refused: {e}", held.len() + 1);
                break;
            }
        }
    }
    let watch = Stopwatch::start();
    let fresh = connect(target).await;
    let mut times = Vec::new();
    for i in 0..20 {
        times.push(call(&fresh, request([format!("fresh{i}")])).await.0);
    }
    let bound = Duration::from_secs(limit_secs + 5);
    let closes = held.into_iter().map(|mut s| async move {
        let mut buf = [0u8; 64];
        loop {
            // The server says nothing first on gRPC: data would only be a preface, EOF the close.
            match tokio::time::timeout(bound, tokio::io::AsyncReadExt::read(&mut s, &mut buf)).await
            {
                Ok(Ok(0) | Err(_)) => return Some(watch.elapsed()),
                Ok(Ok(_)) => {}
                Err(_) => return None,
            }
        }
    });
    let closed: Vec<_> = join_all(closes).await;
    let last = closed.iter().flatten().max().copied().unwrap_or_default();
    println!(
        "silent: {n} silent connections; 20 new calls meanwhile, p99 {:.2} ms; {} closed by the server, the last after {:.1} s",
        p99(&mut times),
        closed.iter().flatten().count(),
        last.as_secs_f64()
    );
}

/// `clients` callers on one key while Redis (`pid`) is stopped for `secs`: errors, and how many
/// hits Redis counted beyond the admitted ones (calls applied after they were reported failed).
async fn hang(c: &Client, clients: usize, secs: u64, pid: &str) {
    let remaining = |r: &RateLimitResponse| r.statuses[0].limit_remaining;
    let before = remaining(&call(c, request(["hang".into()])).await.1.expect("Redis up"));
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill").args([sig, pid]).status();
        assert!(ok.is_ok_and(|s| s.success()), "kill {sig} {pid}");
    };
    let run = Duration::from_secs(secs + 2);
    let workers = (0..clients).map(|_| async move {
        let (watch, mut answers) = (Stopwatch::start(), Vec::new());
        while watch.elapsed() < run && answers.len() < 1_000_000 {
            answers.push(call(c, request(["hang".into()])).await.1);
        }
        answers
    });
    let pause = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        signal("-STOP");
        tokio::time::sleep(Duration::from_secs(secs)).await;
        signal("-CONT");
    };
    let (answers, ()) = tokio::join!(join_all(workers), pause);
    let answers = answers.concat();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = remaining(
        &call(c, request(["hang".into()]))
            .await
            .1
            .expect("Redis back"),
    );
    let admitted = answers.iter().filter(|a| a.is_ok()).count() as u64;
    let counted = u64::from(before.saturating_sub(after)).saturating_sub(1);
    println!(
        "hang: {clients} clients, Redis stopped {secs} s: {}; Redis counted {counted} hits for {admitted} answered calls: {} applied after being reported failed",
        tally(answers.iter()),
        counted.saturating_sub(admitted)
    );
}

/// `n` requests of 64 new keys each (a memory store with a small `MEMORY_MAX_BYTES` fills up).
async fn fill(c: &Client, n: usize) {
    let mut answers = Vec::new();
    for i in 0..n {
        answers.push(
            call(c, request((0..64).map(|j| format!("fill{i}-{j}"))))
                .await
                .1,
        );
    }
    println!("fill: {n} x 64 new keys: {}", tally(answers.iter()));
}

async fn connect(target: &str) -> Client {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{target}"))
        .expect("valid target")
        .connect()
        .await
        .expect("ratelimitd is listening on --target");
    RateLimitServiceClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

#[tokio::main]
async fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let (target, probe) = match argv.as_slice() {
        [flag, target, probe @ ..] if flag == "--target" => (target.clone(), probe.to_vec()),
        _ => panic!("usage: bounded_cost --target HOST:PORT PROBE ARGS... (see the file's doc)"),
    };
    let num = |i: usize| -> usize {
        let v = probe
            .get(i)
            .unwrap_or_else(|| panic!("{} needs argument {i}", probe[0]));
        v.parse().unwrap_or_else(|_| panic!("{v}: not a number"))
    };
    let c = connect(&target).await;
    match probe.first().map(String::as_str) {
        Some("big-values") => big_values(&c, num(1), num(2)).await,
        Some("many-descriptors") => many_descriptors(&c, num(1)).await,
        Some("silent") => silent(&target, num(1), num(2) as u64).await,
        Some("hang") => hang(&c, num(1), num(2) as u64, &probe[3]).await,
        Some("fill") => fill(&c, num(1)).await,
        other => panic!("unknown probe {other:?}"),
    }
}
