//! Leaky bucket (GCRA) operations on Redis: `lua/leaky_bucket.lua` takes the token bucket's numbers
//! and returns the same kind of step (backlogs instead of debts), so the shared bucket runner in
//! [`super::token_bucket`] calls it; the decisions come from [`leaky_bucket::decide`], the function
//! the memory store uses.

use redis::Script;

use super::join::{self, Joined};
use super::token_bucket::Bucket;
use ratelimitd_core::algorithm::leaky_bucket;

/// The leaky bucket script.
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/bucket.lua"),
        include_str!("../../../lua/leaky_bucket.lua")
    ))
}

/// The leaky bucket script that joins concurrent requests' calls (`join.rs`).
static JOINED: Joined = Joined::new(|| {
    join::script(concat!(
        include_str!("../../../lua/bucket.lua"),
        include_str!("../../../lua/leaky_bucket.lua")
    ))
});

/// The leaky bucket: the script sets each key's expiry from its new TAT itself, so the last
/// argument is the number of quanta in a second (to round that TAT to whole seconds).
pub(super) const LEAKY_BUCKET: Bucket = Bucket {
    joined: &JOINED,
    last_arg: |p, _| 1_000_000 / p.quantum_micros,
    // As in `leaky_bucket::shape`: the op's budget (none for a refund), and the horizon.
    budget: |p, op, now| {
        let budget = if op.refund || op.report {
            0
        } else {
            p.budget(op.max_wait, now)
        };
        [budget, p.horizon()]
    },
    decide: leaky_bucket::decide,
    // A refund's answer is the token bucket's: a check of the bucket after it.
    decide_refund: ratelimitd_core::algorithm::token_bucket::decide_refund,
    // A report's answer is the token bucket's too: the hits were taken, never over.
    decide_report: ratelimitd_core::algorithm::token_bucket::decide_report,
};
