//! `/json`, `/healthcheck`, 404s, gRPC health and the debug port, over real HTTP on 127.0.0.1.

use crate::support::*;
use serde_json::Value;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

async fn health_client(s: &TestServer) -> HealthClient<tonic::transport::Channel> {
    let url = format!("http://{}", s.running().grpc_addr);
    HealthClient::new(
        tonic::transport::Channel::from_shared(url)
            .unwrap()
            .connect()
            .await
            .unwrap(),
    )
}

const BODY: &str =
    r#"{"domain":"basic","descriptors":[{"entries":[{"key":"one_per_minute","value":"x"}]}]}"#;

#[tokio::test]
async fn s57_json_answers_200_then_429_with_protojson() {
    let s = TestServer::start(&[("basic.yaml", CFG_INT_BASIC)], &[]).await;
    let r = s.post("/json", BODY).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["overallCode"], "OK");
    let status = &v["statuses"][0];
    assert_eq!(status["code"], "OK");
    assert_eq!(status["currentLimit"]["requestsPerUnit"], 1);
    assert_eq!(status["currentLimit"]["unit"], "MINUTE");
    assert_eq!(status["durationUntilReset"], "26s");
    assert!(status.get("limitRemaining").is_none(), "0 is omitted: {v}");
    assert!(
        status["currentLimit"].get("name").is_none(),
        "empty name is omitted: {v}"
    );

    let r = s
        .http
        .get(s.http_url("/json"))
        .body(BODY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429, "any method is accepted");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["overallCode"], "OVER_LIMIT");
    assert_eq!(v["statuses"][0]["code"], "OVER_LIMIT");
}

#[tokio::test]
async fn s58_and_s52_bad_bodies_and_service_errors_are_400_bad_request() {
    let s = TestServer::start(&[("basic.yaml", CFG_INT_BASIC)], &[]).await;
    for body in [
        "",
        "}",
        r#"{"domain":"x","bogus":1}"#,
        r#"{"domain":"","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}"#,
        r#"{"domain":"basic"}"#,
    ] {
        let r = s.post("/json", body).await;
        assert_eq!(r.status(), 400, "body {body:?}");
        assert_eq!(r.headers()["content-type"], "text/plain; charset=utf-8");
        assert_eq!(r.text().await.unwrap(), "Bad Request\n");
    }
}

#[tokio::test]
async fn json_accepts_snake_case_overrides_and_hits() {
    let s = TestServer::start(&[("basic.yaml", CFG_INT_BASIC)], &[]).await;
    let body = r#"{"domain":"basic","hits_addend":2,"descriptors":[{"entries":[{"key":"key1","value":"v"}],"limit":{"requests_per_unit":"5","unit":"HOUR"}}]}"#;
    let v: Value = s.post("/json", body).await.json().await.unwrap();
    assert_eq!(v["statuses"][0]["currentLimit"]["unit"], "HOUR");
    assert_eq!(v["statuses"][0]["limitRemaining"], 3);
}

#[tokio::test]
async fn s59_healthcheck_and_grpc_health_are_serving() {
    let s = TestServer::start(&[("basic.yaml", CFG_INT_BASIC)], &[]).await;
    let r = s
        .http
        .post(s.http_url("/healthcheck"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "OK");
    let mut h = health_client(&s).await;
    for service in ["ratelimit", ""] {
        let resp = h
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            resp.status,
            ServingStatus::Serving as i32,
            "service {service:?}"
        );
    }
}

#[tokio::test]
async fn healthy_with_at_least_one_config_requires_a_domain() {
    let s = TestServer::start(&[], &[("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")]).await;
    let r = s.http.get(s.http_url("/healthcheck")).send().await.unwrap();
    assert_eq!(r.status(), 500);
    let mut h = health_client(&s).await;
    let resp = h
        .check(HealthCheckRequest {
            service: "ratelimit".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.status, ServingStatus::NotServing as i32);
}

#[tokio::test]
async fn s60_shutdown_turns_health_off_before_stopping() {
    let s = TestServer::start(&[("basic.yaml", CFG_INT_BASIC)], &[]).await;
    let health = s.running().health.clone();
    assert!(health.is_healthy());
    s.shutdown().await;
    assert!(!health.is_healthy());
}

#[tokio::test]
async fn unknown_paths_are_404_like_go() {
    let s = TestServer::start(&[("basic.yaml", CFG_INT_BASIC)], &[]).await;
    let r = s.http.get(s.http_url("/nope")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.text().await.unwrap(), "404 page not found\n");
}

#[tokio::test]
async fn rlconfig_lists_every_limit_and_debug_index_lists_endpoints() {
    let s = TestServer::start(&[("basic.yaml", CFG_INT_BASIC)], &[]).await;
    let text = body(s.http.get(s.debug_url("/rlconfig"))).await;
    // Limit lines in the Go format; `# ` status lines (version, counters) follow them.
    let (status, limits): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.starts_with("# "));
    assert!(status.contains(&"# version: 1"), "{text}");
    let mut lines = limits;
    lines.sort_unstable();
    assert_eq!(
        lines,
        vec![
            "basic.key1: unit=SECOND requests_per_unit=50, shadow_mode: false, quota_mode: false",
            "basic.one_per_minute: unit=MINUTE requests_per_unit=1, shadow_mode: false, quota_mode: false",
        ]
    );
    let index = body(s.http.get(s.debug_url("/"))).await;
    assert!(
        index.contains("/rlconfig: print out the currently loaded configuration"),
        "{index}"
    );
}

#[tokio::test]
async fn rlconfig_escapes_a_line_break_in_a_configured_value() {
    let cfg = r#"
domain: basic
descriptors:
  - key: k
    value: "a\n# version: 99"
    rate_limit: {unit: second, requests_per_unit: 5}
"#;
    let s = TestServer::start(&[("basic.yaml", cfg)], &[]).await;
    let text = body(s.http.get(s.debug_url("/rlconfig"))).await;
    let versions: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("# version"))
        .collect();
    assert_eq!(versions, vec!["# version: 1"], "no forged line: {text}");
    assert!(
        text.starts_with("basic.k_a\\u{a}# version: 99: unit=SECOND requests_per_unit=5, "),
        "{text}"
    );
}

#[tokio::test]
async fn test_clock_endpoint_moves_the_manual_clock() {
    let s = TestServer::start(&[("basic.yaml", CFG_INT_BASIC)], &[]).await;
    let t = body(s.http.post(s.debug_url("/test/clock?set=2000"))).await;
    assert_eq!(t.trim(), "2000000000");
    let t = body(s.http.post(s.debug_url("/test/clock?advance_ms=1500"))).await;
    assert_eq!(t.trim(), "2001500000");
}

/// Sends `req` and returns the response body.
async fn body(req: reqwest::RequestBuilder) -> String {
    req.send().await.unwrap().text().await.unwrap()
}
