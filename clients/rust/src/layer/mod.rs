//! A `tower::Layer` that asks ratelimitd before a request reaches the service: a key extractor
//! turns the request into a [`CheckRequest`] (or `None` to let it through unchecked); an allowed
//! request waits its shaping delay, reaches the service and gets ratelimitd's draft `RateLimit`
//! headers on its response; a denied one is answered `429` with ratelimitd's headers and never
//! reaches the service; when ratelimitd cannot answer, the [`FailurePolicy`] decides. With
//! [`RateLimitLayer::usage`], what a response used (read from its head, e.g. a header by
//! [`usage_header`]) is reported once its body has ended ([`Client::report`]), for limits with
//! `usage: report`; the check then charges nothing unless the key gives a `cost`.

mod body;
mod refusal;
mod service;

use std::sync::Arc;

use tower_layer::Layer;

use crate::check::CheckRequest;
use crate::client::Client;
use crate::clock::{Sleeper, tokio_sleeper};
use crate::policy::FailurePolicy;
use crate::release::{Release, ReleaseHook};

pub use body::{BoxError, ResponseBody};
pub use service::RateLimitService;

/// Rate limits the wrapped service through ratelimitd. `K` maps a request to its check:
/// `Fn(&http::Request<B>) -> Option<CheckRequest>`.
pub struct RateLimitLayer<K> {
    gate: Gate<K>,
}

/// What every service made by one layer shares (each field is cheap to clone).
pub(crate) struct Gate<K> {
    pub(crate) client: Client,
    pub(crate) key: Arc<K>,
    pub(crate) policy: FailurePolicy,
    pub(crate) release: Option<ReleaseHook>,
    pub(crate) sleeper: Sleeper,
    pub(crate) usage: Option<UsageFn>,
}

/// Reads what a response used from its head (status, headers): `Some` to report it.
pub type UsageFn = Arc<dyn Fn(&http::response::Parts) -> Option<u64> + Send + Sync>;

impl<K> Clone for Gate<K> {
    fn clone(&self) -> Self {
        Gate {
            client: self.client.clone(),
            key: self.key.clone(),
            policy: self.policy.clone(),
            release: self.release.clone(),
            sleeper: self.sleeper.clone(),
            usage: self.usage.clone(),
        }
    }
}

impl<K> RateLimitLayer<K> {
    /// A layer asking `client`, keyed by `key`, failing open, with no release hook.
    pub fn new(client: Client, key: K) -> Self {
        RateLimitLayer {
            gate: Gate {
                client,
                key: Arc::new(key),
                policy: FailurePolicy::Open,
                release: None,
                sleeper: tokio_sleeper(),
                usage: None,
            },
        }
    }

    /// What to do when ratelimitd cannot answer (default [`FailurePolicy::Open`]).
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.gate.policy = policy;
        self
    }

    /// Called once when each admitted request ends (see [`Release`]).
    pub fn on_release(mut self, hook: impl Fn(Release) + Send + Sync + 'static) -> Self {
        self.gate.release = Some(Arc::new(hook));
        self
    }

    /// Reports what each response used, as `usage` reads it from the response's head (e.g.
    /// [`usage_header`]), once its body has ended. The check before the request then charges
    /// nothing when the key gives no `cost` (`cost(0)`; a limit's `estimate` still charges, and
    /// the report trues it up).
    pub fn usage(
        mut self,
        usage: impl Fn(&http::response::Parts) -> Option<u64> + Send + Sync + 'static,
    ) -> Self {
        self.gate.usage = Some(Arc::new(usage));
        self
    }

    /// How shaping delays are waited (default `tokio::time::sleep`); tests record them instead.
    pub fn sleeper(mut self, sleeper: Sleeper) -> Self {
        self.gate.sleeper = sleeper;
        self
    }
}

impl<K> Clone for RateLimitLayer<K> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            gate: self.gate.clone(),
        }
    }
}

impl<S, K> Layer<S> for RateLimitLayer<K> {
    type Service = RateLimitService<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService::new(inner, Arc::new(self.gate.clone()))
    }
}

/// A usage reader for [`RateLimitLayer::usage`]: the whole number in response header `header`
/// (e.g. `x-usage-tokens`). A response without it, or whose value is not a whole number from 0
/// to [`MAX_USAGE`](crate::client::MAX_USAGE), reports nothing.
pub fn usage_header(
    header: &'static str,
) -> impl Fn(&http::response::Parts) -> Option<u64> + Clone + Send + Sync + 'static {
    move |parts: &http::response::Parts| {
        let text = parts.headers.get(header)?.to_str().ok()?.trim();
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        text.parse::<u64>()
            .ok()
            .filter(|u| *u <= crate::client::MAX_USAGE)
    }
}

/// A key extractor reading one header as the client key (requests without it pass unchecked),
/// with the request path as the endpoint.
pub fn header_key<B>(
    header: &'static str,
) -> impl Fn(&http::Request<B>) -> Option<CheckRequest> + Clone + Send + Sync + 'static {
    move |req: &http::Request<B>| {
        let key = req.headers().get(header)?.to_str().ok()?;
        (!key.is_empty()).then(|| CheckRequest::new(key).endpoint(req.uri().path()))
    }
}
