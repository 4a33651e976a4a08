//! Regional limits on the request path: each op of a limit with `regions` is counted against
//! this region's share of the limit ([`crate::region::share::effective`]) on the region's own
//! store. Nothing else changes: the response still reports the configured (worldwide) limit,
//! and its remaining count is what this region has left of its share. Without a region set,
//! this costs one branch per request.

use super::plan::{Plan, Plans};
use crate::algorithm::{Algorithm, LimitSpec};
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
            let hits = if op.refund { 0 } else { op.hits };
            if let Some(share) = shares.share(limit, identity(&op.key, &op.spec), hits) {
                op.spec.limit = effective(op.spec.limit, share);
                op.spec.burst = effective(op.spec.burst, share);
            }
        }
    }
}

/// The counter's identity across windows: a fixed window's key without its window start (both
/// key formats end with it), so a demand-following share carries over from one window to the
/// next; other algorithms' keys name no window.
fn identity<'k>(key: &'k str, spec: &LimitSpec) -> &'k str {
    if spec.algorithm != Algorithm::FixedWindow {
        return key;
    }
    let digits = key.trim_end_matches(|c: char| c.is_ascii_digit());
    digits
        .strip_suffix([':', '_'])
        .filter(|_| digits.len() < key.len())
        .unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::identity;
    use crate::algorithm::{Algorithm, LimitSpec, Window};
    use crate::clock::Timestamp;
    use crate::limiter::{KeyBuilder, KeyFormat};

    #[test]
    fn a_fixed_windows_identity_is_the_same_in_every_window() {
        for format in [KeyFormat::Safe, KeyFormat::Go] {
            let b = KeyBuilder::new("p:", format);
            let spec = |algorithm| LimitSpec {
                algorithm,
                limit: 10,
                window: Window::from_secs(60).unwrap(),
                burst: 10,
            };
            let key = |algorithm, secs| {
                let entries = [("k", "v1")].into_iter();
                b.build("d", entries, &spec(algorithm), Timestamp::from_secs(secs))
            };
            let (a, later) = (
                key(Algorithm::FixedWindow, 60),
                key(Algorithm::FixedWindow, 600),
            );
            assert_ne!(a, later);
            let fixed = spec(Algorithm::FixedWindow);
            assert_eq!(identity(&a, &fixed), identity(&later, &fixed), "{format:?}");
            assert!(identity(&a, &fixed).contains("v1"));
            let bucket = key(Algorithm::TokenBucket, 60);
            assert_eq!(identity(&bucket, &spec(Algorithm::TokenBucket)), bucket);
        }
    }
}
