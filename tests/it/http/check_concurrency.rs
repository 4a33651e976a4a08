//! `POST /check` with a concurrency limit over real HTTP on every store: an acquisition answers
//! with its holder id (a made-up one, or the caller's), a full limit answers 429 with
//! `Retry-After: 1`, `"release": true` gives the slot back and the next caller is admitted; a
//! release takes nothing from the rate limit beside it, and bad holder fields are 400. The
//! `RateLimit-Policy` item of a concurrency limit counts requests in flight, with no window.

use crate::support::*;
use serde_json::{Value, json};

/// Two requests in flight per client, leases of a minute; each endpoint 100 requests a minute.
const CFG: &str = r#"
domain: api
descriptors:
  - key: client_key
    rate_limit: {name: in-flight, unit: minute, requests_per_unit: 2, algorithm: concurrency}
    descriptors:
      - key: endpoint
        rate_limit: {name: per-minute, unit: minute, requests_per_unit: 100, algorithm: token_bucket}
"#;

async fn check(s: &TestServer, body: Value) -> (u16, Option<String>, Value) {
    let c = s.check(&body).await;
    let retry = c
        .headers
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (c.status, retry, c.body)
}

on_every_store!(acquire_refuse_release_admit);
async fn acquire_refuse_release_admit(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    let take = json!({"client_key": "c1", "endpoint": "/e", "details": true});
    let (status, _, first) = check(&s, take.clone()).await;
    assert_eq!(status, 200);
    let made_up = first["holder"]
        .as_str()
        .expect("the answer names the holder")
        .to_string();
    assert_eq!(made_up.len(), 32, "{first}");
    let (status, _, second) = check(
        &s,
        json!({"client_key": "c1", "endpoint": "/e", "holder": "mine"}),
    )
    .await;
    assert_eq!((status, &second["holder"]), (200, &json!("mine")));
    let (status, retry, refused) = check(&s, take.clone()).await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(
        retry.as_deref(),
        Some("1"),
        "a slot frees at a release, not at a window"
    );
    assert_eq!(refused["limits"][0]["remaining"], 0);
    // Releasing the caller-named holder twice frees one slot.
    for _ in 0..2 {
        let (status, _, r) = check(
            &s,
            json!({"client_key": "c1", "endpoint": "/e", "holder": "mine", "release": true}),
        )
        .await;
        assert_eq!(status, 200, "{r}");
    }
    let (status, _, r) = check(
        &s,
        json!({"client_key": "c1", "endpoint": "/e", "holder": "next", "details": true}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["limits"][0]["remaining"], 0, "{r}");
    assert_eq!(
        r["limits"][1]["remaining"], 96,
        "the four requests counted against the endpoint's own descriptor (a refusal by another descriptor undoes nothing there, as in Go); the releases took nothing: {r}"
    );
    assert_eq!(check(&s, take.clone()).await.0, 429);
    let release = json!({"client_key": "c1", "endpoint": "/e", "holder": made_up, "release": true});
    assert_eq!(check(&s, release).await.0, 200);
    assert_eq!(check(&s, take).await.0, 200);
}

#[tokio::test]
async fn bad_holder_fields_are_refused_with_their_name() {
    let s = TestServer::start(&[("api.yaml", CFG)], &[]).await;
    let long = "x".repeat(129);
    for (body, field) in [
        (json!({"client_key": "c", "release": true}), "holder"),
        (json!({"client_key": "c", "holder": ""}), "holder"),
        (json!({"client_key": "c", "holder": 7}), "holder"),
        (json!({"client_key": "c", "holder": long}), "holder"),
        (
            json!({"client_key": "c", "holder": "h", "release": "yes"}),
            "release",
        ),
    ] {
        let (status, _, r) = check(&s, body.clone()).await;
        assert_eq!(status, 400, "{body}");
        let message = r["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{field}: ")),
            "{body}: {message}"
        );
    }
    // Nothing was taken by the refused bodies.
    for _ in 0..2 {
        assert_eq!(check(&s, json!({"client_key": "c"})).await.0, 200);
    }
}

#[tokio::test]
async fn the_policy_header_gives_a_concurrency_limit_slots_in_flight_not_a_window() {
    let s = TestServer::start(&[("api.yaml", CFG)], &[]).await;
    let c = s
        .check(&json!({"client_key": "c9", "endpoint": "/e"}))
        .await;
    assert_eq!(c.status, 200, "{}", c.body);
    assert_eq!(
        c.header("ratelimit-policy"),
        Some(r#""in-flight";q=2;qu="concurrent-requests", "per-minute";q=100;w=60"#),
        "the lease timeout is no window a client could read as a rate"
    );
}
