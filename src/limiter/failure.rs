//! The per-limit failure policy (`rate_limit.failure_mode`, DESIGN §6): what a request gets when
//! the store cannot answer. By default (`error`) the request fails with UNAVAILABLE, as in the Go
//! service, and Envoy's `failure_mode_deny` decides. When every limit the request touches says
//! `allow` or `deny`, the service answers instead: `allow` limits are not enforced, `deny` limits
//! are over the limit until their window ends. This is the one producer of
//! [`Source::FailurePolicy`] outcomes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::outcome::{Outcome, Source, Verdict};
use super::plan::{Plan, Plans};
use crate::algorithm::fixed_window::window_start;
use crate::clock::Timestamp;
use crate::config::{FailureMode, Limit};
use crate::store::StoreError;

/// Seconds between two log lines about store failures.
const LOG_EVERY_SECS: u64 = 10;

/// Logs store failures at most once per [`LOG_EVERY_SECS`], with how many went unlogged since:
/// an outage must show in the log, but not as one line per request.
#[derive(Debug, Default)]
pub struct FailureLog {
    /// Unix second before which nothing more is logged.
    quiet_until: AtomicU64,
    /// Failures not logged since the last line.
    suppressed: AtomicU64,
}

impl FailureLog {
    /// Notes a failure at `now`; logs it unless a line went out less than
    /// [`LOG_EVERY_SECS`] ago.
    pub fn note(&self, error: &StoreError, now: Timestamp) {
        let secs = now.as_secs();
        let quiet_until = self.quiet_until.load(Ordering::Relaxed);
        let won = secs >= quiet_until
            && self
                .quiet_until
                .compare_exchange(
                    quiet_until,
                    secs + LOG_EVERY_SECS,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok();
        if !won {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let suppressed = self.suppressed.swap(0, Ordering::Relaxed);
        tracing::warn!(
            %error,
            similar_failures_not_logged = suppressed,
            "the store could not decide; requests are answered by their limits' failure_mode"
        );
    }
}

/// One outcome per op of `plans` standing in for the store's, or `None` when some limit of the
/// request wants the error.
pub fn outcomes(plans: &Plans<'_>, now: Timestamp) -> Option<Vec<Outcome>> {
    let mut out = Vec::with_capacity(plans.ops.len());
    for plan in &plans.descriptors {
        if let Plan::Limited(l) = plan {
            for limit in l.limit.all() {
                out.push(outcome(limit, now)?);
            }
        }
    }
    Some(out)
}

/// The failure policy's outcome for `limit` at `now`; `None` for `error`.
pub fn outcome(limit: &Limit, now: Timestamp) -> Option<Outcome> {
    let verdict = match limit.failure_mode {
        FailureMode::Error => return None,
        FailureMode::Allow => None,
        FailureMode::Deny => {
            // Denied until the end of the limit's current (epoch-aligned) window.
            let window = limit.window()?;
            let end = window_start(window, now).saturating_add(window.secs());
            let reset = Duration::from_secs(end.saturating_sub(now.as_secs()));
            Some(Verdict::over(reset))
        }
    };
    Some(Outcome {
        source: Source::FailurePolicy,
        verdict,
    })
}
