//! The end of an admitted request, reported once: when its response body has been sent in full,
//! when the service or the body failed, or when it was dropped half-way (client gone, timeout,
//! cancelled while waiting a shaping delay). ratelimitd does not hand out concurrency slots yet;
//! this is the seam where a client will give one back once it does, and where a caller can count
//! in-flight requests today.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::check::{CheckRequest, Decision};

/// How an admitted request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// The response was produced and its body sent to the end.
    Completed,
    /// The inner service returned an error or the body failed while streaming.
    Failed,
    /// The request was dropped before it ended: the caller went away, a timeout fired, or it was
    /// cancelled during the shaping wait.
    Cancelled,
}

/// What the release hook is told about an admitted request.
#[derive(Debug, Clone)]
pub struct Release {
    /// The check that admitted it.
    pub request: CheckRequest,
    /// ratelimitd's answer; `None` when the failure policy admitted it (ratelimitd unavailable).
    pub decision: Option<Decision>,
    /// How it ended.
    pub outcome: ReleaseOutcome,
}

/// Called exactly once per admitted request, from whatever task ends it (possibly inside a `Drop`):
/// it must not block; spawn anything slow. A panic inside it is caught and ignored.
pub type ReleaseHook = Arc<dyn Fn(Release) + Send + Sync>;

/// Calls the hook when finished, or as [`ReleaseOutcome::Cancelled`] when dropped first.
pub(crate) struct ReleaseGuard {
    hook: ReleaseHook,
    pending: Option<(CheckRequest, Option<Decision>)>,
}

impl ReleaseGuard {
    pub(crate) fn new(
        hook: ReleaseHook,
        request: CheckRequest,
        decision: Option<Decision>,
    ) -> Self {
        ReleaseGuard {
            hook,
            pending: Some((request, decision)),
        }
    }

    /// Reports `outcome` now; later calls and the drop do nothing.
    pub(crate) fn finish(&mut self, outcome: ReleaseOutcome) {
        if let Some((request, decision)) = self.pending.take() {
            let release = Release {
                request,
                decision,
                outcome,
            };
            let hook = &self.hook;
            let _ = catch_unwind(AssertUnwindSafe(|| hook(release)));
        }
    }
}

impl Drop for ReleaseGuard {
    fn drop(&mut self) {
        self.finish(ReleaseOutcome::Cancelled);
    }
}
