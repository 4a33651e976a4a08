//! The HTTP client for `POST /check`: one pooled HTTP/1.1 connection set (kept alive and reused
//! across calls and clones), a deadline on every call covering connect, send and the whole answer,
//! and a cap on the answer's size so a broken or hostile server cannot make it buffer without end.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client as Pool;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::answer;
use crate::check::{CheckRequest, Decision};
use crate::error::Error;

/// The largest usage one report may carry (`POST /check`'s `cost` is at most this).
pub const MAX_USAGE: u64 = 1_000_000_000;

/// Default deadline of one check: ratelimitd answers in well under a millisecond on loopback, so a
/// check still unanswered after this is treated as ratelimitd being unavailable.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);

/// Largest answer read (ratelimitd's are a few hundred bytes, `details` included).
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 64 * 1024;

/// An async client for ratelimitd's `POST /check`. Cheap to clone: clones share the connection pool.
#[derive(Clone, Debug)]
pub struct Client {
    pool: Pool<HttpConnector, Full<Bytes>>,
    check_uri: Uri,
    timeout: Duration,
    max_answer_bytes: usize,
}

/// Settings of a [`Client`], from [`Client::builder`].
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    base_url: String,
    timeout: Duration,
    connect_timeout: Option<Duration>,
    pool_idle_timeout: Duration,
    max_answer_bytes: usize,
}

impl Client {
    /// A client for the ratelimitd HTTP listener at `base_url` (e.g. `http://127.0.0.1:8080`) with
    /// the default settings.
    pub fn new(base_url: &str) -> Result<Client, Error> {
        Client::builder(base_url).build()
    }

    /// Settings for a client of `base_url`, to adjust before [`ClientBuilder::build`].
    pub fn builder(base_url: &str) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: None,
            pool_idle_timeout: Duration::from_secs(60),
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
        }
    }

    /// The deadline of one check.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Asks ratelimitd whether `req` may proceed. `Ok` carries allowed and denied answers alike;
    /// `Err` means there is no decision (see [`Error::is_unavailable`]).
    pub async fn check(&self, req: &CheckRequest) -> Result<Decision, Error> {
        let body = serde_json::to_vec(req).map_err(|e| Error::Config(e.to_string()))?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(self.check_uri.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::Config(e.to_string()))?;
        let call = async {
            let response = self
                .pool
                .request(request)
                .await
                .map_err(|e| Error::Transport(chain(&e)))?;
            let (parts, body) = response.into_parts();
            // A declared length over the cap is refused before waiting for any of it.
            if http_body::Body::size_hint(&body).lower() > self.max_answer_bytes as u64 {
                return Err(Error::Malformed(format!(
                    "answer of {} bytes, over {}",
                    http_body::Body::size_hint(&body).lower(),
                    self.max_answer_bytes
                )));
            }
            let bytes = Limited::new(body, self.max_answer_bytes)
                .collect()
                .await
                .map_err(|e| {
                    Error::Malformed(format!(
                        "body unreadable or over {} bytes: {e}",
                        self.max_answer_bytes
                    ))
                })?
                .to_bytes();
            answer::read(
                parts.status,
                &parts.headers,
                &bytes,
                req.max_wait_ms.unwrap_or(0),
            )
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| Error::Timeout(self.timeout))?
    }
}

impl Client {
    /// Reports `usage` for `req` (the same domain and descriptors) once its response has ended,
    /// e.g. the tokens an LLM answered with: `POST /check` with `"cost": usage` and
    /// `"report": true`. A report always counts, even past the limit (the key goes into debt and
    /// the next check is refused until the window or refill pays it back), and is always
    /// allowed; the answer's `remaining` is what is left (0 in debt). Check before the request
    /// with `cost(0)` to charge nothing then (or the limit's `estimate`, which the report trues
    /// up). A `usage` above [`MAX_USAGE`] is [`Error::InvalidUsage`], and nothing is sent.
    pub async fn report(&self, req: &CheckRequest, usage: u64) -> Result<Decision, Error> {
        if usage > MAX_USAGE {
            return Err(Error::InvalidUsage(usage.to_string()));
        }
        let mut report = req.clone();
        report.cost = Some(usage);
        report.report = true;
        report.release = false;
        report.max_wait_ms = None;
        self.check(&report).await
    }

    /// Gives back the concurrency slot `holder` took with `req` (the same domain and descriptors):
    /// `POST /check` with `"holder"` and `"release": true`. Releasing a holder that holds nothing
    /// changes nothing; a release that fails leaves the slot to its lease timeout.
    pub async fn release(&self, req: &CheckRequest, holder: &str) -> Result<(), Error> {
        let mut release = req.clone();
        release.holder = Some(holder.to_owned());
        release.release = true;
        release.max_wait_ms = None;
        match self.check(&release).await? {
            d if d.allowed => Ok(()),
            _ => Err(Error::Malformed("a release answered as denied".into())),
        }
    }
}

impl ClientBuilder {
    /// The deadline of one check, connecting included (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// A shorter deadline for opening a connection (default: the check's deadline).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// How long an unused pooled connection is kept (default 60 s).
    pub fn pool_idle_timeout(mut self, idle: Duration) -> Self {
        self.pool_idle_timeout = idle;
        self
    }

    /// The largest answer accepted (default [`DEFAULT_MAX_ANSWER_BYTES`]).
    pub fn max_answer_bytes(mut self, bytes: usize) -> Self {
        self.max_answer_bytes = bytes;
        self
    }

    /// The client, or [`Error::Config`] naming the bad setting.
    pub fn build(self) -> Result<Client, Error> {
        let base: Uri = self
            .base_url
            .parse()
            .map_err(|e| Error::Config(format!("base URL {:?}: {e}", self.base_url)))?;
        if base.scheme_str() != Some("http") || base.authority().is_none() {
            return Err(Error::Config(format!(
                "base URL {:?}: expected http://host:port",
                self.base_url
            )));
        }
        if self.timeout.is_zero() {
            return Err(Error::Config("timeout: must be above zero".into()));
        }
        let path = base.path().trim_end_matches('/');
        let check_uri = format!("http://{}{path}/check", base.authority().expect("checked"))
            .parse()
            .map_err(|e| Error::Config(format!("base URL {:?}: {e}", self.base_url)))?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(self.connect_timeout.unwrap_or(self.timeout)));
        let pool = Pool::builder(TokioExecutor::new())
            .pool_idle_timeout(self.pool_idle_timeout)
            .build(connector);
        Ok(Client {
            pool,
            check_uri,
            timeout: self.timeout,
            max_answer_bytes: self.max_answer_bytes,
        })
    }
}

/// An error and its sources on one line (hyper's top-level message alone says only "client error").
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_named() {
        for (url, want) in [
            ("localhost:8080", "expected http://host:port"),
            ("https://h:1", "expected http://host:port"),
            ("http://", "base URL"),
        ] {
            let e = Client::new(url).unwrap_err();
            assert!(e.to_string().contains(want), "{url}: {e}");
        }
        let e = Client::builder("http://h:1")
            .timeout(Duration::ZERO)
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("timeout"), "{e}");
    }

    #[test]
    fn the_check_path_sits_under_the_base_path() {
        let c = Client::new("http://h:1/rl/").unwrap();
        assert_eq!(c.check_uri, "http://h:1/rl/check");
    }
}
