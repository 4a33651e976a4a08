//! The real binary with a SQLite policy database, an admin token and the manual clock, on the
//! `api` domain (every `client_key` 3 an hour, `per_client`), with the calls the explain and
//! override tests make: the admin API, `/check` and the clock.

use serde_json::{Value, json};

use super::T0;
use super::policy::{TOKEN, call_url};
use super::process::{Spawned, spawn};
use reqwest::Method;

/// The configuration: `per_client`, 3 an hour.
pub(crate) const CFG: &str = r#"
domain: api
descriptors:
  - key: client_key
    rate_limit: {name: per_client, unit: hour, requests_per_unit: 3}
"#;

/// A running binary and its temp dirs.
pub(crate) struct Service {
    /// The process.
    pub bin: Spawned,
    /// A client for it.
    pub http: reqwest::Client,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

/// Starts the binary.
pub(crate) fn start() -> Service {
    start_with(CFG)
}

/// Starts the binary on the `api` domain's configuration `cfg`.
pub(crate) fn start_with(cfg: &str) -> Service {
    let (config, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(config.path().join("api.yaml"), cfg).unwrap();
    let env: Vec<(String, String)> = [
        ("RATELIMITD_CONFIG", config.path().display().to_string()),
        ("RATELIMITD_TEST_MANUAL_CLOCK", T0.to_string()),
        ("POLICY_ENABLED", "true".into()),
        ("RATELIMITD_DATA_DIR", data.path().display().to_string()),
        ("ADMIN_TOKEN", TOKEN.into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Service {
        bin: spawn(&env),
        http: reqwest::Client::new(),
        _dirs: (config, data),
    }
}

impl Service {
    /// One admin API call: status and JSON body.
    pub(crate) async fn admin(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let url = format!("http://{}{path}", self.bin.admin_addr);
        call_url(&self.http, method, &url, token, body).await
    }

    /// `POST /v1/explain` for `client_key=value` (200 asserted).
    pub(crate) async fn explain(&self, value: &str) -> Value {
        let body = json!({"domain": "api", "descriptors": [{"entries": [{"key": "client_key", "value": value}]}]});
        let (status, v) = self
            .admin(Method::POST, "/v1/explain", Some(TOKEN), Some(body))
            .await;
        assert_eq!(status, 200, "{v}");
        v
    }

    /// `POST /v1/explain` of `body`, which the service must refuse (400): its error message.
    pub(crate) async fn explain_refused(&self, body: Value) -> String {
        let (status, v) = self
            .admin(Method::POST, "/v1/explain", Some(TOKEN), Some(body))
            .await;
        assert_eq!(status, 400, "{v}");
        v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{v}"))
            .to_string()
    }

    /// One `/check` for `client_key=value`: (status, remaining).
    pub(crate) async fn check(&self, value: &str) -> (u16, Value) {
        let url = format!("http://{}/check", self.bin.http_addr);
        let resp = self
            .http
            .post(url)
            .body(json!({"client_key": value}).to_string())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap();
        (status, body["remaining"].clone())
    }

    /// Moves the manual clock on by `ms`.
    pub(crate) async fn advance(&self, ms: u64) {
        let url = format!("http://{}/test/clock?advance_ms={ms}", self.bin.debug_addr);
        assert!(
            self.http
                .get(url)
                .send()
                .await
                .unwrap()
                .status()
                .is_success()
        );
    }
}
