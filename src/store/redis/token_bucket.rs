//! Token bucket operations on Redis: one `lua/token_bucket.lua` call per group, which updates the
//! buckets atomically and returns the integer step results; the decisions come from
//! [`token_bucket::decide`], the function the memory store uses, so both stores decide alike.

use redis::{RedisError, Script};

use super::conn::RedisConn;
use crate::algorithm::Decision;
use crate::algorithm::token_bucket::{self, Params, Step};
use crate::clock::Timestamp;
use crate::store::Op;

/// The token bucket script.
pub(super) fn script() -> Script {
    Script::new(include_str!("../../../lua/token_bucket.lua"))
}

/// Applies `indices` of `ops` (all token buckets) in one script call. With `add_nothing` (another
/// key of the request is already known to be over its limit) the buckets are only checked.
pub(super) async fn run(
    conn: &RedisConn,
    script: &Script,
    ops: &[Op],
    indices: &[usize],
    add_nothing: bool,
    now: Timestamp,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let keys: Vec<&str> = indices.iter().map(|&i| ops[i].key.as_str()).collect();
    let mut args = Vec::with_capacity(7 * indices.len());
    for &i in indices {
        let op = &ops[i];
        let p = Params::of(&op.spec);
        let hits = if add_nothing { 0 } else { op.hits };
        args.extend([
            p.quanta(now),
            p.rate,
            p.token_cost,
            p.capacity,
            p.burst,
            hits,
            p.refill_secs(op.spec.window_secs),
        ]);
    }
    let out = conn.eval(script, &keys, &args).await?;
    if out.len() != 3 * indices.len() {
        return Err(RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "token bucket script returned the wrong number of values",
        )));
    }
    Ok(indices
        .iter()
        .zip(out.chunks(3))
        .map(|(&i, r)| {
            let op = &ops[i];
            let p = Params::of(&op.spec);
            let step = Step {
                debt_before: r[0].max(0) as u64,
                debt_after: r[1].max(0) as u64,
                allowed: r[2] == 1,
            };
            let hits = if add_nothing { 0 } else { op.hits };
            (i, token_bucket::decide(&p, &op.spec, step, hits, now))
        })
        .collect())
}
