//! Sliding window operations on Redis: one `lua/sliding_window.lua` call per group, which rolls
//! and updates the counters atomically; the decisions come from [`sliding_window::decide`], the
//! function the memory store uses, so both stores decide alike.

use redis::{RedisError, Script};

use super::conn::RedisConn;
use crate::algorithm::Decision;
use crate::algorithm::fixed_window::window_start;
use crate::algorithm::sliding_window::{self, SCALE, previous_weight};
use crate::clock::Timestamp;
use crate::store::Op;

/// The sliding window script.
pub(super) fn script() -> Script {
    Script::new(include_str!("../../../lua/sliding_window.lua"))
}

/// Applies `indices` of `ops` (all sliding windows) in one script call. With `add_nothing`
/// (another key of the request is already known to be over its limit) the counters are only
/// checked.
pub(super) async fn run(
    conn: &RedisConn,
    script: &Script,
    ops: &[Op],
    indices: &[usize],
    add_nothing: bool,
    now: Timestamp,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let keys: Vec<&str> = indices.iter().map(|&i| ops[i].key.as_str()).collect();
    let hits = |op: &Op| if add_nothing { 0 } else { op.hits };
    let mut args = Vec::with_capacity(1 + 6 * indices.len());
    args.push(SCALE);
    for &i in indices {
        let spec = &ops[i].spec;
        let window = spec.window_secs.max(1);
        args.extend([
            window_start(window, now),
            window,
            previous_weight(window, now),
            spec.limit,
            hits(&ops[i]),
            // The current count weighs on the next window too.
            2 * window,
        ]);
    }
    let out = conn.eval(script, &keys, &args).await?;
    if out.len() != 4 * indices.len() {
        return Err(RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "sliding window script returned the wrong number of values",
        )));
    }
    Ok(indices
        .iter()
        .zip(out.chunks(4))
        .map(|(&i, r)| {
            let op = &ops[i];
            let [previous, before, after] = [r[0], r[1], r[2]].map(|v| v.max(0) as u64);
            let allowed = r[3] == 1;
            let d =
                sliding_window::decide(&op.spec, previous, before, after, allowed, hits(op), now);
            (i, d)
        })
        .collect())
}
