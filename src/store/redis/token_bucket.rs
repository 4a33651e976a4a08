//! Bucket operations on Redis: one script call per group (`lua/token_bucket.lua`, or the leaky
//! bucket's twin, which takes the same numbers), which updates the buckets atomically and returns
//! the integer step results; the decisions come from the algorithm's `decide`, the function the
//! memory store uses, so both stores decide alike.

use redis::{RedisError, Script};

use super::call::Group;
use super::join::{self, Joined};
use ratelimitd_core::algorithm::token_bucket::{self, Params, Step};
use ratelimitd_core::algorithm::{Decision, LimitSpec};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::store::Op;

/// The token bucket script.
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/bucket.lua"),
        include_str!("../../../lua/token_bucket.lua")
    ))
}

/// The token bucket script that joins concurrent requests' calls (`join.rs`).
static JOINED: Joined = Joined::new(|| {
    join::script(concat!(
        include_str!("../../../lua/bucket.lua"),
        include_str!("../../../lua/token_bucket.lua")
    ))
});

/// What differs between the bucket algorithms on Redis: the script's own argument of an operation,
/// its wait budget, the function that turns a [`Step`] into a decision, and the joined script.
pub(super) struct Bucket {
    /// The script that joins concurrent requests' calls (`join.rs`).
    pub(super) joined: &'static Joined,
    /// The seventh number of each operation's arguments.
    pub(super) last_arg: fn(&Params, &LimitSpec) -> u64,
    /// The ninth and tenth numbers: units the op may queue past the capacity, and the most any
    /// op may (only leaky buckets shape).
    pub(super) budget: fn(&Params, &Op, Timestamp) -> [u64; 2],
    /// The decision for a step (the algorithm's own `decide`).
    pub(super) decide: fn(&Params, &LimitSpec, Step, u64, Timestamp) -> Decision,
    /// The decision for a refund's step (the algorithm's own `decide_refund`).
    pub(super) decide_refund: fn(&Params, &LimitSpec, Step, Timestamp) -> Decision,
    /// The decision for a usage report's step.
    pub(super) decide_report: fn(&Params, &LimitSpec, Step, u64, Timestamp) -> Decision,
}

/// The token bucket: its keys expire once an untouched bucket is full again.
pub(super) const TOKEN_BUCKET: Bucket = Bucket {
    joined: &JOINED,
    last_arg: |p, spec| p.refill_secs(spec.window),
    budget: |_, _, _| [0, 0],
    decide: token_bucket::decide,
    decide_refund: token_bucket::decide_refund,
    decide_report: token_bucket::decide_report,
};

/// The arguments every bucket script starts an op with: its time in quanta, rate, token cost,
/// capacity, burst and hits (`lua/bucket.lua`'s `bucket_args`).
pub(super) fn head_args(p: &Params, g: &Group<'_>, op: &Op) -> [u64; 6] {
    [
        p.quanta(g.now),
        p.rate,
        p.token_cost,
        p.capacity,
        p.burst,
        g.hits(op),
    ]
}

/// Applies the operations of `g` (all buckets of one kind) in one script call; with
/// `Increment::Nothing` (another key of the request is already known to be over its limit) the
/// buckets are only checked.
pub(super) async fn run(
    g: &Group<'_>,
    script: &Script,
    bucket: &Bucket,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let mut args = Vec::with_capacity(10 * g.indices.len());
    for op in g.ops() {
        let p = Params::of(&op.spec);
        args.extend(head_args(&p, g, op));
        // The script's refund slot: 1 gives back, 2 charges a usage report.
        let mode = if op.refund {
            1
        } else {
            2 * u64::from(op.report)
        };
        args.extend([(bucket.last_arg)(&p, &op.spec), mode]);
        args.extend((bucket.budget)(&p, op, g.now));
    }
    g.eval_joined(script, bucket.joined, 0, &args, 3, |op, r| {
        let step = Step {
            debt_before: r[0].max(0) as u64,
            debt_after: r[1].max(0) as u64,
            allowed: r[2] == 1,
        };
        let p = Params::of(&op.spec);
        if op.refund {
            return (bucket.decide_refund)(&p, &op.spec, step, g.now);
        }
        if op.report {
            return (bucket.decide_report)(&p, &op.spec, step, g.hits(op), g.now);
        }
        (bucket.decide)(&p, &op.spec, step, g.hits(op), g.now)
    })
    .await
}
