//! Fixed window reservations on Redis (token leases, [`ratelimitd_core::store::lease`]): one
//! `lua/lease.lua` call per group adds each op's hits and takes this instance's grant in the same
//! atomic step. The op's own decision comes from [`fixed_window::decide`] on the count without
//! the grant, as for any fixed window op; the grant is recorded in the lease table as the reply
//! is read, so a grant is only ever lost when its reply is (a timeout: bounded by the lease size).

use redis::{RedisError, Script};

use super::call::Group;
use ratelimitd_core::algorithm::{Decision, Window, fixed_window};
use ratelimitd_core::store::lease::{LeaseTotals, Leases, MIN_GRANT, SHARE};

/// The reservation script.
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/lease.lua")
    ))
}

/// Applies the operations of `g` (fixed windows with a lease) in one script call, recording each
/// grant in `leases`; `ttl` gives each window's key lifetime in seconds.
pub(super) async fn run(
    g: &Group<'_>,
    script: &Script,
    leases: &Leases,
    ttl: impl Fn(Window) -> u64,
) -> Result<Vec<(usize, Decision)>, RedisError> {
    let mut args = Vec::with_capacity(2 + 5 * g.indices.len());
    args.extend([SHARE, MIN_GRANT]);
    for op in g.ops() {
        let size = u64::from(leases.size(op));
        let give_back = leases.take_outdated(op);
        args.extend([op.hits, op.spec.limit, ttl(op.spec.window), size, give_back]);
    }
    g.eval(script, &args, 3, |op, c| {
        let after = c[0].max(0) as u64;
        let (granted, returned) = (c[1].max(0) as u64, c[2].max(0) as u64);
        let spec = &op.spec;
        let d = fixed_window::decide(
            after.saturating_sub(op.hits),
            after,
            spec.limit,
            spec.window,
            g.now,
        );
        leases.counters.returned(returned);
        leases.granted(op, &d, granted, g.now);
        d
    })
    .await
}

impl super::RedisStore {
    /// What this store's leases did so far, for the metrics.
    pub fn lease_totals(&self) -> LeaseTotals {
        self.leases.counters.read()
    }
}
