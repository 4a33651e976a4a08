//! `rate_limits` (ratelimitd extension, `docs/design/contract.md#extensions`): several limits on
//! one descriptor, e.g. 10 per second with a burst *and* 10 000 per day. They all apply; the
//! limiter reports the most restrictive. The first entry becomes the node's limit and carries the
//! others in `also`, so matching, `replaces` and everything keyed on "the node's limit" work
//! unchanged.

use std::sync::Arc;

use super::compiled::Limit;
use super::error::{Sink, field_path, index_path};
use super::limit::build_limit;
use super::model::RawDescriptor;

/// The limit of descriptor `d` (stats key `full_key`): its `rate_limit`, or its `rate_limits`
/// folded into one [`Limit`]. Every entry is checked even after an error, so all are reported.
pub(super) fn node_limit(d: &RawDescriptor, full_key: &str, sink: &mut Sink<'_>) -> Option<Limit> {
    let list_path = field_path(&d.path, "rate_limits");
    let list = match (&d.rate_limit, &d.rate_limits) {
        (None, None) => return None,
        (Some(rl), None) => return Some(build_limit(rl, d, full_key, sink)),
        (Some(rl), Some(list)) => {
            sink.push(
                &list_path,
                "rate_limit and rate_limits cannot both be set on one descriptor; put every limit in rate_limits",
            );
            build_limit(rl, d, full_key, sink);
            list
        }
        (None, Some(list)) => list,
    };
    if list.is_empty() {
        sink.push(&list_path, "rate_limits must hold at least one limit");
        return None;
    }
    let mut limits: Vec<Limit> = list
        .iter()
        .map(|rl| build_limit(rl, d, full_key, sink))
        .collect();
    for (i, (rl, l)) in list.iter().zip(&limits).enumerate() {
        let at = |field: &str| field_path(&index_path(&list_path, i), field);
        if l.unlimited && list.len() > 1 {
            sink.push(
                &at("unlimited"),
                "unlimited cannot be combined with other limits in rate_limits",
            );
        }
        if i > 0 && !rl.replaces.is_empty() {
            sink.push(
                &at("replaces"),
                "replaces belongs on the first entry of rate_limits (it applies to the whole descriptor)",
            );
        }
        // Two limits of one algorithm and window would share one counter (one cache key), and
        // only the smaller could ever decide anyway.
        let twin = limits[..i]
            .iter()
            .position(|o| !o.unlimited && o.algorithm == l.algorithm && o.window() == l.window());
        if let (Some(j), false) = (twin, l.unlimited) {
            sink.push(
                &index_path(&list_path, i),
                format!(
                    "rate_limits[{i}] has the same algorithm and window as rate_limits[{j}]; merge them into one limit (the smaller one always decides)"
                ),
            );
        }
    }
    // A check charges one estimate and a report trues that one up, per descriptor: every limit
    // of it must count the same estimate, or a refund would give back what another never took.
    if let Some(e) = limits.iter().find_map(|l| l.usage_estimate) {
        for (i, l) in limits.iter().enumerate() {
            if l.usage_estimate != Some(e) && !l.unlimited {
                sink.push(
                    &field_path(&index_path(&list_path, i), "usage"),
                    format!(
                        "every limit of a descriptor with a usage estimate needs usage: {{mode: report, estimate: {e}}} (the check charges one estimate to all of them)"
                    ),
                );
            }
        }
    }
    let mut first = limits.remove(0);
    first.also = limits.into_iter().map(Arc::new).collect();
    Some(first)
}
