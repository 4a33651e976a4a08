//! The question asked of `POST /check` and its answer, as plain Rust values.

use std::time::Duration;

use http::HeaderMap;
use http::header::HeaderName;
use serde::Serialize;

/// The rate limit headers of an answer that a server passes on to its own caller: `Retry-After`,
/// the IETF draft `RateLimit` and `RateLimit-Policy` fields and the `X-RateLimit-*` trio.
pub const FORWARDED_HEADERS: [&str; 6] = [
    "retry-after",
    "ratelimit",
    "ratelimit-policy",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
];

/// One `POST /check` request: may `client_key` do this now?
///
/// ```
/// use std::time::Duration;
/// use ratelimitd_client::CheckRequest;
///
/// let req = CheckRequest::new("user:42").endpoint("/api/v1/search").max_wait(Duration::from_secs(2));
/// assert_eq!(req.client_key, "user:42");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckRequest {
    /// Who is asking: a user id, an API key, an address. Required and not empty.
    pub client_key: String,
    /// What they ask for; adds the `[client_key, endpoint]` descriptor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// How many hits this request counts (server default 1; 0 checks without counting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<u64>,
    /// The limit domain (server default: its `CHECK_DOMAIN` setting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// How long the caller accepts to wait for a shaped (`leaky_bucket`) slot, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u64>,
    /// Descriptors checked alongside the `client_key` ones (the descriptor list of `/json`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub descriptors: Vec<Descriptor>,
    /// The id a concurrency slot is held under (1–128 bytes); `None` lets the server make one up
    /// and name it in [`Decision::holder`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Set by [`Client::release`](crate::Client::release): gives `holder`'s slot back.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub release: bool,
    /// Set by [`Client::report`](crate::Client::report): `cost` is usage reported after the
    /// response (e.g. LLM tokens), counted even past the limit and never refused.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub report: bool,
    /// The request's priority class (1–64 bytes, e.g. `critical`) for every limit with
    /// `priorities`: a lower class is shed first as such a limit fills. `None`: the limit's
    /// default class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
}

/// One descriptor of [`CheckRequest::descriptors`]: key/value entries, outermost first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Descriptor {
    /// The entries.
    pub entries: Vec<Entry>,
}

/// One entry of a [`Descriptor`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The descriptor key.
    pub key: String,
    /// Its value.
    pub value: String,
}

impl CheckRequest {
    /// A request for `client_key` with every optional field left to the server's default.
    pub fn new(client_key: impl Into<String>) -> Self {
        CheckRequest {
            client_key: client_key.into(),
            endpoint: None,
            cost: None,
            domain: None,
            max_wait_ms: None,
            descriptors: Vec::new(),
            holder: None,
            release: false,
            report: false,
            priority: None,
        }
    }

    /// Adds a descriptor of `(key, value)` entries, outermost first.
    pub fn descriptor<'a>(mut self, entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let entries = entries
            .into_iter()
            .map(|(key, value)| Entry {
                key: key.to_owned(),
                value: value.to_owned(),
            })
            .collect();
        self.descriptors.push(Descriptor { entries });
        self
    }

    /// Sets the endpoint.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Sets the cost in hits.
    pub fn cost(mut self, cost: u64) -> Self {
        self.cost = Some(cost);
        self
    }

    /// Sets the domain.
    pub fn domain(mut self, domain: impl Into<String>) -> Self {
        self.domain = Some(domain.into());
        self
    }

    /// Holds a concurrency slot under `holder` (e.g. the request's id) instead of a server-made id.
    pub fn holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = Some(holder.into());
        self
    }

    /// Sets the priority class (a name from the limits' `priorities`, e.g. `critical`).
    pub fn priority(mut self, class: impl Into<String>) -> Self {
        self.priority = Some(class.into());
        self
    }

    /// Accepts a shaping delay up to `wait` (whole milliseconds; the server caps it at 60 s).
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait_ms = Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
        self
    }
}

/// ratelimitd's answer to a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may proceed (`200`) or is over a limit (`429`).
    pub allowed: bool,
    /// Hits left on the most constrained limit; `None` when no limit applied.
    pub remaining: Option<u64>,
    /// When that limit resets, in Unix seconds; `None` when no limit applied.
    pub reset_at: Option<u64>,
    /// How long to wait before asking again: zero when allowed, at least a second when denied.
    pub retry_after: Duration,
    /// How long to wait before proceeding (above zero only for a shaped request).
    pub delay: Duration,
    /// The answer's rate limit headers (the names in [`FORWARDED_HEADERS`]), to pass on.
    pub headers: HeaderMap,
    /// The holder of the concurrency slot this request took, when a concurrency limit applied (or
    /// the request named one): give it back with [`Client::release`](crate::Client::release).
    pub holder: Option<String>,
}

impl Decision {
    /// Copies the answer's rate limit headers into `headers` (a server's own response).
    pub fn apply_headers(&self, headers: &mut HeaderMap) {
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
    }
}

/// The headers of `from` whose names are in [`FORWARDED_HEADERS`].
pub(crate) fn forwarded(from: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in FORWARDED_HEADERS {
        if let Some(v) = from.get(name) {
            out.insert(HeaderName::from_static(name), v.clone());
        }
    }
    out
}
