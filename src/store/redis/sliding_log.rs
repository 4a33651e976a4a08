//! Sliding log operations on Redis: one `lua/sliding_log.lua` call per group, which trims and
//! appends to each key's sorted set atomically and returns the integer step results; the decisions
//! come from [`sliding_log::decide`], the function the memory store uses, so both stores decide
//! alike.

use redis::{RedisError, Script};

use super::call::Group;
use super::join::{self, Joined};
use ratelimitd_core::algorithm::Decision;
use ratelimitd_core::algorithm::sliding_log::{self, Step};

/// The sliding log script.
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/sliding_log.lua")
    ))
}

/// The sliding log script that joins concurrent requests' calls (`join.rs`).
static JOINED: Joined = Joined::new(|| join::script(include_str!("../../../lua/sliding_log.lua")));

/// Applies the operations of `g` (all sliding logs) in one script call; with `Increment::Nothing`
/// (another key of the request is already known to be over its limit) the logs are only checked.
pub(super) async fn run(
    g: &Group<'_>,
    script: &Script,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let mut args = Vec::with_capacity(6 * g.indices.len());
    for op in g.ops() {
        let window = op.spec.window;
        args.extend([
            g.now.as_micros(),
            window.micros(),
            op.spec.limit,
            g.hits(op),
            // The newest entry matters for one window from now; a second more absorbs rounding.
            window.secs() + 1,
            // 1 forgets, 2 logs a usage report.
            if op.refund {
                1
            } else {
                2 * u64::from(op.report)
            },
        ]);
    }
    g.eval_joined(script, &JOINED, 0, &args, 4, |op, r| {
        let step = Step {
            used_before: r[0].max(0) as u64,
            allowed: r[1] == 1,
            free_at: r[2].max(0) as u64,
            newest: u64::try_from(r[3]).ok(),
        };
        if op.refund {
            return sliding_log::decide_refund(&op.spec, step, g.now);
        }
        if op.report {
            return sliding_log::decide_report(&op.spec, step, g.hits(op), g.now);
        }
        sliding_log::decide(&op.spec, step, g.hits(op), g.now)
    })
    .await
}
