//! Bucket operations on Redis: one script call per group (`lua/token_bucket.lua`, or the leaky
//! bucket's twin, which takes the same numbers), which updates the buckets atomically and returns
//! the integer step results; the decisions come from the algorithm's `decide`, the function the
//! memory store uses, so both stores decide alike.

use redis::{RedisError, Script};

use super::conn::RedisConn;
use crate::algorithm::token_bucket::{self, Params, Step};
use crate::algorithm::{Decision, LimitSpec};
use crate::clock::Timestamp;
use crate::store::Op;

/// The token bucket script.
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/bucket.lua"),
        include_str!("../../../lua/token_bucket.lua")
    ))
}

/// What differs between the bucket algorithms on Redis: the last script argument of an operation
/// and the function that turns a [`Step`] into a decision.
pub(super) struct Bucket {
    /// The seventh number of each operation's arguments.
    pub(super) last_arg: fn(&Params, &LimitSpec) -> u64,
    /// The decision for a step (the algorithm's own `decide`).
    pub(super) decide: fn(&Params, &LimitSpec, Step, u64, Timestamp) -> Decision,
}

/// The token bucket: its keys expire once an untouched bucket is full again.
pub(super) const TOKEN_BUCKET: Bucket = Bucket {
    last_arg: |p, spec| p.refill_secs(spec.window_secs),
    decide: token_bucket::decide,
};

/// Applies `indices` of `ops` (all buckets of one kind) in one script call. With `add_nothing`
/// (another key of the request is already known to be over its limit) the buckets are only checked.
pub(super) async fn run(
    conn: &RedisConn,
    (script, bucket): (&Script, &Bucket),
    ops: &[Op],
    indices: &[usize],
    add_nothing: bool,
    now: Timestamp,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let keys: Vec<&str> = indices.iter().map(|&i| ops[i].key.as_str()).collect();
    let hits = |op: &Op| if add_nothing { 0 } else { op.hits };
    let mut args = Vec::with_capacity(7 * indices.len());
    for &i in indices {
        let op = &ops[i];
        let p = Params::of(&op.spec);
        args.extend([
            p.quanta(now),
            p.rate,
            p.token_cost,
            p.capacity,
            p.burst,
            hits(op),
            (bucket.last_arg)(&p, &op.spec),
        ]);
    }
    let out = conn.eval(script, &keys, &args).await?;
    if out.len() != 3 * indices.len() {
        return Err(RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "bucket script returned the wrong number of values",
        )));
    }
    Ok(indices
        .iter()
        .zip(out.chunks(3))
        .map(|(&i, r)| {
            let op = &ops[i];
            let step = Step {
                debt_before: r[0].max(0) as u64,
                debt_after: r[1].max(0) as u64,
                allowed: r[2] == 1,
            };
            let p = Params::of(&op.spec);
            (i, (bucket.decide)(&p, &op.spec, step, hits(op), now))
        })
        .collect())
}
