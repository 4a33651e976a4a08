//! Script calls of concurrent requests joined into one (`src/store/redis/join.rs`), against a real
//! redis-server: two ratelimitd processes with 64 clients on one key of each algorithm admit
//! exactly each limit, in fewer script calls than requests; and when a joined call fails, every
//! request in it is answered by its own limit's failure mode, and nothing is counted later.

use futures_util::future::join_all;

use crate::support::chaos::Paused;
use crate::support::process::{self, Spawned};
use crate::support::redis::RedisServer;
use crate::support::*;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;

const LIMIT: u32 = 100;
/// One limit of 100 for each algorithm the joined scripts serve.
fn cfg() -> String {
    each_algorithm("j", LIMIT, "hour", "")
}
const CLIENTS: usize = 64;
const CALLS_PER_CLIENT: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_on_two_instances_admit_exactly_each_limit_in_fewer_calls() {
    require!(Redis);
    let r = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("j.yaml"), cfg()).unwrap();
    let mut env = r.env();
    env.push(("RATELIMITD_CONFIG".into(), dir.path().display().to_string()));
    // One fixed instant for both: no window rolls over and no bucket refills mid-test.
    env.push(("RATELIMITD_TEST_MANUAL_CLOCK".into(), "1000000".into()));
    let servers: Vec<Spawned> = (0..2).map(|_| process::spawn(&env)).collect();
    let mut clients = Vec::new();
    for s in &servers {
        let url = format!("http://{}", s.grpc_addr);
        clients.push(RateLimitServiceClient::connect(url).await.unwrap());
    }
    let before = r.calls("evalsha");
    let tasks = (0..CLIENTS).map(|i| {
        let client = clients[i % 2].clone();
        tokio::spawn(async move {
            let mut admitted = [0u32; ALGORITHM_KEYS.len()];
            for _ in 0..CALLS_PER_CLIENT {
                // One descriptor of each algorithm, all on one hot value.
                let descriptors = ALGORITHM_KEYS.map(|k| [(k, "hot")]);
                let descriptors: Vec<&[(&str, &str)]> = descriptors
                    .iter()
                    .map(<[(&str, &str); 1]>::as_slice)
                    .collect();
                let r = client
                    .clone()
                    .should_rate_limit(request("j", &descriptors))
                    .await
                    .unwrap()
                    .into_inner();
                for (k, n) in admitted.iter_mut().enumerate() {
                    *n += u32::from(st(&r, k).0 == Code::Ok);
                }
            }
            admitted
        })
    });
    let mut admitted = [0u32; ALGORITHM_KEYS.len()];
    for done in join_all(tasks).await {
        for (total, n) in admitted.iter_mut().zip(done.unwrap()) {
            *total += n;
        }
    }
    let requests = CLIENTS * CALLS_PER_CLIENT;
    for (key, n) in ALGORITHM_KEYS.iter().zip(admitted) {
        assert_eq!(n, LIMIT, "{key}: exactly the limit of {requests} requests");
    }
    assert_eq!(
        r.cli(&["GET", "{1:j|2:fw=3:hot}:fw:3600:997200"]),
        requests.to_string(),
        "every fixed window hit counted once"
    );
    let calls = r.calls("evalsha") - before;
    assert!(
        calls < (requests * ALGORITHM_KEYS.len()) as u64,
        "{calls} script calls for {requests} requests of {} algorithms: none joined",
        ALGORITHM_KEYS.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_joined_call_answers_each_request_by_its_own_failure_mode() {
    require!(Redis);
    let cfg = "domain: f\ndescriptors:\n  - {key: open, rate_limit: {unit: hour, requests_per_unit: 5, failure_mode: allow}}\n  - {key: closed, rate_limit: {unit: hour, requests_per_unit: 5, failure_mode: deny}}\n";
    let r = RedisServer::start();
    let s = TestServer::start_on(
        &[("f.yaml", cfg)],
        // No breaker: every request's call is made, so each is answered after its own failed
        // call rather than by an open breaker.
        &[
            ("REDIS_RESPONSE_TIMEOUT", "300ms"),
            ("REDIS_BREAKER_FAILURES", "0"),
        ],
        Some(&r),
    )
    .await;
    // Redis up: counted normally (and the scripts are loaded).
    assert_eq!(overall(&s.rl("f", &[&[("open", "a")]]).await), Code::Ok);
    assert_eq!(overall(&s.rl("f", &[&[("closed", "a")]]).await), Code::Ok);
    let paused = Paused::stop(&r);
    // Sent together, so they reach the store together and share joined calls.
    let server = &s;
    let calls = (0..32).map(|i| {
        let key = if i % 2 == 0 { "open" } else { "closed" };
        let value = format!("v{i}");
        let req = request("f", &[&[(key, value.as_str())]]);
        async move { (key, server.call(req).await.unwrap()) }
    });
    for (key, resp) in join_all(calls).await {
        let expected = if key == "open" {
            (Code::Ok, None, 0)
        } else {
            (Code::OverLimit, lim(5, "HOUR"), 0)
        };
        assert_eq!(st(&resp, 0), expected, "{key}: its own failure mode");
    }
    paused.resume();
    // Redis runs what it had queued now: every call's deadline has passed, so nothing counts.
    assert_eq!(
        overall(&s.rl("f", &[&[("closed", "after")]]).await),
        Code::Ok
    );
    let written = r.cli(&["KEYS", "*:v[0-9]*"]);
    assert_eq!(
        written, "",
        "no request answered by its failure mode was counted later"
    );
}
