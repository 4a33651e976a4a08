//! The DynamoDB store (`BACKEND_TYPE=dynamodb`) against dynalite: every algorithm it runs decides
//! as the memory store does, three ratelimitd processes on one table admit exactly the limit,
//! a table that stops answering is answered by each limit's failure mode within the response
//! timeout and named by `/readyz`, and the algorithms it cannot run are refused at load.

use std::time::Duration;

use futures_util::future::join_all;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd::testing::DynamoStore;
use ratelimitd_core::MemoryStore;
use ratelimitd_core::algorithm::fixed_window::window_start;
use ratelimitd_core::algorithm::{Algorithm, LimitSpec, Window};
use ratelimitd_core::clock::{Stopwatch, Timestamp};
use ratelimitd_core::store::{Answer, Op, ResetError, Store};

use crate::ops::loud_config::{refused, stderr};
use crate::support::dynalite::{ACCESS_KEY, Dynalite, SECRET};
use crate::support::process::{Spawned, spawn};
use crate::support::require;
use crate::support::stores::plain_op;
use crate::support::*;

/// A random op of `algorithm` on one of a few keys, as the limiter would build it: a fixed
/// window's key holds its window's start.
fn random_op(rng: &mut fastrand::Rng, algorithm: Algorithm, now: Timestamp, case: u64) -> Op {
    let window = Window::from_secs([1u64, 60, 3600][rng.usize(..3)]).unwrap();
    let spec = LimitSpec {
        algorithm,
        limit: rng.u64(1..6),
        window,
        burst: rng.u64(0..8),
    };
    let key = format!(
        "{case}:{}:{}:{}",
        algorithm.key_tag(),
        window.secs(),
        rng.u8(..2)
    );
    let kind = rng.u8(..8);
    Op {
        hits: rng.u64(0..4),
        refund: kind == 0,
        max_wait: if kind == 1 {
            Duration::from_secs(rng.u64(0..30))
        } else {
            Duration::ZERO
        },
        only_admitted: kind == 2,
        report: kind == 3,
        ..op(&key, spec, 0, now)
    }
}

/// Random sequences of fixed windows, token and leaky buckets and sliding windows — checks,
/// refunds, usage reports, ops of limits that shed, shaping requests (`max_wait`), batches of
/// several ops, time moving by up to two hours — give the same decisions on DynamoDB as on the
/// memory store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_and_dynamodb_decide_identically() {
    require!(Dynalite);
    let d = Dynalite::start("conformance");
    let dynamo = DynamoStore::local(&d.endpoint(), &d.table, ACCESS_KEY, SECRET)
        .await
        .unwrap();
    let algorithms = [
        Algorithm::FixedWindow,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::SlidingWindow,
    ];
    for seed in 0..12u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let memory = MemoryStore::new(1000);
        let mut now = Timestamp::from_secs(1_000_000_000);
        for step in 0..60 {
            let batch: Vec<Op> = (0..rng.usize(1..3))
                .map(|_| {
                    let algorithm = algorithms[rng.usize(..4)];
                    random_op(&mut rng, algorithm, now, seed)
                })
                .collect();
            let expected = memory.apply(&batch, now).await.unwrap();
            let got = dynamo.apply(&batch, now).await.unwrap();
            assert_eq!(got, expected, "seed {seed} step {step}: {batch:?}");
            let micros = [0, 1_000, 400_000, 1_000_000, 61_000_000, 7_200_000_000][rng.usize(..6)];
            now = Timestamp::from_micros(now.as_micros() + micros);
        }
    }
}

/// A reset deletes each op's item, whatever its algorithm: the next decision starts fresh, the
/// answer counts the keys that held state (a key never written counts nothing), another key keeps
/// its state, and a reset by prefix is refused naming why, changing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_deletes_the_items_and_refuses_prefixes() {
    require!(Dynalite);
    let d = Dynalite::start("reset");
    let dynamo = DynamoStore::local(&d.endpoint(), &d.table, ACCESS_KEY, SECRET)
        .await
        .unwrap();
    let now = Timestamp::from_secs(1_000_000_000);
    let window = Window::from_secs(3600).unwrap();
    let reset_op = |algorithm: Algorithm, key: &str| {
        let spec = LimitSpec {
            algorithm,
            limit: 2,
            window,
            burst: 2,
        };
        op(
            &format!("reset:{}:{key}", algorithm.key_tag()),
            spec,
            0,
            now,
        )
    };
    for algorithm in [
        Algorithm::FixedWindow,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::SlidingWindow,
    ] {
        let name = algorithm.name();
        let (alice, bob) = (
            reset_op(algorithm, &format!("{name}_alice")),
            reset_op(algorithm, &format!("{name}_bob")),
        );
        for _ in 0..3 {
            dynamo
                .apply(&[alice.clone(), bob.clone()], now)
                .await
                .unwrap();
        }
        let over = dynamo
            .apply(std::slice::from_ref(&alice), now)
            .await
            .unwrap();
        assert!(
            matches!(&over[0], Answer::Decided(d) if d.over_limit),
            "{name}: {over:?}"
        );
        let never = reset_op(algorithm, &format!("{name}_carol"));
        assert_eq!(
            dynamo.reset(&[alice.clone(), never], now).await.unwrap(),
            1,
            "{name}"
        );
        let fresh = dynamo
            .apply(std::slice::from_ref(&alice), now)
            .await
            .unwrap();
        let first = MemoryStore::new(10)
            .apply(std::slice::from_ref(&alice), now)
            .await
            .unwrap();
        assert_eq!(fresh, first, "{name} starts fresh, as on a new key");
        let kept = dynamo.apply(std::slice::from_ref(&bob), now).await.unwrap();
        assert!(
            matches!(&kept[0], Answer::Decided(d) if d.over_limit),
            "{name}: bob keeps his count: {kept:?}"
        );
    }
    let err = dynamo.reset_prefix("fixed", 100, now).await.unwrap_err();
    assert!(
        matches!(&err, ResetError::Unsupported(why) if why.contains("reset by descriptor")),
        "{err}"
    );
}

/// One hit on `key` under `spec`, leasing `lease` at a time (a fixed window's key holds its
/// window's start, as the limiter builds it).
pub(super) fn op(key: &str, spec: LimitSpec, lease: u32, now: Timestamp) -> Op {
    let mut key = key.to_string();
    if spec.algorithm == Algorithm::FixedWindow {
        key += &format!(":{}", window_start(spec.window, now));
    }
    Op {
        lease: Some(lease),
        ..plain_op(&key, spec, 1)
    }
}

/// The settings of a ratelimitd process on `d`: the manual clock and `config` in a fresh dir
/// (kept alive by the returned handle).
pub(super) fn fleet_env(
    d: &Dynalite,
    config: &str,
    extra: &[(&str, &str)],
) -> (tempfile::TempDir, Vec<(String, String)>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.yaml"), config).unwrap();
    let mut env = d.env();
    env.push(("RATELIMITD_CONFIG".into(), dir.path().display().to_string()));
    env.push(("RATELIMITD_TEST_MANUAL_CLOCK".into(), T0.to_string()));
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    (dir, env)
}

/// Sends `per_instance` requests on `value` to each of `fleet` at once, each at most `limit`
/// concurrent per instance; (admitted, over the limit, failed).
async fn burst(fleet: &[Spawned], domain: &str, per_instance: usize) -> (usize, usize, usize) {
    let mut calls = Vec::new();
    for p in fleet {
        let client = RateLimitServiceClient::connect(format!("http://{}", p.grpc_addr))
            .await
            .unwrap();
        for _ in 0..per_instance {
            let mut c = client.clone();
            let domain = domain.to_string();
            calls.push(async move {
                let call = c.should_rate_limit(request(&domain, &[&[("k", "v")]]));
                tokio::time::timeout(Duration::from_secs(30), call).await
            });
        }
    }
    let (mut ok, mut over, mut failed) = (0, 0, 0);
    for r in join_all(calls).await {
        match r.expect("answered within 30 s") {
            Ok(r) if overall(r.get_ref()) == Code::Ok => ok += 1,
            Ok(_) => over += 1,
            Err(_) => failed += 1,
        }
    }
    (ok, over, failed)
}

/// Three ratelimitd processes on one table, 40 concurrent requests each: a fixed window of 50
/// (one atomic `ADD` per request) admits exactly 50 and refuses the other 70; a token bucket of
/// burst 30 (optimistic updates racing on one item) admits at most 30, and exactly 30 once the
/// requests that lost every race (refused by `failure_mode: deny`, taking nothing) are made
/// again one at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_on_one_table_admit_exactly_the_limit() {
    require!(Dynalite);
    let d = Dynalite::start("fleet");
    let config = "domain: fw\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 50}\n";
    let bucket = "domain: tb\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1, burst: 30, algorithm: token_bucket, failure_mode: deny}\n";
    // dynalite is one Node.js process: 120 calls at once on a busy machine take seconds, which
    // is the stand-in's speed, not what this test is about.
    let (dir, env) = fleet_env(&d, config, &[("DYNAMODB_RESPONSE_TIMEOUT", "20s")]);
    std::fs::write(dir.path().join("b.yaml"), bucket).unwrap();
    let fleet: Vec<_> = (0..3).map(|_| spawn(&env)).collect();
    let (ok, over, failed) = burst(&fleet, "fw", 40).await;
    assert_eq!(
        (ok, over, failed),
        (50, 70, 0),
        "exactly the limit, across three instances"
    );
    // A request that loses every race answers by `deny`: refused, and its tokens never taken.
    // So the burst admits at most 30, and what it left is still in the bucket, to the token:
    // requests one at a time (no race) take exactly the rest.
    let (ok, over, failed) = burst(&fleet, "tb", 40).await;
    assert!(
        ok <= 30 && failed == 0,
        "{ok} admitted, {over} refused, {failed} failed"
    );
    let mut client = RateLimitServiceClient::connect(format!("http://{}", fleet[0].grpc_addr))
        .await
        .unwrap();
    let mut rest = 0;
    loop {
        let r = client
            .should_rate_limit(request("tb", &[&[("k", "v")]]))
            .await
            .unwrap();
        if overall(r.get_ref()) != Code::Ok {
            break;
        }
        rest += 1;
        assert!(rest <= 30, "never more than the burst");
    }
    assert_eq!(
        ok + rest,
        30,
        "exactly the burst: {ok} in the rush, {rest} after"
    );
}

/// With dynalite stopped (SIGSTOP: connections hang, as a partitioned endpoint), each limit
/// answers by its failure mode within `DYNAMODB_RESPONSE_TIMEOUT` (`allow` admits, `deny`
/// refuses, the default fails the call), `/readyz` names DynamoDB and its table once the probe
/// has seen it; once dynalite runs again, decisions and readiness come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_table_is_answered_by_each_limits_failure_mode_in_time() {
    require!(Dynalite);
    let d = Dynalite::start("outage");
    let config = "domain: d\ndescriptors:\n  - key: open\n    rate_limit: {unit: minute, requests_per_unit: 1, failure_mode: allow}\n  - key: closed\n    rate_limit: {unit: minute, requests_per_unit: 1, failure_mode: deny}\n  - key: strict\n    rate_limit: {unit: minute, requests_per_unit: 1}\n";
    let extra = [
        ("DYNAMODB_RESPONSE_TIMEOUT", "300ms"),
        ("REDIS_BREAKER_FAILURES", "0"),
    ];
    let (_dir, env) = fleet_env(&d, config, &extra);
    let p = spawn(&env);
    let mut client = RateLimitServiceClient::connect(format!("http://{}", p.grpc_addr))
        .await
        .unwrap();
    let readyz = || async {
        let r = reqwest::get(format!("http://{}/readyz", p.http_addr))
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    assert_eq!(readyz().await.0, 200);
    let strict = client
        .should_rate_limit(request("d", &[&[("strict", "x")]]))
        .await
        .unwrap();
    assert_eq!(
        overall(&strict.into_inner()),
        Code::Ok,
        "decided while dynalite runs"
    );

    d.signal("-STOP");
    for (value, expected) in [
        ("open", Some(Code::Ok)),
        ("closed", Some(Code::OverLimit)),
        ("strict", None),
    ] {
        let watch = Stopwatch::start();
        let r = client
            .should_rate_limit(request("d", &[&[(value, "y")]]))
            .await;
        let took = watch.elapsed();
        match expected {
            Some(code) => assert_eq!(overall(&r.unwrap().into_inner()), code, "{value}"),
            None => assert_eq!(r.unwrap_err().code(), tonic::Code::Unavailable, "{value}"),
        }
        assert!(
            took < Duration::from_secs(2),
            "{value}: answered in {took:?}, within the timeout"
        );
    }
    let watch = Stopwatch::start();
    let mut body = readyz().await;
    while body.0 == 200 && watch.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        body = readyz().await;
    }
    assert_eq!(body.0, 503, "{body:?}");
    assert!(
        body.1.contains("DynamoDB not answering") && body.1.contains("DYNAMODB_TABLE=outage"),
        "{}",
        body.1
    );

    d.signal("-CONT");
    let watch = Stopwatch::start();
    while readyz().await.0 != 200 && watch.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(readyz().await.0, 200, "ready again");
    let r = client
        .should_rate_limit(request("d", &[&[("strict", "z")]]))
        .await
        .unwrap();
    assert_eq!(overall(&r.into_inner()), Code::Ok);
}

/// A sliding log or a concurrency limit on DynamoDB is refused when the configuration loads,
/// naming the limit, the algorithm and the backend; the binary does not start on it.
#[test]
fn sliding_logs_and_concurrency_limits_are_refused_at_load() {
    require!(Dynalite);
    let d = Dynalite::start("refused");
    let config = "domain: d\ndescriptors:\n  - key: log\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: sliding_log}\n  - key: slots\n    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: concurrency}\n";
    let (_dir, env) = fleet_env(&d, config, &[]);
    let vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = refused(&vars);
    let err = stderr(&out);
    assert!(!out.status.success(), "refused to start: {err}");
    for says in [
        "d.log",
        "sliding_log",
        "d.slots",
        "concurrency",
        "BACKEND_TYPE=dynamodb",
    ] {
        assert!(err.contains(says), "names {says}: {err}");
    }
}

/// `create-table` on a table that exists says so and succeeds (TTL stays on).
#[test]
fn create_table_twice_succeeds() {
    require!(Dynalite);
    let d = Dynalite::start("twice");
    let out = d.create_table();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("already exists"), "{text}");
}
