//! Regional limits on the request path: each op of a limit with `regions` is counted against
//! this region's share of the limit ([`crate::region::share::effective`]) on the region's own
//! store. Nothing else changes: the response still reports the configured (worldwide) limit,
//! and its remaining count is what this region has left of its share. A demand-following share
//! is kept per counter identity across windows, which the key builder hands over with the key
//! ([`super::KeyBuilder::build_split`]). Without a region set, or without a regional limit in the
//! request, this costs two branches per request.

use super::plan::{Plan, Plans};
use crate::clock::Timestamp;
use crate::region::RegionShares;
use crate::region::share::effective;

/// Scales the limit (and burst) of every op of a regional limit in `plans` to this region's share
/// in force at `now`.
pub(crate) fn scale(plans: &mut Plans<'_>, shares: &RegionShares, now: Timestamp) {
    if shares.region().is_none() || plans.identities.is_empty() {
        return;
    }
    for plan in &plans.descriptors {
        let Plan::Limited(limited) = plan else {
            continue;
        };
        // `plan` pushes one op per limit with a spec, in `Limit::all` order.
        let limits = limited.limit.all().filter(|l| l.spec().is_some());
        for (i, limit) in limited.ops.clone().zip(limits) {
            if limit.regions.is_none() {
                continue;
            }
            let op = &mut plans.ops[i];
            let hits = if op.refund { 0 } else { op.hits };
            // The counter's identity across windows, as the key builder made it.
            let identity = plans
                .identities
                .get(i)
                .map_or(&op.key[..], |n| &op.key[..*n]);
            if let Some(share) = shares.share(limit, identity, hits, now) {
                op.spec.limit = effective(op.spec.limit, share);
                op.spec.burst = effective(op.spec.burst, share);
            }
        }
    }
}
