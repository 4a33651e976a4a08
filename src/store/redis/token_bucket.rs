//! Token bucket operations on Redis: one `lua/token_bucket.lua` call per group, which updates the
//! buckets atomically and returns the integer step results; the decisions come from
//! [`token_bucket::decide`], the function the memory store uses, so both stores decide alike.

use redis::{RedisError, Script};

use super::call::Group;
use crate::algorithm::Decision;
use crate::algorithm::token_bucket::{self, Params, Step};

/// The token bucket script.
pub(super) fn script() -> Script {
    Script::new(include_str!("../../../lua/token_bucket.lua"))
}

/// Applies the operations of `g` (all token buckets) in one script call; in mode 2 (another key of
/// the request is already known to be over its limit) the buckets are only checked.
pub(super) async fn run(
    g: &Group<'_>,
    script: &Script,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let mut args = Vec::with_capacity(7 * g.indices.len());
    for op in g.ops() {
        let p = Params::of(&op.spec);
        args.extend([
            p.quanta(g.now),
            p.rate,
            p.token_cost,
            p.capacity,
            p.burst,
            g.hits(op),
            p.refill_secs(op.spec.window_secs),
        ]);
    }
    g.eval(script, &args, 3, |op, r| {
        let step = Step {
            debt_before: r[0].max(0) as u64,
            debt_after: r[1].max(0) as u64,
            allowed: r[2] == 1,
        };
        token_bucket::decide(&Params::of(&op.spec), &op.spec, step, g.hits(op), g.now)
    })
    .await
}
