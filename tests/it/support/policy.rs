//! Helpers for the policy database tests: a service with a SQLite data directory and an admin
//! token, and one call of the management API over real HTTP (`TestServer::admin` with the token).

use reqwest::Method;
use serde_json::Value;

use super::TestServer;

/// The admin token of [`start`].
pub(crate) const TOKEN: &str = "test-admin-token";

/// CFG: domain `api`, every `client_key` 2 per minute.
pub(crate) const CFG_API: &str = include_str!("../../fixtures/config/api-2-per-minute.yaml");

/// A service on `CFG_API` whose policy database lives in `data_dir`, with `ADMIN_TOKEN`, plus `env`.
pub(crate) async fn start(data_dir: &std::path::Path, env: &[(&str, &str)]) -> TestServer {
    let dir = data_dir.display().to_string();
    let mut all = vec![
        ("POLICY_ENABLED", "true"),
        ("RATELIMITD_DATA_DIR", dir.as_str()),
        ("ADMIN_TOKEN", TOKEN),
    ];
    all.extend_from_slice(env);
    TestServer::start(&[("api.yaml", CFG_API)], &all).await
}

/// One admin API call with `token` (none: no Authorization header); the status and the JSON body
/// (`Value::Null` when the body is empty).
pub(crate) async fn call(
    s: &TestServer,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    call_url(&s.http, method, &s.admin_url(path), token, body).await
}

impl TestServer {
    /// One admin API call authenticated with [`TOKEN`] (the token [`start`] configures): the
    /// status and the JSON body. [`call`] sends another token, or none.
    pub(crate) async fn admin(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        call(self, method, path, Some(TOKEN), body).await
    }
}

/// As [`call`], on the admin API at `url` (a spawned binary's).
pub(crate) async fn call_url(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = http.request(method, url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.body(b.to_string());
    }
    let resp = req.send().await.expect("admin API answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    (status, json)
}

/// An override body for `client_key=value`.
pub(crate) fn override_body(value: &str, rpu: u32, valid_until: &str) -> Value {
    serde_json::json!({
        "domain": "api",
        "descriptor": [{"key": "client_key", "value": value}],
        "requests_per_unit": rpu,
        "unit": "minute",
        "valid_until": valid_until,
        "reason": "launch week",
    })
}

/// Creates an override with [`TOKEN`] and returns its id.
pub(crate) async fn create(s: &TestServer, value: &str, rpu: u32, valid_until: &str) -> String {
    let body = override_body(value, rpu, valid_until);
    let (status, json) = s.admin(Method::POST, "/v1/overrides", Some(body)).await;
    assert_eq!(status, 201, "{json}");
    json["id"].as_str().expect("an id").to_string()
}
