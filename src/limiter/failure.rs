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

/// Decisions standing in for the store's, or `None` when some limit wants the error.
pub fn answer(
    req: &Request,
    resolved: &[Resolved<'_>],
    now: Timestamp,
) -> Option<Vec<Option<Decision>>> {
    let mut out = Vec::with_capacity(resolved.len());
    for (r, d) in resolved.iter().zip(&req.descriptors) {
        out.push(match r {
            Resolved::Limited { limit, .. } => match limit.failure_mode {
                FailureMode::Error => return None,
                // No decision: the status is "no limit applied".
                FailureMode::Allow => None,
                FailureMode::Deny => {
                    let spec = limit_spec(limit);
                    let full = spec.limit;
                    let hits = req.hits_for(d);
                    Some(fixed_window::decide(
                        full,
                        full.saturating_add(hits),
                        full,
                        spec.window_secs,
                        now,
                    ))
                }
            },
            _ => None,
        });
    }
    Some(out)
}
