//! Concurrency limits on Redis: one `lua/concurrency.lua` call per group, which drops ended leases
//! and acquires, checks or releases each holder's slot in the key's sorted set atomically; the
//! decisions come from [`concurrency::decide`], the function the memory store uses. A key and its
//! holders are one sorted set, so on a Cluster every holder of a limit lives in one hash slot.

use redis::{RedisError, Script};

use super::call::Group;
use ratelimitd_core::algorithm::Decision;
use ratelimitd_core::algorithm::concurrency::{self, Step};

/// The concurrency script.
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/concurrency.lua")
    ))
}

/// Applies the operations of `g` (all concurrency limits) in one script call; with
/// `Increment::Nothing` (another key of the request is already known to be over its limit) slots
/// are only checked.
pub(super) async fn run(
    g: &Group<'_>,
    script: &Script,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let mut args = Vec::with_capacity(6 * g.indices.len());
    for op in g.ops() {
        args.extend(
            [
                g.now.as_micros(),
                op.spec.window.micros(),
                op.spec.limit,
                g.hits(op),
                u64::from(op.refund),
            ]
            .map(|n| n.to_string()),
        );
        args.push(op.holder.clone());
    }
    g.eval_text(script, args, 5, |op, r| {
        let step = Step {
            used_before: r[0].max(0) as u64,
            used_after: r[1].max(0) as u64,
            allowed: r[2] == 1,
            first_end: r[3].max(0) as u64,
            last_end: r[4].max(0) as u64,
        };
        concurrency::decide(&step, &op.spec, g.now)
    })
    .await
}
