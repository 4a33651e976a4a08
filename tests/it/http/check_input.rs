//! `POST /check` refusals over real HTTP: every bad input, an oversized body included, is a 400
//! naming the field; nothing is counted for it, and a request the store cannot answer is a 503
//! with `Retry-After`.

use crate::support::policy::CFG_API;
use crate::support::redis::RedisServer;
use crate::support::*;
use serde_json::{Value, json};

async fn post(s: &TestServer, body: impl Into<reqwest::Body>) -> (u16, Option<String>, Value) {
    s.check_raw(body).await.answer()
}

#[tokio::test]
async fn bad_input_is_400_naming_the_field_and_counts_nothing() {
    let s = TestServer::start(&[("api.yaml", CFG_API)], &[("CHECK_MAX_BODY_BYTES", "256")]).await;
    s.set_time(T0);
    let cases: &[(&str, &str, &str)] = &[
        ("{", "malformed_json", "not valid JSON"),
        ("", "malformed_json", "not valid JSON"),
        ("[]", "malformed_json", "must be a JSON object"),
        (
            r#"{"endpoint":"/x"}"#,
            "invalid_field",
            "client_key: required",
        ),
        (
            r#"{"client_key":""}"#,
            "invalid_field",
            "client_key: must not be empty",
        ),
        (
            r#"{"client_key":7}"#,
            "invalid_field",
            "client_key: must be a string",
        ),
        (
            r#"{"client_key":"a","cost":-1}"#,
            "invalid_field",
            "cost: must not be negative",
        ),
        (
            r#"{"client_key":"a","cost":0.5}"#,
            "invalid_field",
            "cost: must be a whole number",
        ),
        (
            r#"{"client_key":"a","cost":1e12}"#,
            "invalid_field",
            "cost: must be at most",
        ),
        (
            r#"{"client_key":"a","cost":"2"}"#,
            "invalid_field",
            "cost: must be a number",
        ),
        (
            r#"{"client_key":"a","endpoint":3}"#,
            "invalid_field",
            "endpoint: must be a string",
        ),
        (
            r#"{"client_key":"a","domain":""}"#,
            "invalid_field",
            "domain: must not be empty",
        ),
        (
            r#"{"client_key":"a","limit":1}"#,
            "invalid_field",
            "limit: unknown field",
        ),
        (
            r#"{"client_key":"a","descriptors":[{"x":1}]}"#,
            "invalid_field",
            "descriptors:",
        ),
        (
            r#"{"client_key":"a","descriptors":[{"limit":{"unit":0}}]}"#,
            "invalid_field",
            "invalid unit",
        ),
    ];
    for (body, error, message) in cases {
        let (status, _, v) = post(&s, *body).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert_eq!(v["error"], *error, "{body}: {v}");
        let text = v["message"].as_str().unwrap();
        assert!(text.contains(message), "{body}: {text:?} lacks {message:?}");
    }
    let big = format!(r#"{{"client_key":"{}"}}"#, "k".repeat(300));
    let (status, _, v) = post(&s, big).await;
    assert_eq!((status, &v["error"]), (400, &json!("body_too_large")));
    // None of the refused requests was counted: the client "a" still has its whole limit.
    let (status, _, v) = post(&s, r#"{"client_key":"a"}"#).await;
    assert_eq!((status, &v["remaining"]), (200, &json!(1)));
    // Only POST.
    let r = s.http.get(s.http_url("/check")).send().await.unwrap();
    assert_eq!(r.status(), 405);
}

#[tokio::test]
async fn store_down_is_503_with_retry_after() {
    require!(Redis);
    let mut r = RedisServer::start();
    let env = [("REDIS_RESPONSE_TIMEOUT", "200ms")];
    let s = TestServer::start_on(&[("api.yaml", CFG_API)], &env, Some(&r)).await;
    let (status, _, _) = post(&s, r#"{"client_key":"a"}"#).await;
    assert_eq!(status, 200);
    r.kill();
    let (status, retry, v) = post(&s, r#"{"client_key":"a"}"#).await;
    assert_eq!((status, retry.as_deref()), (503, Some("1")), "{v}");
    assert_eq!(v["error"], "unavailable");
}
