//! A call the service reported as failed is never applied later: while a real
//! redis-server is hung (SIGSTOP), calls time out after `REDIS_RESPONSE_TIMEOUT` and are answered
//! by the failure policy, but their script calls still wait in Redis's input buffer. When Redis
//! resumes it runs them; each carries a deadline on Redis's clock (`lua/deadline.lua`), so none of
//! them writes, for every algorithm. What a user notices: the counts after the hang are the counts
//! before it plus what was admitted since. And a call whose client resets it while Redis is hung
//! stops waiting at once instead of holding its connection until the response timeout.

use std::time::Duration;

use crate::support::chaos::{Paused, source, timed};
use crate::support::raw_grpc::{framed, should_rate_limit};
use crate::support::redis::RedisServer;
use crate::support::require;
use crate::support::{ALGORITHM_KEYS, TestServer, each_algorithm, st};
use futures_util::future::join_all;
use ratelimitd_core::clock::Stopwatch;

/// One limit of 100 a minute for each algorithm.
fn cfg() -> String {
    each_algorithm("hang", 100, "minute", "")
}

/// Calls per key sent while Redis is hung, all at once.
const HUNG_CALLS: usize = 8;
const TIMEOUT: Duration = Duration::from_millis(250);

/// The remaining count Redis reports for `key` after one more admitted hit.
async fn remaining_after_one(s: &TestServer, key: &str) -> u32 {
    let (_, r) = timed(s, "hang", (key, "v")).await;
    let r = r.expect("Redis answers");
    assert_eq!(source(&r), "store", "{key}: decided by Redis");
    st(&r, 0).2
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_timed_out_while_redis_hung_are_not_counted_when_it_resumes() {
    require!(Redis);
    let redis = RedisServer::start();
    // The breaker stays out of the way: every call during the hang reaches Redis's buffer.
    let env = [
        ("REDIS_RESPONSE_TIMEOUT", "250ms"),
        ("REDIS_TIMEOUT", "250ms"),
        ("REDIS_BREAKER_FAILURES", "0"),
        ("RESPONSE_DYNAMIC_METADATA", "true"),
    ];
    let s = TestServer::start_on(&[("c.yaml", &cfg())], &env, Some(&redis)).await;
    let mut before = Vec::new();
    for key in ALGORITHM_KEYS {
        before.push(remaining_after_one(&s, key).await);
    }

    let paused = Paused::stop(&redis);
    let server = &s;
    let calls = ALGORITHM_KEYS
        .iter()
        .flat_map(|key| (0..HUNG_CALLS).map(move |_| timed(server, "hang", (key, "v"))));
    let answers = join_all(calls).await;
    for (t, r) in &answers {
        assert!(
            *t < TIMEOUT.saturating_mul(8),
            "answered without waiting for the hung Redis: {t:?}"
        );
        // The default failure policy answers with an error; either way Redis did not decide.
        if let Ok(r) = r {
            assert_ne!(source(r), "store", "Redis is hung: {r:?}");
        }
    }
    paused.resume();

    // Redis runs the buffered calls as soon as it resumes; give it a bounded moment, then every
    // key has counted exactly one more hit than before the hang (the one made now).
    let watch = Stopwatch::start();
    while redis.cli(&["PING"]) != "PONG" {
        assert!(watch.elapsed() < Duration::from_secs(5), "Redis resumes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (key, before) in ALGORITHM_KEYS.iter().zip(before) {
        assert_eq!(
            remaining_after_one(&s, key).await,
            before - 1,
            "{key}: none of the {HUNG_CALLS} calls answered during the hang was applied later"
        );
    }
    s.shutdown().await;
}

/// A client that gives up on a call while Redis is hung ends it: the call stops waiting for
/// Redis at once, and with nothing in flight its connection is closed as idle, long before the
/// response timeout would have ended the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_its_client_resets_while_redis_is_hung_stops_waiting() {
    require!(Redis);
    let redis = RedisServer::start();
    let env = [
        ("REDIS_RESPONSE_TIMEOUT", "60s"),
        ("REDIS_TIMEOUT", "60s"),
        ("REDIS_BREAKER_FAILURES", "0"),
        ("RESPONSE_DYNAMIC_METADATA", "true"),
        ("GRPC_MAX_CONNECTION_IDLE", "1s"),
    ];
    let s = TestServer::start_on(&[("c.yaml", &cfg())], &env, Some(&redis)).await;
    remaining_after_one(&s, "fw").await;

    let paused = Paused::stop(&redis);
    let tcp = tokio::net::TcpStream::connect(s.running().grpc_addr)
        .await
        .unwrap();
    let (mut h2, mut connection) = h2::client::handshake(tcp).await.unwrap();
    let mut ping = connection.ping_pong().expect("the client's ping handle");
    let connection = tokio::spawn(connection);
    let message =
        prost::Message::encode_to_vec(&crate::support::request("hang", &[&[("fw", "v")]]));
    let (_answer, mut body) = h2.send_request(should_rate_limit(&[]), false).unwrap();
    body.send_data(tonic::codegen::Bytes::from(framed(0, &message)), true)
        .unwrap();
    // The server answers a PING after the frames before it: the call has been accepted, with its
    // whole message, and waits on the hung Redis.
    ping.ping(h2::Ping::opaque()).await.unwrap();
    body.send_reset(h2::Reason::CANCEL);
    let closed = tokio::time::timeout(Duration::from_secs(15), connection).await;
    assert!(
        closed.is_ok(),
        "the reset call no longer holds its connection: closed as idle while Redis is still hung"
    );
    paused.resume();
    s.shutdown().await;
}
