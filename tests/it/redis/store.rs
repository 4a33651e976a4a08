//! The Redis store against real `redis-server` processes: the Go and default key formats, the
//! per-second split, AUTH, the local cache, stop-increment, and Redis dying and coming back
//! (decisions matching the memory store: `store/conformance.rs`; the scenarios of
//! `docs/design/contract.md#scenarios`, s25 among them, run on every store in `grpc/counting.rs`
//! and `grpc/scenarios.rs`). Each test here starts its own server, because it reads or writes that
//! server's keys, or kills it.

use std::time::Duration;

use crate::support::redis::RedisServer;
use crate::support::*;
use ratelimitd::Settings;
use ratelimitd::testing::RedisStore;
use ratelimitd_core::clock::Stopwatch;

const INT: &str = "domain: basic\ndescriptors:\n  - {key: key1, rate_limit: {unit: second, requests_per_unit: 50}}\n  - {key: k2, rate_limit: {unit: minute, requests_per_unit: 20}}\n";

#[tokio::test]
async fn s24_s29_s30_go_key_format_writes_the_go_keys() {
    require!(Redis);
    let r = RedisServer::start();
    let env = [("CACHE_KEY_FORMAT", "go"), ("CACHE_KEY_PREFIX", "prefix:")];
    let s = TestServer::start_on(&[("b.yaml", INT)], &env, Some(&r)).await;
    let resp = s.rl("basic", &[&[("key1", "foo")]]).await;
    assert_eq!(st(&resp, 0), (Code::Ok, lim(50, "SECOND"), 49));
    assert_eq!(r.cli(&["GET", "prefix:basic_key1_foo_1234"]), "1");
    let ttl: i64 = r
        .cli(&["TTL", "prefix:basic_key1_foo_1234"])
        .parse()
        .unwrap();
    assert!((0..=1).contains(&ttl), "TTL {ttl}");
    s.rl("basic", &[&[("k2", "v")]]).await;
    let ttl: i64 = r.cli(&["TTL", "prefix:basic_k2_v_1200"]).parse().unwrap();
    assert!(
        (55..=60).contains(&ttl),
        "the EXPIRE argument is the window: {ttl}"
    );
}

/// A fixed window's counter gets its TTL once, from the hit that makes it: the hits after it send
/// Redis no `EXPIRE` (the key names its window, so the first TTL already outlasts it).
#[tokio::test]
async fn a_fixed_window_counter_is_given_its_ttl_once() {
    require!(Redis);
    let r = RedisServer::start();
    let env = [("CACHE_KEY_FORMAT", "go"), ("CACHE_KEY_PREFIX", "prefix:")];
    let s = TestServer::start_on(&[("b.yaml", INT)], &env, Some(&r)).await;
    let before = r.calls("expire");
    for left in (15..20).rev() {
        let resp = s.rl("basic", &[&[("k2", "v")]]).await;
        assert_eq!(st(&resp, 0), (Code::Ok, lim(20, "MINUTE"), left));
    }
    assert_eq!(r.cli(&["GET", "prefix:basic_k2_v_1200"]), "5");
    assert_eq!(r.calls("expire") - before, 1, "one EXPIRE for five hits");
    let ttl: i64 = r.cli(&["TTL", "prefix:basic_k2_v_1200"]).parse().unwrap();
    assert!((55..=60).contains(&ttl), "the window's TTL: {ttl}");
}

#[tokio::test]
async fn default_keys_are_collision_free_where_go_keys_collide() {
    require!(Redis);
    let cfg = "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: minute, requests_per_unit: 2}}\n  - {key: a_b, rate_limit: {unit: minute, requests_per_unit: 2}}\n";
    for (format, third) in [("go", Code::OverLimit), ("ratelimitd", Code::Ok)] {
        let r = RedisServer::start();
        let s = TestServer::start_on(
            &[("d.yaml", cfg)],
            &[("CACHE_KEY_FORMAT", format)],
            Some(&r),
        )
        .await;
        s.rl("d", &[&[("a", "b_c")]]).await;
        s.rl("d", &[&[("a", "b_c")]]).await;
        let resp = s.rl("d", &[&[("a_b", "c")]]).await;
        assert_eq!(st(&resp, 0).0, third, "format {format}");
    }
    let r = RedisServer::start();
    let s = TestServer::start_on(&[("d.yaml", cfg)], &[], Some(&r)).await;
    s.rl("d", &[&[("a", "b_c")]]).await;
    assert_eq!(r.cli(&["GET", "{1:d|1:a=3:b_c}:fw:60:1200"]), "1");
}

/// Sends 25 requests on `k2` (20 per minute): 20 admitted with falling remaining, then over.
async fn twenty_then_over(s: &TestServer) {
    for i in 1..=25u32 {
        let resp = s.rl("basic", &[&[("k2", "R")]]).await;
        let want = if i <= 20 {
            (Code::Ok, lim(20, "MINUTE"), 20 - i)
        } else {
            (Code::OverLimit, lim(20, "MINUTE"), 0)
        };
        assert_eq!(st(&resp, 0), want, "call {i}");
    }
}

#[tokio::test]
async fn s47_per_second_limits_go_to_the_per_second_redis() {
    require!(Redis);
    let main = RedisServer::start();
    let per_second = RedisServer::start();
    let sock = per_second.socket().display().to_string();
    let env = [
        ("REDIS_PERSECOND", "true"),
        ("REDIS_PERSECOND_SOCKET_TYPE", "unix"),
        ("REDIS_PERSECOND_URL", sock.as_str()),
    ];
    let s = TestServer::start_on(&[("b.yaml", INT)], &env, Some(&main)).await;
    s.rl("basic", &[&[("key1", "x")], &[("k2", "y")]]).await;
    assert_eq!(main.cli(&["KEYS", "*"]), "{5:basic|2:k2=1:y}:fw:60:1200");
    assert_eq!(
        per_second.cli(&["KEYS", "*"]),
        "{5:basic|4:key1=1:x}:fw:1:1234"
    );
}

#[tokio::test]
async fn auth_with_password_and_user_and_no_secret_in_errors() {
    require!(Redis);
    let r = RedisServer::start_with(&[
        "--requirepass",
        "s3cret-pw",
        "--user",
        "app",
        "on",
        ">app-pw",
        "~*",
        "&*",
        "+@all",
    ]);
    for auth in ["s3cret-pw", "app:app-pw"] {
        let s = TestServer::start_on(&[("b.yaml", INT)], &[("REDIS_AUTH", auth)], Some(&r)).await;
        assert_eq!(
            st(&s.rl("basic", &[&[("key1", auth)]]).await, 0).0,
            Code::Ok
        );
    }
    let mut env = r.env();
    env.push(("REDIS_AUTH".into(), "wrong-pw-xyz".into()));
    env.push(("REDIS_STARTUP_MAX_ELAPSED_TIME".into(), "1ms".into()));
    let settings = Settings::from_env(env).unwrap();
    let err = RedisStore::connect_with_backoff(&settings.redis)
        .await
        .unwrap_err()
        .to_string();
    assert!(!err.contains("wrong-pw-xyz"), "{err}");
    assert!(
        format!("{settings:?}").contains("redacted")
            && !format!("{settings:?}").contains("wrong-pw-xyz")
    );
}

async fn healthcheck(s: &TestServer) -> u16 {
    s.http
        .get(s.http_url("/healthcheck"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Polls `f` every 20 ms until it is true or `limit` passes.
async fn eventually<F: std::future::Future<Output = bool>>(
    limit: Duration,
    mut f: impl FnMut() -> F,
) -> bool {
    let watch = Stopwatch::start();
    while watch.elapsed() < limit {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s55_s56_redis_down_answers_unavailable_quickly_and_recovers() {
    require!(Redis);
    let mut r = RedisServer::start();
    let s = TestServer::start_on(
        &[("b.yaml", INT)],
        &[("REDIS_RESPONSE_TIMEOUT", "200ms")],
        Some(&r),
    )
    .await;
    assert_eq!(st(&s.rl("basic", &[&[("k2", "a")]]).await, 0).2, 19);
    r.kill();
    for _ in 0..5 {
        let started = Stopwatch::start();
        let e = s
            .call(request("basic", &[&[("k2", "a")]]))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
        // Bounded: the per-call timeout (200ms) plus scheduling slack, never a hang.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "answered after {:?}",
            started.elapsed()
        );
        // Descriptors without a limit do not need Redis (s56).
        assert_eq!(
            overall(&s.rl("basic", &[&[("nolimit", "x")]]).await),
            Code::Ok
        );
    }
    assert!(
        eventually(Duration::from_secs(10), || async {
            healthcheck(&s).await == 500
        })
        .await,
        "health turns unhealthy"
    );
    r.restart();
    let recovered = eventually(Duration::from_secs(20), || async {
        s.call(request("basic", &[&[("k2", "b")]])).await.is_ok()
    })
    .await;
    assert!(recovered, "calls succeed again after Redis returns");
    assert!(
        eventually(Duration::from_secs(10), || async {
            healthcheck(&s).await == 200
        })
        .await
    );
}

#[tokio::test]
async fn failure_mode_allow_and_deny_answer_while_redis_is_down() {
    require!(Redis);
    let cfg = "domain: f\ndescriptors:\n  - {key: open, rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: allow}}\n  - {key: closed, rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: deny}}\n  - {key: plain, rate_limit: {unit: minute, requests_per_unit: 5}}\n";
    let mut r = RedisServer::start();
    let s = TestServer::start_on(
        &[("f.yaml", cfg)],
        &[("REDIS_RESPONSE_TIMEOUT", "200ms")],
        Some(&r),
    )
    .await;
    assert_eq!(
        overall(&s.rl("f", &[&[("closed", "x")]]).await),
        Code::Ok,
        "Redis up: counted normally"
    );
    r.kill();
    let resp = s.rl("f", &[&[("open", "x")]]).await;
    assert_eq!(
        (overall(&resp), st(&resp, 0)),
        (Code::Ok, (Code::Ok, None, 0))
    );
    let resp = s.rl("f", &[&[("open", "x")], &[("closed", "x")]]).await;
    assert_eq!(overall(&resp), Code::OverLimit);
    assert_eq!(st(&resp, 1), (Code::OverLimit, lim(5, "MINUTE"), 0));
    let e = s
        .call(request("f", &[&[("open", "x")], &[("plain", "x")]]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
}

// Single Redis only: the local cache exists to spare Redis round trips (it is Redis-only in Go
// too), and what shows it is the count in the Redis key.
#[tokio::test]
async fn s28_local_cache_skips_redis_for_keys_known_to_be_over() {
    require!(Redis);
    let r = RedisServer::start();
    let s = TestServer::start_on(
        &[("b.yaml", INT)],
        &[("LOCAL_CACHE_SIZE_IN_BYTES", "1000000")],
        Some(&r),
    )
    .await;
    twenty_then_over(&s).await;
    assert_eq!(
        r.cli(&["GET", "{5:basic|2:k2=1:R}:fw:60:1200"]),
        "21",
        "calls 22-25 never reached Redis"
    );
    // The cache entry ends with the window.
    s.advance(Duration::from_secs(60));
    assert_eq!(st(&s.rl("basic", &[&[("k2", "R")]]).await, 0).0, Code::Ok);
}

// Single Redis only: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT is a Redis option (as in Go), and the
// test reads the counters from the server's keys.
#[tokio::test]
async fn stop_increment_when_over_limit_spares_the_other_keys_atomically() {
    require!(Redis);
    let cfg = "domain: s\ndescriptors:\n  - {key: a, rate_limit: {unit: minute, requests_per_unit: 1}}\n  - {key: b, rate_limit: {unit: minute, requests_per_unit: 10}}\n";
    let r = RedisServer::start();
    let s = TestServer::start_on(
        &[("s.yaml", cfg)],
        &[("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true")],
        Some(&r),
    )
    .await;
    let both: &[&[(&str, &str)]] = &[&[("a", "x")], &[("b", "x")]];
    assert_eq!(overall(&s.rl("s", both).await), Code::Ok);
    let resp = s.rl("s", both).await;
    assert_eq!(overall(&resp), Code::OverLimit);
    assert_eq!(
        st(&resp, 1),
        (Code::Ok, lim(10, "MINUTE"), 9),
        "b was not charged"
    );
    assert_eq!(r.cli(&["GET", "{1:s|1:b=1:x}:fw:60:1200"]), "1");
    assert_eq!(r.cli(&["GET", "{1:s|1:a=1:x}:fw:60:1200"]), "2");
}

#[tokio::test]
async fn the_script_is_reloaded_after_redis_forgets_it() {
    require!(Redis);
    let r = RedisServer::start();
    let s = TestServer::start_on(&[("b.yaml", INT)], &[], Some(&r)).await;
    assert_eq!(st(&s.rl("basic", &[&[("k2", "a")]]).await, 0).2, 19);
    // A restart without persistence or a failover empties the script cache: EVALSHA then
    // answers NOSCRIPT and the script must be loaded again without failing the request.
    assert_eq!(r.cli(&["SCRIPT", "FLUSH"]), "OK");
    assert_eq!(st(&s.rl("basic", &[&[("k2", "a")]]).await, 0).2, 18);
}
