//! `POST /check` over real HTTP (one keep-alive client per server) on every store: 200 then 429
//! (whose body carries the error text and the quota) with every header checked against the manual clock, cost and `cost: 0`, per-client and
//! per-endpoint limits together, wildcard endpoints, and the standard headers on `/json`'s 429
//! and (behind the setting) on gRPC answers. Bad input is in `check_input.rs`.

use crate::support::*;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

/// Per client 5 a minute; the search endpoint 3 a minute; any export endpoint 2 an hour.
pub(super) const CFG: &str = r#"
domain: api
descriptors:
  - key: client_key
    rate_limit: {name: per-client, unit: minute, requests_per_unit: 5}
    descriptors:
      - key: endpoint
        value: /api/v1/search
        rate_limit: {name: search, unit: minute, requests_per_unit: 3}
      - key: endpoint
        value: /api/v1/export/*
        rate_limit: {name: export, unit: hour, requests_per_unit: 2}
"#;

/// One `/check` call: status, headers, JSON body.
async fn check(s: &TestServer, body: Value) -> (u16, HeaderMap, Value) {
    let c = s.check(&body).await;
    (c.status, c.headers, c.body)
}

fn h<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|v| v.to_str().unwrap())
}

on_every_store!(allowed_then_denied_with_every_header);
async fn allowed_then_denied_with_every_header(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    s.set_time(T0); // 1234: the minute window ends at 1260, 26 s away.
    let search = json!({"client_key": "user:42", "endpoint": "/api/v1/search"});
    for (remaining, client_left) in [(2, 4), (1, 3), (0, 2)] {
        let (status, hd, body) = check(&s, search.clone()).await;
        assert_eq!(status, 200);
        assert_eq!(
            body,
            json!({"allowed": true, "limit": 3, "remaining": remaining, "reset_at": 1260, "retry_after": 0, "delay_ms": 0})
        );
        assert_eq!(h(&hd, "x-ratelimit-limit"), Some("3"), "search is tighter");
        assert_eq!(
            h(&hd, "x-ratelimit-remaining"),
            Some(&*remaining.to_string())
        );
        assert_eq!(h(&hd, "x-ratelimit-reset"), Some("1260"));
        assert_eq!(h(&hd, "retry-after"), None);
        assert_eq!(
            h(&hd, "ratelimit-policy"),
            Some(r#""per-client";q=5;w=60, "search";q=3;w=60"#)
        );
        let state = format!(r#""per-client";r={client_left};t=26, "search";r={remaining};t=26"#);
        assert_eq!(h(&hd, "ratelimit"), Some(state.as_str()));
    }
    s.set_time(T0 + 10); // 16 s to the end of the window.
    let (status, hd, body) = check(&s, search.clone()).await;
    assert_eq!(status, 429);
    assert_eq!(
        body,
        json!({"allowed": false, "error": "Rate limit exceeded", "limit": 3, "remaining": 0, "reset_at": 1260, "retry_after": 16, "delay_ms": 0}),
        "a denial's body is ready to forward: the error, the quota and when to retry"
    );
    assert_eq!(h(&hd, "retry-after"), Some("16"));
    assert_eq!(h(&hd, "x-ratelimit-limit"), Some("3"));
    assert_eq!(h(&hd, "x-ratelimit-remaining"), Some("0"));
    assert_eq!(h(&hd, "x-ratelimit-reset"), Some("1260"));
    assert_eq!(h(&hd, "content-type"), Some("application/json"));

    // Without the endpoint only the per-client limit applies; it counted the denied hit too
    // (fixed windows count every hit, as the Go service does), so one is left.
    let (status, hd, body) = check(&s, json!({"client_key": "user:42"})).await;
    assert_eq!((status, &body["remaining"]), (200, &json!(0)));
    assert_eq!(h(&hd, "ratelimit-policy"), Some(r#""per-client";q=5;w=60"#));
    let (status, _, body) = check(&s, json!({"client_key": "user:42"})).await;
    assert_eq!((status, &body["retry_after"]), (429, &json!(16)));
    // Another client has its own counters.
    let (status, _, body) = check(&s, search.clone()).await;
    assert_eq!(status, 429);
    assert_eq!(body["allowed"], false);
    let (status, _, _) = check(&s, json!({"client_key": "user:43"})).await;
    assert_eq!(status, 200);

    // The next window starts fresh, reset a minute later.
    s.set_time(1260);
    let (status, hd, body) = check(&s, search).await;
    assert_eq!((status, &body["reset_at"]), (200, &json!(1320)));
    assert_eq!(h(&hd, "x-ratelimit-reset"), Some("1320"));
}

on_every_store!(cost_and_check_only);
async fn cost_and_check_only(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    s.set_time(T0);
    let call = |cost: u64| json!({"client_key": "batch", "cost": cost});
    let (status, _, body) = check(&s, call(0)).await;
    assert_eq!(
        (status, &body["remaining"]),
        (200, &json!(5)),
        "cost 0 counts nothing"
    );
    let (status, _, body) = check(&s, call(3)).await;
    assert_eq!((status, &body["remaining"]), (200, &json!(2)));
    let (status, _, body) = check(&s, call(0)).await;
    assert_eq!((status, &body["remaining"]), (200, &json!(2)), "still 2");
    let (status, hd, body) = check(&s, call(3)).await;
    assert_eq!(status, 429, "3 do not fit in 2");
    assert_eq!(
        (&body["retry_after"], h(&hd, "retry-after")),
        (&json!(26), Some("26"))
    );
    // An unknown domain is allowed, as for Envoy, with no limit to report.
    let (status, hd, body) = check(&s, json!({"client_key": "k", "domain": "nope"})).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"allowed": true, "limit": null, "remaining": null, "reset_at": null, "retry_after": 0, "delay_ms": 0})
    );
    assert_eq!(h(&hd, "x-ratelimit-limit"), None);
}

on_every_store!(wildcard_endpoints_and_details);
async fn wildcard_endpoints_and_details(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    s.set_time(T0); // The hour window ends at 3600.
    let export = |path: &str| json!({"client_key": "user:7", "endpoint": format!("/api/v1/export/{path}"), "details": true});
    let (status, _, body) = check(&s, export("csv")).await;
    assert_eq!(status, 200);
    assert_eq!(
        body["limits"],
        json!([
            {"name": "per-client", "limit": 5, "window": 60, "remaining": 4, "reset_after": 26, "retry_after": 0, "delay_ms": 0, "over_limit": false},
            {"name": "export", "limit": 2, "window": 3600, "remaining": 1, "reset_after": 2366, "retry_after": 0, "delay_ms": 0, "over_limit": false},
        ])
    );
    assert_eq!(
        (&body["remaining"], &body["reset_at"]),
        (&json!(1), &json!(3600))
    );
    // Each matched value has its own counter (no share_threshold).
    let (status, _, body) = check(&s, export("pdf")).await;
    assert_eq!((status, &body["remaining"]), (200, &json!(1)));
    check(&s, export("csv")).await;
    let (status, hd, body) = check(&s, export("csv")).await;
    assert_eq!(status, 429);
    assert_eq!(body["retry_after"], 2366, "the hour limit denied");
    assert_eq!(h(&hd, "retry-after"), Some("2366"));
    assert_eq!(h(&hd, "x-ratelimit-reset"), Some("3600"));
    // An endpoint no pattern matches: only the per-client limit (now at 4 of 5).
    let (status, hd, body) = check(&s, json!({"client_key": "user:7", "endpoint": "/other"})).await;
    assert_eq!((status, &body["remaining"]), (200, &json!(0)));
    assert_eq!(h(&hd, "ratelimit-policy"), Some(r#""per-client";q=5;w=60"#));
}

#[tokio::test]
async fn json_429_and_grpc_carry_the_standard_headers() {
    let env = [("LIMIT_RESPONSE_STANDARD_HEADERS_ENABLED", "true")];
    let s = TestServer::start(&[("api.yaml", CFG)], &env).await;
    s.set_time(T0);
    let body = r#"{"domain":"api","descriptors":[{"entries":[{"key":"client_key","value":"j"},{"key":"endpoint","value":"/api/v1/search"}]}]}"#;
    for _ in 0..3 {
        let r = s.post("/json", body).await;
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("ratelimit").is_none(), "a 200 stays Go's");
    }
    let r = s.post("/json", body).await;
    assert_eq!(r.status(), 429);
    let hd = r.headers();
    assert_eq!(h(hd, "retry-after"), Some("26"));
    assert_eq!(h(hd, "x-ratelimit-reset"), Some("1260"));
    assert_eq!(h(hd, "ratelimit"), Some(r#""search";r=0;t=26"#));

    let resp = s
        .rl(
            "api",
            &[&[("client_key", "j"), ("endpoint", "/api/v1/search")]],
        )
        .await;
    let added: Vec<(&str, &str)> = resp
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(
        added,
        [
            ("Retry-After", "26"),
            ("RateLimit-Policy", r#""search";q=3;w=60"#),
            ("RateLimit", r#""search";r=0;t=26"#),
        ]
    );
}

#[tokio::test]
async fn grpc_adds_nothing_by_default() {
    let s = TestServer::start(&[("api.yaml", CFG)], &[]).await;
    let resp = s.rl("api", &[&[("client_key", "j")]]).await;
    assert!(resp.response_headers_to_add.is_empty(), "Go behaviour");
}

#[tokio::test]
async fn the_readme_example_config_has_tiers_and_endpoint_limits() {
    let cfg = include_str!("../../../examples/check/api.yaml");
    let s = TestServer::start(&[("api.yaml", cfg)], &[]).await;
    s.set_time(T0);
    let (status, hd, _) = check(&s, json!({"client_key": "partner:acme"})).await;
    assert_eq!(status, 200);
    assert_eq!(h(&hd, "ratelimit-policy"), Some(r#""partner";q=1000;w=60"#));
    let search = json!({"client_key": "user:1", "endpoint": "/api/v1/search"});
    let (_, hd, _) = check(&s, search).await;
    assert_eq!(
        h(&hd, "ratelimit-policy"),
        Some(r#""per-client";q=100;w=60, "search";q=10;w=60"#)
    );
}

/// One descriptor with two limits (`rate_limits`): 3 a minute and an unnamed 10 an hour.
const SEVERAL: &str = r#"
domain: api
descriptors:
  - key: client_key
    rate_limits:
      - {name: per-minute, unit: minute, requests_per_unit: 3}
      - {unit: hour, requests_per_unit: 10}
"#;

#[tokio::test]
async fn details_and_the_policy_header_list_every_limit_of_a_descriptor_with_several() {
    let s = TestServer::start(&[("api.yaml", SEVERAL)], &[]).await;
    s.set_time(T0); // The minute ends at 1260 (26 s), the hour at 3600 (2366 s).
    let call = json!({"client_key": "k", "details": true});
    let (status, hd, body) = check(&s, call.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(
        body["limits"],
        json!([
            {"name": "per-minute", "limit": 3, "window": 60, "remaining": 2, "reset_after": 26, "retry_after": 0, "delay_ms": 0, "over_limit": false},
            {"name": "limit-0.1", "limit": 10, "window": 3600, "remaining": 9, "reset_after": 2366, "retry_after": 0, "delay_ms": 0, "over_limit": false},
        ]),
        "{body}"
    );
    assert_eq!(
        h(&hd, "ratelimit-policy"),
        Some(r#""per-minute";q=3;w=60, "limit-0.1";q=10;w=3600"#)
    );
    assert_eq!(
        h(&hd, "ratelimit"),
        Some(r#""per-minute";r=2;t=26, "limit-0.1";r=9;t=2366"#)
    );
    check(&s, call.clone()).await;
    check(&s, call.clone()).await;
    let (status, _, body) = check(&s, call).await;
    assert_eq!(status, 429);
    assert_eq!(body["limits"][0]["over_limit"], true, "{body}");
    assert_eq!(body["limits"][1]["remaining"], 6, "{body}");
    assert_eq!(
        (&body["limit"], &body["retry_after"]),
        (&json!(3), &json!(26))
    );
}
