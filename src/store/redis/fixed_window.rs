//! Fixed window operations on Redis: one `lua/fixed_window.lua` call per group, which only
//! increments; the decisions come from [`fixed_window::decide`], as in the memory store.

use redis::{RedisError, Script};

use super::conn::RedisConn;
use crate::algorithm::{Decision, fixed_window};
use crate::clock::Timestamp;
use crate::store::Op;

/// The fixed window script.
pub(super) fn script() -> Script {
    Script::new(include_str!("../../../lua/fixed_window.lua"))
}

/// Applies `indices` of `ops` (all fixed windows) in one script call. `mode` is the script's
/// ARGV[1] (see the script); `ttl` gives each window's key lifetime in seconds.
pub(super) async fn run(
    conn: &RedisConn,
    script: &Script,
    ops: &[Op],
    indices: &[usize],
    mode: u64,
    ttl: impl Fn(u64) -> u64,
    now: Timestamp,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let keys: Vec<&str> = indices.iter().map(|&i| ops[i].key.as_str()).collect();
    let mut args = Vec::with_capacity(1 + 3 * indices.len());
    args.push(mode);
    for &i in indices {
        args.extend([ops[i].hits, ops[i].spec.limit, ttl(ops[i].spec.window_secs)]);
    }
    let out = conn.eval(script, &keys, &args).await?;
    if out.len() != 2 * indices.len() {
        return Err(RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "script returned the wrong number of counts",
        )));
    }
    Ok(indices
        .iter()
        .zip(out.chunks(2))
        .map(|(&i, c)| {
            let (after, added) = (c[0].max(0) as u64, c[1].max(0) as u64);
            let spec = &ops[i].spec;
            let d = fixed_window::decide(
                after.saturating_sub(added),
                after,
                spec.limit,
                spec.window_secs,
                now,
            );
            (i, d)
        })
        .collect())
}
