//! A `tower::Layer` that asks ratelimitd before a request reaches the service: a key extractor
//! turns the request into a [`CheckRequest`] (or `None` to let it through unchecked); an allowed
//! request waits its shaping delay, reaches the service and gets ratelimitd's draft `RateLimit`
//! headers on its response; a denied one is answered `429` with ratelimitd's headers and never
//! reaches the service; when ratelimitd cannot answer, the [`FailurePolicy`] decides.

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
}

impl<K> Clone for Gate<K> {
    fn clone(&self) -> Self {
        Gate {
            client: self.client.clone(),
            key: self.key.clone(),
            policy: self.policy.clone(),
            release: self.release.clone(),
            sleeper: self.sleeper.clone(),
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
