//! Fixed window operations on Redis: one `lua/fixed_window.lua` call per group, which only
//! increments; the decisions come from [`fixed_window::decide`], as in the memory store.

use redis::{RedisError, Script};

use super::call::Group;
use crate::algorithm::{Decision, Window, fixed_window};

/// The fixed window script.
pub(super) fn script() -> Script {
    Script::new(include_str!("../../../lua/fixed_window.lua"))
}

/// Applies the operations of `g` (all fixed windows) in one script call. `g.mode` is the script's
/// ARGV[1] (see the script); `ttl` gives each window's key lifetime in seconds.
pub(super) async fn run(
    g: &Group<'_>,
    script: &Script,
    ttl: impl Fn(Window) -> u64,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let mut args = Vec::with_capacity(1 + 3 * g.indices.len());
    args.push(g.mode);
    for op in g.ops() {
        args.extend([op.hits, op.spec.limit, ttl(op.spec.window)]);
    }
    g.eval(script, &args, 2, |op, c| {
        let (after, added) = (c[0].max(0) as u64, c[1].max(0) as u64);
        let spec = &op.spec;
        fixed_window::decide(
            after.saturating_sub(added),
            after,
            spec.limit,
            spec.window,
            g.now,
        )
    })
    .await
}
