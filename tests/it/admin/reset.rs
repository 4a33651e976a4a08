//! `POST /v1/counters/reset` through the real service: a descriptor's counters are forgotten on
//! every store and for every algorithm (with the local over-limit cache and a lease on), the
//! next request starts fresh while other clients keep their counts; bad input changes nothing
//! and says why; a prefix reset on Redis and Redis Cluster removes keys a bounded number at a
//! time and says when more remain; memcached resets descriptors and refuses prefixes naming why;
//! `ratelimitd reset` does the same from the command line.

use std::process::Command;

use crate::support::memcached::Memcached;
use crate::support::require;
use crate::support::*;
use serde_json::{Value, json};

const TOKEN: &str = "reset-token";

/// One limit of 3 an hour per algorithm, and a leased fixed window of 10. Hours, not minutes: the
/// manual clock stands still, but Redis and memcached expire keys in real time (a minute window
/// at T0 has 26 s left), and on a busy machine a scenario can take longer than that.
fn cfg() -> String {
    each_algorithm(
        "r",
        3,
        "hour",
        "  - {key: fl, rate_limit: {unit: hour, requests_per_unit: 10, lease: 3}}\n",
    )
}

/// Posts `body` to the reset endpoint with `token`: the status and the JSON answer.
async fn reset(s: &TestServer, token: Option<&str>, body: Value) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(s.admin_url("/v1/counters/reset"))
        .body(body.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.expect("the admin listener answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("a JSON answer"))
}

/// (code, remaining) of one hit on `key`=`value`.
async fn hit(s: &TestServer, key: &str, value: &str) -> (Code, u32) {
    let r = s.rl("r", &[&[(key, value)]]).await;
    let (code, _, remaining) = st(&r, 0);
    (code, remaining)
}

fn descriptor(key: &str, value: &str) -> Value {
    json!({"domain": "r", "descriptor": [{"key": key, "value": value}]})
}

const ENV: [(&str, &str); 2] = [
    ("ADMIN_TOKEN", TOKEN),
    ("LOCAL_CACHE_SIZE_IN_BYTES", "1048576"),
];

on_every_store!(a_descriptor_reset_starts_every_algorithm_fresh);
async fn a_descriptor_reset_starts_every_algorithm_fresh(store: StoreKind) {
    let s = TestServer::start_with_store(&[("r.yaml", &cfg())], &ENV, store).await;
    for key in ALGORITHM_KEYS {
        for _ in 0..3 {
            assert_eq!(hit(&s, key, "alice").await.0, Code::Ok, "{key}");
            hit(&s, key, "bob").await;
        }
        // Twice over: the second answer may come from the local over-limit cache.
        assert_eq!(hit(&s, key, "alice").await.0, Code::OverLimit, "{key}");
        assert_eq!(hit(&s, key, "alice").await.0, Code::OverLimit, "{key}");
        let (status, v) = reset(&s, Some(TOKEN), descriptor(key, "alice")).await;
        assert_eq!(status, 200, "{key}: {v}");
        assert_eq!(v["reset"], 1, "{key}: {v}");
        assert_eq!(v["keys"].as_array().map(Vec::len), Some(1), "{v}");
        assert_eq!(
            hit(&s, key, "alice").await,
            (Code::Ok, 2),
            "{key} starts fresh"
        );
        // Another client keeps its count.
        assert_eq!(hit(&s, key, "bob").await.0, Code::OverLimit, "{key}");
        // A client never counted: nothing to remove.
        let (_, v) = reset(&s, Some(TOKEN), descriptor(key, "carol")).await;
        assert_eq!(v["reset"], 0, "{key}: {v}");
    }
    // A leased counter: the lease this instance holds goes with the counter (on Redis the first
    // hit reserves more than it uses; a kept lease would go on from the old count).
    assert_eq!(hit(&s, "fl", "alice").await, (Code::Ok, 9));
    assert_eq!(hit(&s, "fl", "alice").await, (Code::Ok, 8));
    let (status, v) = reset(&s, Some(TOKEN), descriptor("fl", "alice")).await;
    assert_eq!((status, &v["reset"]), (200, &json!(1)), "{v}");
    assert_eq!(hit(&s, "fl", "alice").await, (Code::Ok, 9));
}

#[tokio::test]
async fn bad_input_is_refused_with_why_and_changes_nothing() {
    let s = TestServer::start(&[("r.yaml", &cfg())], &ENV).await;
    for _ in 0..4 {
        hit(&s, "fw", "alice").await;
    }
    let cases = [
        (
            Some(TOKEN),
            json!({"domain": "nope", "descriptor": [{"key": "fw", "value": "alice"}]}),
            404,
            "no domain 'nope'",
        ),
        (
            Some(TOKEN),
            json!({"domain": "r", "descriptor": []}),
            422,
            "expected 1 to",
        ),
        (
            Some(TOKEN),
            json!({"domain": "r", "descriptor": [{"key": "zz", "value": "alice"}]}),
            422,
            "no limit of domain 'r'",
        ),
        (
            Some(TOKEN),
            json!({"domain": "r", "prefix": "{1:x|"}),
            422,
            "outside domain 'r'",
        ),
        (
            Some(TOKEN),
            json!({"domain": "r"}),
            422,
            "either descriptor or prefix",
        ),
        (
            Some(TOKEN),
            json!({"domain": "r", "descriptor": [], "prefix": "{1:r|"}),
            422,
            "not both",
        ),
        (
            Some(TOKEN),
            json!({"domain": "r", "prefix": "{1:r|", "max_keys": 0}),
            422,
            "max_keys",
        ),
        (
            Some(TOKEN),
            json!({"domain": "r", "descriptors": []}),
            400,
            "unknown field",
        ),
        (
            Some("wrong"),
            descriptor("fw", "alice"),
            401,
            "bearer token",
        ),
        (None, descriptor("fw", "alice"), 401, "bearer token"),
    ];
    for (token, body, want, says) in cases {
        let (status, v) = reset(&s, token, body.clone()).await;
        assert_eq!(status, want, "{body}: {v}");
        let msg = v["error"].as_str().unwrap_or_default();
        assert!(msg.contains(says), "{body}: {v}");
    }
    // The memory store cannot find keys by prefix, and says so.
    let (status, v) = reset(&s, Some(TOKEN), json!({"domain": "r", "prefix": "{1:r|"})).await;
    assert_eq!(status, 409, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("hash of each key"),
        "{v}"
    );
    // None of it touched alice's counter.
    assert_eq!(hit(&s, "fw", "alice").await.0, Code::OverLimit);
}

/// Thirty clients over their limit, reset seven keys at a time by prefix; other keys stay.
async fn prefix_reset_in_bounded_steps(store: StoreKind) {
    let s = TestServer::start_with_store(&[("r.yaml", &cfg())], &ENV, store).await;
    let users: Vec<String> = (0..30).map(|i| format!("u{i:02}")).collect();
    for u in &users {
        for _ in 0..4 {
            hit(&s, "fw", u).await;
        }
        assert_eq!(hit(&s, "fw", u).await.0, Code::OverLimit);
    }
    for _ in 0..4 {
        hit(&s, "tb", "u00").await;
    }
    // The prefix of every `fw` key of the domain, read off a descriptor reset's own answer.
    let (_, v) = reset(&s, Some(TOKEN), descriptor("fw", "zz-none")).await;
    let key = v["keys"][0].as_str().unwrap().to_string();
    let prefix = &key[..key.find("|2:fw=").unwrap() + "|2:fw=".len()];
    let (mut total, mut calls) = (0, 0);
    loop {
        let body = json!({"domain": "r", "prefix": prefix, "max_keys": 7});
        let (status, v) = reset(&s, Some(TOKEN), body).await;
        assert_eq!(status, 200, "{v}");
        let n = v["reset"].as_u64().unwrap();
        assert!(n <= 7, "{v}");
        total += n;
        calls += 1;
        if v["more"] == false {
            break;
        }
        assert!(calls < 20, "more stays true: {v}");
    }
    assert_eq!(total, 30);
    assert!(calls >= 5, "at most seven keys a call: {calls} calls");
    for u in &users {
        assert_eq!(hit(&s, "fw", u).await, (Code::Ok, 2), "{u}");
    }
    assert_eq!(
        hit(&s, "tb", "u00").await.0,
        Code::OverLimit,
        "outside the prefix"
    );
}

#[tokio::test]
async fn prefix_reset_on_redis() {
    require!(Redis);
    prefix_reset_in_bounded_steps(StoreKind::Redis).await;
}

#[tokio::test]
async fn prefix_reset_on_redis_cluster_scans_every_master() {
    require!(Redis);
    prefix_reset_in_bounded_steps(StoreKind::Cluster).await;
}

#[tokio::test]
async fn memcached_resets_descriptors_and_refuses_prefixes() {
    require!(Memcached);
    let m = Memcached::start();
    let mut env = m.env(&[("CACHE_KEY_PREFIX", "reset_")]);
    env.extend(ENV);
    let cfg =
        "domain: r\ndescriptors:\n  - {key: fw, rate_limit: {unit: hour, requests_per_unit: 3}}\n";
    let s = TestServer::start(&[("r.yaml", cfg)], &env).await;
    for _ in 0..5 {
        hit(&s, "fw", "alice").await;
    }
    assert_eq!(hit(&s, "fw", "alice").await.0, Code::OverLimit);
    let (status, v) = reset(
        &s,
        Some(TOKEN),
        json!({"domain": "r", "prefix": "reset_{1:r|"}),
    )
    .await;
    assert_eq!(status, 409, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("memcached cannot list"),
        "{v}"
    );
    assert_eq!(
        hit(&s, "fw", "alice").await.0,
        Code::OverLimit,
        "nothing changed"
    );
    let (status, v) = reset(&s, Some(TOKEN), descriptor("fw", "alice")).await;
    assert_eq!((status, &v["reset"]), (200, &json!(1)), "{v}");
    assert_eq!(hit(&s, "fw", "alice").await, (Code::Ok, 2));
}

#[tokio::test]
async fn the_reset_command_resets_a_descriptor() {
    let s = TestServer::start(&[("r.yaml", &cfg())], &ENV).await;
    for _ in 0..4 {
        hit(&s, "fw", "alice").await;
    }
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let url = s.admin_url("");
    let token_file = token_file.display().to_string();
    let args: Vec<String> = [
        "reset",
        "--url",
        url.as_str(),
        "--token-file",
        token_file.as_str(),
        "--domain",
        "r",
        "--descriptor",
        "fw=alice",
    ]
    .map(str::to_string)
    .into();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
            .args(args)
            .env_remove("ADMIN_TOKEN")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("descriptor fw=alice: 1 key(s) reset"),
        "{stdout}"
    );
    assert_eq!(hit(&s, "fw", "alice").await, (Code::Ok, 2));
    // A descriptor that is not key=value is refused before anything is sent.
    let out = Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
        .args([
            "reset",
            "--url",
            "http://127.0.0.1:1",
            "--domain",
            "r",
            "--descriptor",
            "alice",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("key=value"));
}
