//! The per-limit failure policy (`rate_limit.failure_mode`, DESIGN §6): what a request gets when
//! the store cannot answer. By default (`error`) the request fails with UNAVAILABLE, as in the Go
//! service, and Envoy's `failure_mode_deny` decides. When every limit the request touches says
//! `allow` or `deny`, the service answers instead: `allow` limits are not enforced (OK, no current
//! limit), `deny` limits are OVER_LIMIT until their window ends.

use super::resolve::Resolved;
use super::{Request, limit_spec};
use crate::algorithm::{Decision, fixed_window};
use crate::clock::Timestamp;
use crate::config::FailureMode;

/// Decisions standing in for the store's, or `None` when some limit wants the error. A descriptor
/// with several limits (`rate_limits`) is denied by its first `deny` limit, which it then reports.
pub fn answer(
    req: &Request,
    resolved: &mut [Resolved<'_>],
    now: Timestamp,
) -> Option<Vec<Option<Decision>>> {
    let mut out = Vec::with_capacity(resolved.len());
    for (r, d) in resolved.iter_mut().zip(&req.descriptors) {
        let Resolved::Limited { limit, .. } = r else {
            out.push(None);
            continue;
        };
        if limit.all().any(|l| l.failure_mode == FailureMode::Error) {
            return None;
        }
        let deny = limit
            .all()
            .find(|l| l.failure_mode == FailureMode::Deny)
            .cloned();
        // With only `allow` limits there is no decision: the status is "no limit applied".
        out.push(deny.map(|deny| {
            let spec = limit_spec(&deny);
            let full = spec.limit;
            let hits = req.hits_for(d);
            *limit = deny;
            fixed_window::decide(full, full.saturating_add(hits), full, spec.window_secs, now)
        }));
    }
    Some(out)
}
