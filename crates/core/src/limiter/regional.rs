//! Regional limits on the request path: each op of a limit with `regions` is counted against
//! this region's share of the limit ([`crate::region::share::effective`]) on the region's own
//! store. Nothing else changes: the response still reports the configured (worldwide) limit,
//! and its remaining count is what this region has left of its share. Without a region set,
//! this costs one branch per request.

use super::plan::{Plan, Plans};
use crate::region::RegionShares;
use crate::region::share::effective;

/// Scales the limit (and burst) of every op of a regional limit in `plans` to this region's share.
pub(crate) fn scale(plans: &mut Plans<'_>, shares: &RegionShares) {
    if shares.region().is_none() {
        return;
    }
    for plan in &plans.descriptors {
        let Plan::Limited(limited) = plan else {
            continue;
        };
        // `plan` pushes one op per limit with a spec, in `Limit::all` order.
        let limits = limited.limit.all().filter(|l| l.spec().is_some());
        for (op, limit) in plans.ops[limited.ops.clone()].iter_mut().zip(limits) {
            if let Some(share) = shares.share(limit, &op.key, if op.refund { 0 } else { op.hits }) {
                op.spec.limit = effective(op.spec.limit, share);
                op.spec.burst = effective(op.spec.burst, share);
            }
        }
    }
}
