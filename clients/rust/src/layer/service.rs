//! The service the layer wraps around another: one check per request, then the service, a refusal
//! or the failure policy.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use http_body_util::Full;
use tower_service::Service;

use super::body::{BoxError, ResponseBody};
use super::{Gate, refusal};
use crate::check::{CheckRequest, Decision};
use crate::policy::{FailurePolicy, LocalVerdict};
use crate::release::{ReleaseGuard, ReleaseOutcome};

/// The service made by [`RateLimitLayer`](crate::RateLimitLayer).
pub struct RateLimitService<S, K> {
    inner: S,
    gate: Arc<Gate<K>>,
}

impl<S, K> RateLimitService<S, K> {
    pub(crate) fn new(inner: S, gate: Arc<Gate<K>>) -> Self {
        RateLimitService { inner, gate }
    }
}

impl<S: Clone, K> Clone for RateLimitService<S, K> {
    fn clone(&self) -> Self {
        RateLimitService {
            inner: self.inner.clone(),
            gate: self.gate.clone(),
        }
    }
}

/// Whether a request reaches the service.
enum Admission {
    /// It does; with ratelimitd's answer, or `None` when the failure policy let it through.
    Proceed(Option<Decision>),
    /// It does not: this is its response.
    Refuse(Response<Full<Bytes>>),
}

impl<K> Gate<K> {
    async fn admit(&self, check: &CheckRequest) -> Admission {
        let e = match self.client.check(check).await {
            Ok(d) if d.allowed => return Admission::Proceed(Some(d)),
            Ok(d) => return Admission::Refuse(refusal::denied(&d)),
            Err(e) => e,
        };
        if !e.is_unavailable() {
            return Admission::Refuse(refusal::misconfigured(&e));
        }
        match &self.policy {
            FailurePolicy::Open => Admission::Proceed(None),
            FailurePolicy::Closed => Admission::Refuse(refusal::closed(&e)),
            FailurePolicy::Local(limit) => {
                match limit.check(&check.client_key, check.cost.unwrap_or(1)) {
                    LocalVerdict::Allowed { .. } => Admission::Proceed(None),
                    LocalVerdict::Denied { retry_after } => {
                        Admission::Refuse(refusal::locally_denied(limit, retry_after))
                    }
                }
            }
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, K, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimitService<S, K>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    K: Fn(&Request<ReqBody>) -> Option<CheckRequest> + Send + Sync + 'static,
    ReqBody: Send + 'static,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        // The clone takes the place of the instance that was polled ready, which serves this call.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let gate = self.gate.clone();
        let check = (gate.key)(&req).map(|mut check| {
            // Reported after the response: the check before it charges nothing of its own.
            if gate.usage.is_some() && check.cost.is_none() {
                check.cost = Some(0);
            }
            check
        });
        Box::pin(async move {
            let Some(check) = check else {
                let response = inner.call(req).await?;
                return Ok(response.map(|b| ResponseBody::inner(b, None)));
            };
            let decision = match gate.admit(&check).await {
                Admission::Refuse(response) => return Ok(response.map(ResponseBody::refusal)),
                Admission::Proceed(decision) => decision,
            };
            let delay = decision.as_ref().map(|d| d.delay).unwrap_or_default();
            let headers = decision.as_ref().map(|d| d.headers.clone());
            // Made before the shaping wait, so a request cancelled while waiting is released too.
            let mut guard = ReleaseGuard::new(
                gate.release.clone(),
                &gate.client,
                check,
                decision,
                gate.usage.is_some(),
            );
            if !delay.is_zero() {
                (gate.sleeper)(delay).await;
            }
            match inner.call(req).await {
                Ok(response) => {
                    let (mut parts, body) = response.into_parts();
                    if let (Some(usage), Some(g)) = (&gate.usage, guard.as_mut()) {
                        g.usage = usage(&parts);
                    }
                    for (name, value) in headers.iter().flatten() {
                        // The service's own headers win; an allowed request has no Retry-After.
                        if name != http::header::RETRY_AFTER && !parts.headers.contains_key(name) {
                            parts.headers.insert(name.clone(), value.clone());
                        }
                    }
                    Ok(Response::from_parts(
                        parts,
                        ResponseBody::inner(body, guard),
                    ))
                }
                Err(e) => {
                    if let Some(g) = guard.as_mut() {
                        g.finish(ReleaseOutcome::Failed);
                    }
                    Err(e)
                }
            }
        })
    }
}
