//! The per-limit failure policy (`rate_limit.failure_mode`, DESIGN §6): what a request gets when
//! the store cannot answer. By default (`error`) the request fails with UNAVAILABLE, as in the Go
//! service, and Envoy's `failure_mode_deny` decides. When every limit the request touches says
//! `allow` or `deny`, the service answers instead: `allow` limits are not enforced, `deny` limits
//! are over the limit until their window ends. This is the one producer of
//! [`Source::FailurePolicy`] outcomes.

use std::time::Duration;

use super::outcome::{Outcome, Source, Verdict};
use super::plan::{Plan, Plans};
use crate::algorithm::fixed_window::window_start;
use crate::clock::Timestamp;
use crate::config::{FailureMode, Limit};

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
