//! Fixed window operations on Redis: one `lua/fixed_window.lua` call per group, which only
//! increments (or, for refunds, decrements); the decisions come from [`fixed_window::decide`] and
//! [`fixed_window::decide_refund`], as in the memory store.

use redis::{RedisError, Script};

use super::call::Group;
use super::join::{self, Joined};
use ratelimitd_core::algorithm::{Decision, Window, fixed_window};

/// The fixed window script.
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/fixed_window.lua")
    ))
}

/// The fixed window script that joins concurrent requests' calls (`join.rs`).
pub(super) static JOINED: Joined =
    Joined::new(|| join::script(include_str!("../../../lua/fixed_window.lua")));

/// Applies the operations of `g` (all fixed windows) in one script call. `g.increment` is the
/// script's ARGV[1] (see the script); `ttl` gives each window's key lifetime in seconds.
pub(super) async fn run(
    g: &Group<'_>,
    script: &Script,
    ttl: impl Fn(Window) -> u64,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let mut args = Vec::with_capacity(1 + 3 * g.indices.len());
    args.push(g.increment.argument());
    for op in g.ops() {
        // The script's refund slot: 1 gives back, 2 adds only what fits (`Op::only_admitted`),
        // 3 adds a usage report in every mode (`Op::report`).
        let refund = if op.refund {
            1
        } else if op.report {
            3
        } else {
            2 * u64::from(op.only_admitted)
        };
        args.extend([op.hits, op.spec.limit, ttl(op.spec.window), refund]);
    }
    g.eval_joined(script, &JOINED, 1, &args, 2, |op, c| {
        let (after, moved) = (c[0].max(0) as u64, c[1].max(0) as u64);
        let spec = &op.spec;
        if op.refund {
            let before = after.saturating_add(moved);
            return fixed_window::decide_refund(before, after, spec.limit, spec.window, g.now);
        }
        if op.report {
            let before = after.saturating_sub(moved);
            return fixed_window::decide(before, after, spec.limit, spec.window, g.now).reported();
        }
        // A refused op of a limit that sheds added nothing: judged as the hits it asked for.
        if op.only_admitted && moved == 0 && after.saturating_add(op.hits) > spec.limit {
            let asked = after.saturating_add(op.hits);
            return fixed_window::decide(after, asked, spec.limit, spec.window, g.now);
        }
        fixed_window::decide(
            after.saturating_sub(moved),
            after,
            spec.limit,
            spec.window,
            g.now,
        )
    })
    .await
}
