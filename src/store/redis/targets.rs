//! The Redis targets of one store — the main Redis and, with `REDIS_PERSECOND`, the per-second
//! Redis — each behind its own circuit breaker, so one target being down costs nothing for the
//! ops that go to the other. A Redis Cluster or a Sentinel-managed primary is one target: the
//! breaker watches the connection the store holds to it (not each Cluster master).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::try_join_all;

use super::RedisStore;
use crate::algorithm::{Algorithm, Decision};
use crate::clock::{Clock, Timestamp};
use crate::resilience::{Breaker, BreakerReport, Permit};
use crate::settings::Resilience;
use crate::store::Op;

/// The name of the main Redis in logs and metrics.
pub(super) const MAIN: &str = "main";
/// The name of the per-second Redis in logs and metrics.
pub(super) const PER_SECOND: &str = "per_second";

/// The name of a target.
pub(super) fn name(per_second: bool) -> &'static str {
    if per_second { PER_SECOND } else { MAIN }
}

/// One breaker per target.
#[derive(Debug)]
pub(super) struct Breakers {
    main: Breaker,
    per_second: Option<Breaker>,
}

impl Breakers {
    /// Breakers as `settings` ask for them; `None` when `REDIS_BREAKER_FAILURES` is 0.
    pub(super) fn new(
        settings: &Resilience,
        per_second: bool,
        clock: &Arc<dyn Clock>,
    ) -> Option<Breakers> {
        let (failures, cooldown) = (settings.breaker_failures, settings.breaker_cooldown);
        let breaker = |target| Breaker::new(target, failures, cooldown, clock.clone());
        (failures > 0).then(|| Breakers {
            main: breaker(MAIN),
            per_second: per_second.then(|| breaker(PER_SECOND)),
        })
    }

    /// The breaker of a target.
    pub(super) fn get(&self, per_second: bool) -> &Breaker {
        match (&self.per_second, per_second) {
            (Some(b), true) => b,
            _ => &self.main,
        }
    }

    /// Every breaker's state, for the metrics.
    pub(super) fn reports(&self) -> Vec<BreakerReport> {
        std::iter::once(&self.main)
            .chain(self.per_second.as_ref())
            .map(Breaker::report)
            .collect()
    }
}

/// The permit of a target when there may be no breakers (always a plain call then).
pub(super) fn permit(breakers: Option<&Breakers>, per_second: bool) -> Permit {
    breakers.map_or(Permit::Call, |b| b.get(per_second).permit())
}

/// Reports a call's end to its target's breaker, if any.
pub(super) fn record(breakers: Option<&Breakers>, per_second: bool, permit: Permit, ok: bool) {
    if let Some(b) = breakers {
        b.get(per_second).record(permit, ok);
    }
}

impl RedisStore {
    /// Puts a circuit breaker around each target, as `settings` ask, timed by `clock`.
    pub fn with_breakers(mut self, settings: &Resilience, clock: &Arc<dyn Clock>) -> RedisStore {
        self.breakers = Breakers::new(settings, self.per_second.is_some(), clock);
        self
    }

    /// Every breaker's state and transition counts (empty without breakers), for the metrics.
    pub fn breaker_reports(&self) -> Vec<BreakerReport> {
        self.breakers
            .as_ref()
            .map(Breakers::reports)
            .unwrap_or_default()
    }

    /// PINGs every connection of a target (the health check, off the request path) and tells
    /// its breaker: a target that answers closes its breaker without waiting for a request.
    pub(super) async fn ping_target(&self, per_second: bool) -> bool {
        let conn = match &self.per_second {
            Some(ps) if per_second => ps,
            _ => &self.main,
        };
        let bound = self.response_timeout.max(Duration::from_millis(500));
        let ok = matches!(
            tokio::time::timeout(bound, conn.ping_all()).await,
            Ok(Ok(()))
        );
        if let Some(b) = &self.breakers {
            b.get(per_second).probed(ok);
        }
        ok
    }

    /// Runs the `groups` of one target, unless its breaker is open: `Err(true)` when the breaker
    /// answered without a call, `Err(false)` when the call failed or did not answer within
    /// `REDIS_RESPONSE_TIMEOUT` (both recorded by the breaker).
    pub(super) async fn call_target<'g>(
        &self,
        per_second: bool,
        groups: &'g [(Algorithm, Vec<usize>)],
        ops: &[Op],
        mode: u64,
        now: Timestamp,
    ) -> (
        bool,
        &'g [(Algorithm, Vec<usize>)],
        Result<Vec<Vec<(usize, Decision)>>, bool>,
    ) {
        let breakers = self.breakers.as_ref();
        let permit = permit(breakers, per_second);
        if permit == Permit::Rejected {
            return (per_second, groups, Err(true));
        }
        let conn = match &self.per_second {
            Some(ps) if per_second => ps,
            _ => &self.main,
        };
        let calls = groups
            .iter()
            .map(|(algorithm, idx)| self.run(conn, ops, (*algorithm, idx), mode, now));
        let result = tokio::time::timeout(self.response_timeout, try_join_all(calls)).await;
        let result = match result {
            Ok(Ok(decisions)) => Ok(decisions),
            Ok(Err(_)) | Err(_) => Err(false),
        };
        record(breakers, per_second, permit, result.is_ok());
        (per_second, groups, result)
    }
}
