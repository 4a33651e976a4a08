//! Token bucket reservations on Redis (token leases, [`ratelimitd_core::store::lease`]): one
//! `lua/bucket_lease.lua` call per group refills each bucket, takes the op's own tokens and this
//! instance's grant in the same atomic step, after giving back the tokens of an expired lease on
//! the key. The op's decision comes from [`token_bucket::decide`] on the step without the grant,
//! as for any token bucket op; the grant is recorded in the lease table as the reply is read.

use redis::{RedisError, Script};

use super::call::Group;
use ratelimitd_core::algorithm::Decision;
use ratelimitd_core::algorithm::token_bucket::{self, Params, Step};
use ratelimitd_core::store::lease::{Leases, MIN_GRANT, SHARE};

/// The token bucket reservation script.
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/bucket.lua"),
        include_str!("../../../lua/bucket_lease.lua")
    ))
}

/// Applies the operations of `g` (token buckets with a lease) in one script call, recording each
/// grant in `leases`.
pub(super) async fn run(
    g: &Group<'_>,
    script: &Script,
    leases: &Leases,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let mut args = Vec::with_capacity(14 * g.indices.len());
    for op in g.ops() {
        let p = Params::of(&op.spec);
        args.extend(super::token_bucket::head_args(&p, g, op));
        args.extend([
            p.refill_secs(op.spec.window),
            0,
            0,
            0,
            u64::from(leases.size(op)),
            leases.take_outdated(op),
            SHARE,
            MIN_GRANT,
        ]);
    }
    g.eval(script, &args, 5, |op, r| {
        let step = Step {
            debt_before: r[0].max(0) as u64,
            debt_after: r[1].max(0) as u64,
            allowed: r[2] == 1,
        };
        let (granted, returned) = (r[3].max(0) as u64, r[4].max(0) as u64);
        let d = token_bucket::decide(&Params::of(&op.spec), &op.spec, step, g.hits(op), g.now);
        leases.counters.returned(returned);
        leases.granted(op, &d, granted, g.now);
        d
    })
    .await
}
