//! The slots in use of each concurrency limit, for the `slots_in_use` gauge of the stats sink.
//!
//! The count comes from the store's own answer: the holders the store counted after this call
//! (on Redis, every instance's holders, since the count is the sorted set's size), with the end of
//! the latest lease it saw, so a sink can show 0 once every lease seen has ended even when no call
//! comes after them. A refused request's slots are given back before the answer
//! ([`super::give_back`]), so for them the count before the call is reported. Answers that did not
//! come from the store (failure policy, local fallback) report nothing: the gauge keeps the last
//! count the store gave until its leases end.
//!
//! One value per configured limit: the limit's own stats key (its config path), never the
//! request's values, so the series stay as many as the concurrency limits.

use super::StatsSink;
use super::plan::{Plan, Plans};
use crate::algorithm::Algorithm;
use crate::clock::Timestamp;
use crate::store::{Answer, StoreError};

/// What the store said about one concurrency limit of a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen<'p> {
    key: &'p str,
    /// Slots held before the call (after ended leases were dropped).
    before: u64,
    /// Slots held after it, this request's new slot included.
    after: u64,
    /// The end of the latest lease held after the call.
    until: Timestamp,
    /// True when this call took a new slot, which a refusal gives back.
    took: bool,
}

/// The concurrency limits of `plans` that the store decided, from `answers` (one per op).
pub(crate) fn seen<'p>(
    plans: &'p Plans<'p>,
    answers: &Result<Vec<Answer>, StoreError>,
) -> Vec<Seen<'p>> {
    let Ok(answers) = answers else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for plan in &plans.descriptors {
        let Plan::Limited(l) = plan else { continue };
        for (i, limit) in l.ops.clone().zip(l.limit.all()) {
            if limit.algorithm != Algorithm::Concurrency {
                continue;
            }
            let Some(Answer::Decided(d)) = answers.get(i) else {
                continue;
            };
            // A refused acquisition took nothing: the holders are those before it.
            let after = if d.over_limit { d.before } else { d.after };
            out.push(Seen {
                key: &limit.stats_key,
                before: d.before,
                after,
                until: d.expires_at,
                took: !l.refund && after > d.before,
            });
        }
    }
    out
}

/// Reports every limit of `seen` to `sink`; `given_back` when the request was refused, so the
/// slots it took went back.
pub(crate) fn report(sink: &dyn StatsSink, seen: &[Seen<'_>], given_back: bool) {
    for s in seen {
        let in_use = if given_back && s.took {
            s.before
        } else {
            s.after
        };
        sink.slots_in_use(s.key, in_use, s.until);
    }
}
