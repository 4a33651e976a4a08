//! Hostile input costs bounded memory and time: request caps answered `INVALID_ARGUMENT` (gRPC) and
//! 400 (`/json`) naming the cap, nothing counted for a refused request; and a burst of a million
//! distinct keys against the real binary keeps the embedded store within `MEMORY_MAX_BYTES`, refuses
//! what does not fit (counted as `store_full`), and loses nothing already counted. Bodies and
//! messages built to cost the most once decoded (`/json`, `/check`, gRPC) are refused by the
//! caps while they are read, and a client calling meanwhile keeps being answered.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::process::spawn;
use crate::support::scrape::scrape_addr;
use crate::support::{Code, TestServer, descriptor, request, st};
use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd_core::clock::Stopwatch;

const CFG: &str = r#"
domain: d
descriptors:
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 5}}
"#;

#[tokio::test]
async fn requests_over_a_cap_are_refused_naming_it_and_count_nothing() {
    let env = [
        ("MAX_DESCRIPTORS_PER_REQUEST", "4"),
        ("MAX_DESCRIPTOR_VALUE_BYTES", "64"),
        ("GRPC_MAX_RECV_MESSAGE_BYTES", "2048"),
    ];
    let s = TestServer::start(&[("d.yaml", CFG)], &env).await;
    let many = vec![descriptor(&[("user", "a")]); 5];
    let e = s
        .call(RateLimitRequest {
            domain: "d".into(),
            descriptors: many,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("MAX_DESCRIPTORS_PER_REQUEST"), "{e}");
    let long = "x".repeat(65);
    let e = s
        .call(request("d", &[&[("user", &long)]]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("MAX_DESCRIPTOR_VALUE_BYTES"), "{e}");
    assert!(!e.message().contains(&long), "the value is not echoed");
    // A message over GRPC_MAX_RECV_MESSAGE_BYTES is refused before it is decoded.
    let huge = "x".repeat(4096);
    let e = s
        .call(request("d", &[&[("user", &huge)]]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::OutOfRange, "{e}");
    let body = format!(
        r#"{{"domain":"d","descriptors":[{{"entries":[{{"key":"user","value":"{long}"}}]}}]}}"#
    );
    let r = s.post("/json", body).await;
    assert_eq!(r.status(), 400);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("MAX_DESCRIPTOR_VALUE_BYTES")
    );
    // Four descriptors of one user are accepted; the refused calls above counted nothing.
    let a: &[(&str, &str)] = &[("user", "a")];
    let r = s.call(request("d", &[a; 4])).await.unwrap();
    assert_eq!(st(&r, 3).2, 1, "5 per hour, 4 taken by this call alone");
}

/// Resident memory of a process, from /proc.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_distinct_keys_stay_within_the_byte_budget() {
    const BUDGET: u64 = 32 << 20;
    const KEYS: usize = 1_000_000;
    const PER_CALL: usize = 64;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.yaml"), CFG).unwrap();
    let env = [
        ("RATELIMITD_CONFIG", dir.path().display().to_string()),
        ("MEMORY_MAX_BYTES", BUDGET.to_string()),
        ("USE_PROMETHEUS", "true".into()),
        ("PROMETHEUS_ADDR", "127.0.0.1:0".into()),
        // A fixed instant: the burst may last minutes on a loaded machine, and an hour boundary
        // crossed meanwhile would start a new window for the counter checked at the end.
        ("RATELIMITD_TEST_MANUAL_CLOCK", "1000000".into()),
        // The RSS below is to measure what the process holds, not what the allocator has freed
        // and not yet given back: the store's 64 shards double their tables at about the same
        // key count, and mimalloc keeps freed pages up to its purge delay (10 ms by default) and
        // purges them on its next activity, which adds 0–20 MiB at random to the reading.
        ("MIMALLOC_PURGE_DELAY", "0".into()),
    ]
    .map(|(k, v)| (k.to_string(), v));
    let bin = spawn(&env);
    let client = RateLimitServiceClient::connect(format!("http://{}", bin.grpc_addr))
        .await
        .unwrap();
    // A counter taken before the burst must survive it.
    let mut c = client.clone();
    c.should_rate_limit(request("d", &[&[("user", "first")]]))
        .await
        .unwrap();
    let before = rss_bytes(bin.child.id());
    // Eight concurrent senders, each a bounded share of the keys. They stop once the store has
    // refused a few hundred calls as full (the state this test is about, however slow the
    // machine), or when every key was sent, or after ten minutes at most.
    let watch = Stopwatch::start();
    let refusals = Arc::new(AtomicU64::new(0));
    let senders = (0..8).map(|t| {
        let mut c = client.clone();
        let refusals = refusals.clone();
        tokio::spawn(async move {
            let (mut ok, mut full) = (0u64, 0u64);
            for call in (t..KEYS / PER_CALL).step_by(8) {
                if refusals.load(Ordering::Relaxed) >= 400
                    || watch.elapsed() > Duration::from_secs(600)
                {
                    break;
                }
                let descriptors = (0..PER_CALL)
                    .map(|i| descriptor(&[("user", &format!("u{}", call * PER_CALL + i))]))
                    .collect();
                let req = RateLimitRequest {
                    domain: "d".into(),
                    descriptors,
                    ..Default::default()
                };
                match c.should_rate_limit(req).await {
                    Ok(_) => ok += 1,
                    Err(e) if e.code() == tonic::Code::Unavailable => {
                        full += 1;
                        refusals.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("unexpected error: {e}"),
                }
            }
            (ok, full)
        })
    });
    let (mut ok, mut full) = (0, 0);
    for s in senders {
        let (o, f) = s.await.unwrap();
        ok += o;
        full += f;
    }
    let grown = rss_bytes(bin.child.id()).saturating_sub(before);
    assert!(full > 0, "the budget was reached ({ok} calls admitted)");
    // The store's estimate stays within the budget, and so does what the process really grew by
    // (with slack for the estimate and the allocator's caches).
    let text = scrape_addr(&reqwest::Client::new(), &bin.metrics_addr).await;
    let bytes = text.value("ratelimitd_memory_store_bytes");
    assert!(bytes > 0 && bytes <= BUDGET, "store bytes {bytes}");
    assert!(
        text.value("ratelimit_service_should_rate_limit_error{err_type=\"store_full\"}") > 0,
        "refusals are counted as store_full"
    );
    assert!(
        grown < 2 * BUDGET,
        "RSS grew by {grown} bytes for a {BUDGET}-byte budget"
    );
    eprintln!(
        "calls admitted {ok}, refused {full}; store {bytes} bytes; RSS +{} MiB",
        grown >> 20
    );
    let r = c
        .should_rate_limit(request("d", &[&[("user", "first")]]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st(&r, 0).0, Code::Ok);
    assert_eq!(
        st(&r, 0).2,
        3,
        "the counter taken before the burst was kept"
    );
}

/// `n` empty descriptors as a protojson list's members (`{}` each).
fn empty_json_descriptors(n: usize) -> String {
    vec!["{}"; n].join(",")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_bodies_and_messages_are_refused_while_read_and_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.yaml"), CFG).unwrap();
    let env = [("RATELIMITD_CONFIG", dir.path().display().to_string())];
    let bin = spawn(&env.map(|(k, v)| (k.to_string(), v)));
    let pid = bin.child.id();
    let grpc = format!("http://{}", bin.grpc_addr);
    let victim = RateLimitServiceClient::connect(grpc.clone()).await.unwrap();
    let rss_before = rss_bytes(pid);
    // A victim calls on its own connection until the attack is over (at most 60 s).
    let done = Arc::new(AtomicBool::new(false));
    let calls = {
        let (done, mut c) = (done.clone(), victim.clone());
        tokio::spawn(async move {
            let (mut times, mut errors) = (Vec::new(), Vec::new());
            let watch = Stopwatch::start();
            while !done.load(Ordering::Relaxed) && watch.elapsed() < Duration::from_secs(60) {
                let call = Stopwatch::start();
                let r = c
                    .should_rate_limit(request("d", &[&[("user", "victim")]]))
                    .await;
                times.push(call.elapsed());
                if let Err(e) = r {
                    errors.push(e.to_string());
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            (times, errors)
        })
    };
    let http = reqwest::Client::new();
    let json = format!("http://{}/json", bin.http_addr);
    let check = format!("http://{}/check", bin.http_addr);
    let mut attacker = victim.clone();
    let over = "more than 64 descriptors; at most 64 are accepted (MAX_DESCRIPTORS_PER_REQUEST)";
    for _ in 0..4 {
        // 1.8 MB of empty descriptors: over JSON_MAX_BODY_BYTES (1 MiB), refused while read.
        let body = format!(
            r#"{{"domain":"d","descriptors":[{}]}}"#,
            empty_json_descriptors(600_000)
        );
        let r = http.post(&json).body(body).send().await.unwrap();
        assert_eq!(r.status(), 413);
        assert!(r.text().await.unwrap().contains("JSON_MAX_BODY_BYTES"));
        // 900 kB of them: within the byte cap, refused at the 65th descriptor.
        let body = format!(
            r#"{{"domain":"d","descriptors":[{}]}}"#,
            empty_json_descriptors(300_000)
        );
        let r = http.post(&json).body(body).send().await.unwrap();
        assert_eq!(r.status(), 400);
        let text = r.text().await.unwrap();
        assert!(text.contains(over), "{text}");
        // /check: its 64 KiB of them, refused the same way, naming the field.
        let body = format!(
            r#"{{"client_key":"a","descriptors":[{}]}}"#,
            empty_json_descriptors(21_000)
        );
        let r = http.post(&check).body(body).send().await.unwrap();
        assert_eq!(r.status(), 400);
        let v: serde_json::Value = r.json().await.unwrap();
        let message = v["message"].as_str().unwrap();
        assert!(
            message.starts_with("descriptors: request has") && message.contains(over),
            "{v}"
        );
        // gRPC: 520 000 empty descriptors in one 1 MiB message.
        let req = RateLimitRequest {
            domain: "d".into(),
            descriptors: vec![RateLimitDescriptor::default(); 520_000],
            ..Default::default()
        };
        let e = attacker.should_rate_limit(req).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
        assert!(e.message().contains(over), "{e}");
    }
    let rss_after = rss_bytes(pid);
    done.store(true, Ordering::Relaxed);
    let (mut times, errors) = calls.await.unwrap();
    assert!(errors.is_empty(), "the victim's calls failed: {errors:?}");
    assert!(
        !times.is_empty(),
        "the victim was answered during the attack"
    );
    times.sort();
    let p99 = times[times.len() * 99 / 100];
    eprintln!(
        "victim: {} calls, p99 {p99:?}, max {:?}; RSS {} MiB before, {} MiB after",
        times.len(),
        times.last().unwrap(),
        rss_before >> 20,
        rss_after >> 20
    );
    // A request within the caps is still decided as before.
    let r = attacker
        .should_rate_limit(request("d", &[&[("user", "after")]]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st(&r, 0).0, Code::Ok);
}
