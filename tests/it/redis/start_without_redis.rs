//! The real binary started while its Redis is down: the ports open at once, requests are answered
//! by their limits' failure modes, liveness is up and readiness down (saying why); once a real
//! `redis-server` starts on the configured port, readiness turns up and decisions are counted in
//! Redis — with no restart of the service.

use std::time::Duration;

use crate::support::process::{self, Spawned};
use crate::support::redis::RedisServer;
use crate::support::request;
use crate::support::require;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd_core::clock::Stopwatch;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const CFG: &str = "\
domain: d
descriptors:
  - {key: open, rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: allow}}
  - {key: closed, rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: deny}}
  - {key: here, rate_limit: {unit: minute, requests_per_unit: 2, failure_mode: local}}
  - {key: strict, rate_limit: {unit: minute, requests_per_unit: 5}}
";

fn spawn(redis: &RedisServer) -> (Spawned, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.yaml"), CFG).unwrap();
    let env: Vec<(String, String)> = [
        ("RATELIMITD_CONFIG", dir.path().display().to_string()),
        ("BACKEND_TYPE", "redis".into()),
        ("REDIS_SOCKET_TYPE", "tcp".into()),
        ("REDIS_URL", redis.addr()),
        ("REDIS_RESPONSE_TIMEOUT", "2s".into()),
        ("REDIS_STARTUP_INITIAL_INTERVAL", "100ms".into()),
        ("REDIS_STARTUP_MAX_INTERVAL", "200ms".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    (process::spawn(&env), dir)
}

async fn get(s: &Spawned, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("http://{}{path}", s.http_addr))
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn grpc_health(s: &Spawned, service: &str) -> i32 {
    let url = format!("http://{}", s.grpc_addr);
    let channel = tonic::transport::Channel::from_shared(url).unwrap();
    let mut h = HealthClient::new(channel.connect().await.unwrap());
    let req = HealthCheckRequest {
        service: service.into(),
    };
    h.check(req).await.unwrap().into_inner().status
}

/// The code of one request for `key` (`Err` with the gRPC code when the call failed).
async fn decide(s: &Spawned, key: &str) -> Result<Code, tonic::Code> {
    let mut c = RateLimitServiceClient::connect(format!("http://{}", s.grpc_addr))
        .await
        .unwrap();
    match c.should_rate_limit(request("d", &[&[(key, "v")]])).await {
        Ok(r) => Ok(Code::try_from(r.into_inner().overall_code).unwrap()),
        Err(status) => Err(status.code()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_open_and_failure_modes_answer_until_redis_starts_then_redis_decides() {
    require!(Redis);
    let mut redis = RedisServer::not_started(&[]);
    let (s, _dir) = spawn(&redis);

    // Ports are open (spawn returned on the listening line) and answer by failure mode.
    assert_eq!(decide(&s, "open").await, Ok(Code::Ok), "allow");
    assert_eq!(decide(&s, "closed").await, Ok(Code::OverLimit), "deny");
    let mut codes = Vec::new();
    for _ in 0..3 {
        codes.push(decide(&s, "here").await);
    }
    assert_eq!(
        codes,
        [Ok(Code::Ok), Ok(Code::Ok), Ok(Code::OverLimit)],
        "local: decided by this instance with its limit of 2"
    );
    assert_eq!(
        decide(&s, "strict").await,
        Err(tonic::Code::Unavailable),
        "no failure_mode: an error, as Go"
    );

    // Alive, not ready, and the answer says why.
    assert_eq!(get(&s, "/livez").await.0, 200);
    let (status, body) = get(&s, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    let target = format!("REDIS_URL={} with REDIS_SOCKET_TYPE=tcp", redis.addr());
    assert!(
        body.contains("store: Redis not answering") && body.contains(&target),
        "{body}"
    );
    let (status, body) = get(&s, "/healthcheck").await;
    assert_eq!(status, 500, "Go's healthcheck: 500 while not ready");
    assert!(body.contains("store: Redis not answering"), "{body}");
    assert_eq!(grpc_health(&s, "").await, ServingStatus::Serving as i32);
    assert_eq!(
        grpc_health(&s, "ratelimit").await,
        ServingStatus::NotServing as i32
    );
    // The log said what it waits for and how the service answers meanwhile.
    assert!(
        s.startup
            .iter()
            .any(|l| l.contains("cannot reach Redis yet") && l.contains(&target)),
        "{:#?}",
        s.startup
    );

    // Redis starts on the configured port: readiness follows, with no restart.
    redis.restart();
    let watch = Stopwatch::start();
    while get(&s, "/readyz").await.0 != 200 {
        assert!(
            watch.elapsed() < Duration::from_secs(20),
            "not ready 20 s after Redis started: {}",
            get(&s, "/readyz").await.1
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get(&s, "/healthcheck").await, (200, "OK".to_string()));
    assert_eq!(get(&s, "/livez").await.0, 200);
    assert_eq!(
        grpc_health(&s, "ratelimit").await,
        ServingStatus::Serving as i32
    );
    // Decisions are Redis's now: the strict limit answers, and its counter is in Redis.
    assert_eq!(decide(&s, "strict").await, Ok(Code::Ok));
    let key = redis.cli(&["--scan", "--pattern", "*strict*"]);
    assert!(
        !key.is_empty() && !key.contains('\n'),
        "one counter: {key:?}"
    );
    assert_eq!(
        redis.cli(&["GET", &key]),
        "1",
        "the hit is counted in Redis"
    );
    assert_eq!(
        decide(&s, "closed").await,
        Ok(Code::Ok),
        "deny no longer applies"
    );
}
