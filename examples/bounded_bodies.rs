//! Probes for the bounded-cost figures of oversized bodies and slow clients, run by
//! `bench/bounded_cost.sh` against a ratelimitd with domain `bc` (key `k`). Each probe runs 8
//! small gRPC callers throughout (quiet for 2 s, then during the attack) and prints their p99
//! before and during, with a summary of the attack's answers; every loop is bounded in count and
//! time. The callers run on a runtime thread of their own, and the attack bodies are encoded once,
//! so that the figures are the server's, not this process's own encoding work.
//!
//! ```sh
//! bounded_bodies --grpc 127.0.0.1:8081 --http 127.0.0.1:8080 json-huge 8 14
//! bounded_bodies --grpc 127.0.0.1:8081 --http 127.0.0.1:8080 grpc-huge 32 14
//! bounded_bodies --grpc 127.0.0.1:8081 --http 127.0.0.1:8080 trickle 20 14
//! bounded_bodies --grpc 127.0.0.1:8081 --http 127.0.0.1:8080 watchers 40
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;
use prost::Message;
use prost::bytes::{Buf, BufMut, Bytes};
use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry,
};
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd_core::clock::Stopwatch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

type Client = RateLimitServiceClient<Channel>;

fn channel(grpc: &str) -> Channel {
    Endpoint::from_shared(format!("http://{grpc}"))
        .expect("valid address")
        .connect_lazy()
}

fn small(i: u32) -> RateLimitRequest {
    let entries = vec![Entry {
        key: "k".into(),
        value: format!("bg{}", i % 100),
    }];
    RateLimitRequest {
        domain: "bc".into(),
        descriptors: vec![RateLimitDescriptor {
            entries,
            ..Default::default()
        }],
        hits_addend: 1,
    }
}

/// 8 callers, each on its own connection, for `for_`: their answer times and failures.
async fn background(grpc: &str, for_: Duration) -> (Vec<Duration>, usize) {
    let workers = (0..8).map(|_| {
        let mut c = Client::new(channel(grpc));
        async move {
            let (watch, mut times, mut failed) = (Stopwatch::start(), Vec::new(), 0);
            for i in 0..1_000_000u32 {
                if watch.elapsed() >= for_ {
                    break;
                }
                let t = Stopwatch::start();
                failed += usize::from(c.should_rate_limit(small(i)).await.is_err());
                times.push(t.elapsed());
            }
            (times, failed)
        }
    });
    let all = join_all(workers).await;
    let failed = all.iter().map(|w| w.1).sum();
    (all.into_iter().flat_map(|w| w.0).collect(), failed)
}

/// The callers of [`background`] on a runtime thread of their own.
async fn background_apart(grpc: &str, for_: Duration) -> (Vec<Duration>, usize) {
    let grpc = grpc.to_string();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(background(&grpc, for_))
    });
    tokio::task::spawn_blocking(move || thread.join().expect("callers"))
        .await
        .expect("callers")
}

/// A codec that sends a message already encoded and reads the answer as bytes.
#[derive(Clone)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

fn p99(times: &mut [Duration]) -> f64 {
    times.sort();
    let i = ((times.len().max(1) - 1) as f64 * 0.99).round() as usize;
    times.get(i).map_or(0.0, |t| t.as_secs_f64() * 1000.0)
}

/// Runs `attack` (which returns a summary) while the callers call; prints the figures.
async fn under<F: std::future::Future<Output = String>>(
    name: &str,
    grpc: &str,
    secs: u64,
    attack: F,
) {
    let (mut quiet, _) = background_apart(grpc, Duration::from_secs(2)).await;
    let ((mut during, failed), summary) =
        tokio::join!(background_apart(grpc, Duration::from_secs(secs)), attack);
    println!(
        "{name}: {summary}; 8 other clients' p99 {:.2} ms before, {:.2} ms during (max {:.1} ms), {failed} failed",
        p99(&mut quiet),
        p99(&mut during),
        during
            .iter()
            .max()
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0),
    );
}

fn tally(counts: &BTreeMap<String, usize>) -> String {
    let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    parts.join(", ")
}

/// `loops` senders of 2 MB `/json` bodies of 699 050 empty descriptors, for `secs`.
async fn json_huge(http: &str, loops: usize, secs: u64) -> String {
    let body = format!(
        r#"{{"domain":"bc","descriptors":[{}]}}"#,
        vec!["{}"; 699_050].join(",")
    );
    let body = Bytes::from(body);
    let (client, url) = (reqwest::Client::new(), format!("http://{http}/json"));
    let senders = (0..loops).map(|_| {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        async move {
            let (watch, mut counts) = (Stopwatch::start(), BTreeMap::new());
            while watch.elapsed() < Duration::from_secs(secs) {
                let status = match client.post(&url).body(body.clone()).send().await {
                    Ok(r) => r.status().as_u16().to_string(),
                    Err(_) => "error".into(),
                };
                *counts.entry(status).or_insert(0) += 1;
            }
            counts
        }
    });
    let mut all = BTreeMap::new();
    for c in join_all(senders).await {
        for (k, n) in c {
            *all.entry(k).or_insert(0) += n;
        }
    }
    format!("{loops} x /json of {} B: {}", body.len(), tally(&all))
}

/// `n` concurrent senders of 1 MiB messages of 520 000 empty descriptors, for `secs`.
async fn grpc_huge(grpc: &str, n: usize, secs: u64) -> String {
    let req = RateLimitRequest {
        domain: "bc".into(),
        descriptors: vec![RateLimitDescriptor::default(); 520_000],
        hits_addend: 0,
    };
    let encoded = Bytes::from(req.encode_to_vec());
    let path = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
    let senders = (0..n).map(|_| {
        let (mut c, req) = (tonic::client::Grpc::new(channel(grpc)), encoded.clone());
        async move {
            let (watch, mut counts) = (Stopwatch::start(), BTreeMap::new());
            while watch.elapsed() < Duration::from_secs(secs) {
                let call = async {
                    c.ready()
                        .await
                        .map_err(|e| Status::unknown(e.to_string()))?;
                    let path = http::uri::PathAndQuery::from_static(path);
                    c.unary(tonic::Request::new(req.clone()), path, Raw).await
                };
                let code = match call.await {
                    Ok(_) => "OK".to_string(),
                    Err(s) if s.code() == Code::Unknown => "error".to_string(),
                    Err(s) => format!("{:?}", s.code()),
                };
                *counts.entry(code).or_insert(0) += 1;
            }
            counts
        }
    });
    let mut all = BTreeMap::new();
    for c in join_all(senders).await {
        for (k, n) in c {
            *all.entry(k).or_insert(0) += n;
        }
    }
    format!("{n} x 520 000-descriptor messages: {}", tally(&all))
}

/// `n` HTTP clients trickling a request head a byte every 4 s for `secs`, reconnecting when cut
/// off; `POST /check` meanwhile, once a second.
async fn trickle(http: &str, n: usize, secs: u64) -> String {
    let tricklers = (0..n).map(|_| async move {
        let (watch, mut cut) = (Stopwatch::start(), 0);
        while watch.elapsed() < Duration::from_secs(secs) {
            let Ok(mut s) = tokio::net::TcpStream::connect(http).await else {
                break;
            };
            let _ = s.write_all(b"POST /check HTTP/1.1\r\n").await;
            let mut buf = [0u8; 256];
            while watch.elapsed() < Duration::from_secs(secs) {
                let read = tokio::time::timeout(Duration::from_secs(4), s.read(&mut buf));
                match read.await {
                    Ok(Ok(0) | Err(_)) => break,
                    Ok(Ok(_)) => {}
                    Err(_) => {
                        if s.write_all(b"x").await.is_err() {
                            break;
                        }
                    }
                }
            }
            cut += 1;
        }
        cut
    });
    let check = async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("client");
        let (mut ok, mut times) = (0, Vec::new());
        for _ in 0..secs {
            let t = Stopwatch::start();
            let r = client
                .post(format!("http://{http}/check"))
                .body(r#"{"client_key":"probe"}"#)
                .send()
                .await;
            ok += usize::from(r.is_ok_and(|r| r.status().is_success()));
            times.push(t.elapsed());
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        (ok, times)
    };
    let (cuts, (ok, mut times)) = tokio::join!(join_all(tricklers), check);
    let connections: usize = cuts.iter().sum();
    format!(
        "{n} trickling clients ({connections} connections over the run); /check answered {ok} of {secs}, p99 {:.1} ms",
        p99(&mut times)
    )
}

/// `n` health watchers, each on its own connection, then 20 new unary clients.
async fn watchers(grpc: &str, n: usize) {
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let mut open = Vec::new();
    let mut refused = 0;
    for _ in 0..n {
        let req = HealthCheckRequest {
            service: String::new(),
        };
        let mut client = HealthClient::new(channel(grpc));
        match tokio::time::timeout(Duration::from_secs(5), client.watch(req)).await {
            Ok(Ok(s)) => open.push(s.into_inner()),
            _ => refused += 1,
        }
    }
    let mut times = Vec::new();
    let mut failed = 0;
    for i in 0..20 {
        let mut c = Client::new(channel(grpc));
        let t = Stopwatch::start();
        let r = tokio::time::timeout(Duration::from_secs(5), c.should_rate_limit(small(i))).await;
        failed += usize::from(!matches!(r, Ok(Ok(_))));
        times.push(t.elapsed());
    }
    println!(
        "watchers: {} watches open, {refused} refused; 20 new unary clients: {failed} failed, p99 {:.2} ms",
        open.len(),
        p99(&mut times)
    );
}

#[tokio::main]
async fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let [g, grpc, h, http, probe @ ..] = argv.as_slice() else {
        panic!("usage: bounded_bodies --grpc HOST:PORT --http HOST:PORT PROBE ARGS...");
    };
    assert!(g == "--grpc" && h == "--http", "usage: see the file's doc");
    let num = |i: usize| -> usize {
        let v = probe
            .get(i)
            .unwrap_or_else(|| panic!("argument {i} missing"));
        v.parse().unwrap_or_else(|_| panic!("{v}: not a number"))
    };
    match probe.first().map(String::as_str) {
        Some("json-huge") => {
            let (loops, secs) = (num(1), num(2) as u64);
            under("json-huge", grpc, secs, json_huge(http, loops, secs)).await;
        }
        Some("grpc-huge") => {
            let (n, secs) = (num(1), num(2) as u64);
            under("grpc-huge", grpc, secs, grpc_huge(grpc, n, secs)).await;
        }
        Some("trickle") => {
            let (n, secs) = (num(1), num(2) as u64);
            under("trickle", grpc, secs, trickle(http, n, secs)).await;
        }
        Some("watchers") => watchers(grpc, num(1)).await,
        other => panic!("unknown probe {other:?}"),
    }
}
