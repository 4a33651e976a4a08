//! `POST /check` from a test: one client for every test that calls it, giving the status, the
//! headers and the JSON body together.

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::TestServer;

/// One `/check` answer.
#[derive(Debug)]
pub(crate) struct Checked {
    /// The HTTP status.
    pub status: u16,
    /// Every response header.
    pub headers: HeaderMap,
    /// The JSON body (`Value::Null` when it is empty).
    pub body: Value,
}

impl Checked {
    /// Header `name` as text, if present.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// `Retry-After`, if present.
    pub(crate) fn retry_after(&self) -> Option<String> {
        self.header("retry-after").map(str::to_owned)
    }

    /// Status, `Retry-After` and body, for tests that assert on those three.
    pub(crate) fn answer(self) -> (u16, Option<String>, Value) {
        let retry = self.retry_after();
        (self.status, retry, self.body)
    }
}

impl TestServer {
    /// `POST /check` with the JSON `body`.
    pub(crate) async fn check(&self, body: &Value) -> Checked {
        self.check_raw(body.to_string()).await
    }

    /// `POST /check` with `body` as given (which may be anything but JSON), sent as
    /// `application/json`; panics when the port does not answer or the answer is not JSON.
    pub(crate) async fn check_raw(&self, body: impl Into<reqwest::Body>) -> Checked {
        let r = self
            .http
            .post(self.http_url("/check"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("the HTTP port answers");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
        };
        Checked {
            status,
            headers,
            body,
        }
    }
}
