//! The response body of a rate-limited service: the inner service's body, which reports the
//! request's release when it ends, or the small body of a refusal written by the layer.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;

use crate::release::{ReleaseGuard, ReleaseOutcome};

/// Errors of a [`ResponseBody`]: the inner body's, boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pin_project! {
    /// The body of a response from [`RateLimitService`](crate::RateLimitService).
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
        guard: Option<ReleaseGuard>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Refusal { body: Full<Bytes> },
    }
}

impl<B: Body> ResponseBody<B> {
    /// The inner service's body; `guard` is released when it ends.
    pub(crate) fn inner(body: B, mut guard: Option<ReleaseGuard>) -> Self {
        if body.is_end_stream()
            && let Some(g) = guard.as_mut()
        {
            g.finish(ReleaseOutcome::Completed);
        }
        ResponseBody {
            kind: Kind::Inner { body },
            guard,
        }
    }

    /// A body written by the layer.
    pub(crate) fn refusal(body: Full<Bytes>) -> Self {
        ResponseBody {
            kind: Kind::Refusal { body },
            guard: None,
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        let (frame, ended) = match this.kind.project() {
            KindProj::Inner { mut body } => {
                let frame = ready!(body.as_mut().poll_frame(cx)).map(|r| r.map_err(Into::into));
                let ended = match &frame {
                    None => Some(ReleaseOutcome::Completed),
                    Some(Err(_)) => Some(ReleaseOutcome::Failed),
                    Some(Ok(_)) => body.is_end_stream().then_some(ReleaseOutcome::Completed),
                };
                (frame, ended)
            }
            KindProj::Refusal { body } => {
                let frame = ready!(Pin::new(body).poll_frame(cx));
                (frame.map(|r| r.map_err(|never| match never {})), None)
            }
        };
        if let (Some(outcome), Some(guard)) = (ended, this.guard.as_mut()) {
            guard.finish(outcome);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Refusal { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Refusal { body } => body.size_hint(),
        }
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Inner { .. } => "inner",
            Kind::Refusal { .. } => "refusal",
        };
        f.debug_struct("ResponseBody")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}
