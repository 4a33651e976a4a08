//! Sliding window operations on Redis: one `lua/sliding_window.lua` call per group, which rolls
//! and updates the counters atomically; the decisions come from [`sliding_window::decide`], the
//! function the memory store uses, so both stores decide alike.

use redis::{RedisError, Script};

use super::call::Group;
use super::join::{self, Joined};
use ratelimitd_core::algorithm::Decision;
use ratelimitd_core::algorithm::fixed_window::window_start;
use ratelimitd_core::algorithm::sliding_window::{self, SCALE, previous_weight};

/// The sliding window script.
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/sliding_window.lua")
    ))
}

/// The sliding window script that joins concurrent requests' calls (`join.rs`).
static JOINED: Joined =
    Joined::new(|| join::script(include_str!("../../../lua/sliding_window.lua")));

/// Applies the operations of `g` (all sliding windows) in one script call; with
/// `Increment::Nothing` (another key of the request is already known to be over its limit) the
/// counters are only checked.
pub(super) async fn run(
    g: &Group<'_>,
    script: &Script,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let mut args = Vec::with_capacity(1 + 7 * g.indices.len());
    args.push(SCALE);
    for op in g.ops() {
        let spec = &op.spec;
        let window = spec.window;
        args.extend([
            window_start(window, g.now),
            window.secs(),
            previous_weight(window, g.now),
            spec.limit,
            g.hits(op),
            // The current count weighs on the next window too.
            2 * window.secs(),
            // 1 gives back, 2 counts a usage report.
            if op.refund {
                1
            } else {
                2 * u64::from(op.report)
            },
        ]);
    }
    g.eval_joined(script, &JOINED, 1, &args, 4, |op, r| {
        let [previous, before, after] = [r[0], r[1], r[2]].map(|v| v.max(0) as u64);
        let allowed = r[3] == 1;
        if op.refund {
            return sliding_window::decide_refund(&op.spec, previous, after, g.now);
        }
        if op.report {
            return sliding_window::decide_report(&op.spec, previous, before, after, g.now);
        }
        sliding_window::decide(
            &op.spec,
            previous,
            before,
            after,
            allowed,
            g.hits(op),
            g.now,
        )
    })
    .await
}
