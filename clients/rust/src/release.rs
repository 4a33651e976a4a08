//! The end of an admitted request, reported once: when its response body has been sent in full,
//! when the service or the body failed, or when it was dropped half-way (client gone, timeout,
//! cancelled while waiting a shaping delay). When ratelimitd's answer named a concurrency slot
//! holder, the slot is given back here (a `/check` release, spawned so a `Drop` never blocks); a
//! release that fails is ignored, as the slot's lease timeout frees it anyway. The caller's own hook
//! is told too, e.g. to count in-flight requests.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::check::{CheckRequest, Decision};
use crate::client::Client;

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
    hook: Option<ReleaseHook>,
    client: Client,
    pending: Option<(CheckRequest, Option<Decision>)>,
    /// What the response used, read by the layer's usage callback: reported when it ends.
    pub(crate) usage: Option<u64>,
}

impl ReleaseGuard {
    /// A guard for an admitted request, or `None` when there is nothing to do at its end (no hook,
    /// no slot held, no usage to report).
    pub(crate) fn new(
        hook: Option<ReleaseHook>,
        client: &Client,
        request: CheckRequest,
        decision: Option<Decision>,
        reports_usage: bool,
    ) -> Option<Self> {
        let holds_slot = decision.as_ref().is_some_and(|d| d.holder.is_some());
        (hook.is_some() || holds_slot || reports_usage).then(|| ReleaseGuard {
            hook,
            client: client.clone(),
            pending: Some((request, decision)),
            usage: None,
        })
    }

    /// Reports `outcome` now; later calls and the drop do nothing.
    pub(crate) fn finish(&mut self, outcome: ReleaseOutcome) {
        if let Some((request, decision)) = self.pending.take() {
            let holder = decision.as_ref().and_then(|d| d.holder.clone());
            // Outside a Tokio runtime (a drop at shutdown) the lease timeout frees the slot.
            if let (Some(holder), Ok(rt)) = (holder, tokio::runtime::Handle::try_current()) {
                let (client, request) = (self.client.clone(), request.clone());
                rt.spawn(async move {
                    let _ = client.release(&request, &holder).await;
                });
            }
            // What the response used, once it has ended; a report that fails is lost (logged by
            // nobody: the client has no logger), as a report of an unreachable service must be.
            if let (Some(usage), Ok(rt)) = (self.usage, tokio::runtime::Handle::try_current()) {
                let (client, request) = (self.client.clone(), request.clone());
                rt.spawn(async move {
                    let _ = client.report(&request, usage).await;
                });
            }
            let Some(hook) = &self.hook else { return };
            let release = Release {
                request,
                decision,
                outcome,
            };
            let _ = catch_unwind(AssertUnwindSafe(|| hook(release)));
        }
    }
}

impl Drop for ReleaseGuard {
    fn drop(&mut self) {
        self.finish(ReleaseOutcome::Cancelled);
    }
}
