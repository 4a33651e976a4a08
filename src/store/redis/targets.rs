//! The Redis targets of one store, each behind its own circuit breaker, so one target being down
//! costs nothing for the ops that go to the others. A target is the main Redis, the per-second
//! Redis (`REDIS_PERSECOND`), or — on Redis Cluster — each master, named by its `host:port` (the
//! slot map in `slots` says which master an op's key lives on): a lost master then fails only the
//! ops of its slots. A Sentinel-managed primary is one target, whichever server it is now.

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::future::join_all;
use parking_lot::{Mutex, RwLock};
use smallvec::SmallVec;

use super::RedisStore;
use super::call::{Increment, ScriptKind, refused_for_its_data};
use super::conn::RedisConn;
use crate::store::Resilience;
use ratelimitd_core::algorithm::Decision;
use ratelimitd_core::clock::{Clock, Timestamp};
use ratelimitd_core::resilience::{Breaker, BreakerReport, Permit};
use ratelimitd_core::store::Op;

/// The name of the main Redis in logs and metrics.
pub(super) const MAIN: &str = "main";
/// The name of the per-second Redis in logs and metrics.
pub(super) const PER_SECOND: &str = "per_second";

/// The name of a whole target.
pub(super) fn name(per_second: bool) -> &'static str {
    if per_second { PER_SECOND } else { MAIN }
}

/// `name` as a `&'static str`, the same one every time (breakers, answers and metric labels name
/// targets that way). Only Cluster master addresses are interned, each once, so what is kept is
/// bounded by the masters a cluster ever had.
pub(super) fn intern(name: String) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut names = NAMES.lock();
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(known) = names.get(name.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

/// One breaker per target, made when a target is first called (Cluster masters are learnt from
/// the slot map as it changes).
#[derive(Debug)]
pub(super) struct Breakers {
    failures: u32,
    cooldown: Duration,
    clock: Arc<dyn Clock>,
    by_target: RwLock<HashMap<&'static str, Arc<Breaker>>>,
}

impl Breakers {
    /// Breakers as `settings` ask for them; `None` when `REDIS_BREAKER_FAILURES` is 0.
    pub(super) fn new(
        settings: &Resilience,
        per_second: bool,
        clock: &Arc<dyn Clock>,
    ) -> Option<Breakers> {
        let b = Breakers {
            failures: settings.breaker_failures,
            cooldown: settings.breaker_cooldown,
            clock: clock.clone(),
            by_target: RwLock::default(),
        };
        // The whole targets are there from the start, so their metrics are too.
        b.get(MAIN);
        if per_second {
            b.get(PER_SECOND);
        }
        (settings.breaker_failures > 0).then_some(b)
    }

    /// The breaker of `target`.
    pub(super) fn get(&self, target: &'static str) -> Arc<Breaker> {
        if let Some(b) = self.by_target.read().get(target) {
            return b.clone();
        }
        let mut all = self.by_target.write();
        let new = || Breaker::new(target, self.failures, self.cooldown, self.clock.clone());
        all.entry(target).or_insert_with(|| Arc::new(new())).clone()
    }

    /// Drops the breakers of Cluster masters that hold no slot any more (failed over, removed):
    /// nothing calls them, and an open one would report an outage that is over.
    fn keep_only(&self, masters: &[&'static str]) {
        let keep = |t: &&'static str| [MAIN, PER_SECOND].contains(t) || masters.contains(t);
        self.by_target.write().retain(|t, _| keep(t));
    }

    /// Every breaker's state, for the metrics.
    pub(super) fn reports(&self) -> Vec<BreakerReport> {
        let mut all: Vec<BreakerReport> =
            self.by_target.read().values().map(|b| b.report()).collect();
        all.sort_by_key(|r| r.target);
        all
    }
}

/// Where a script call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Target {
    /// True for the per-second Redis (`REDIS_PERSECOND`), false for the main one.
    pub(super) per_second: bool,
    /// The target's name in logs and metrics: [`MAIN`], [`PER_SECOND`] or a Cluster master's
    /// `host:port`.
    pub(super) name: &'static str,
}

/// The ops of one script call, by their index in the request. Inline up to four: a request's
/// few descriptors group without an allocation.
pub(super) type Indices = SmallVec<[usize; 4]>;

/// The calls of one target: the script groups (one algorithm each) of the ops it holds.
pub(super) type TargetGroups = SmallVec<[(ScriptKind, Indices); 2]>;

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

    pub(super) fn conn(&self, per_second: bool) -> &RedisConn {
        match &self.per_second {
            Some(ps) if per_second => ps.resolved(),
            _ => self.main.resolved(),
        }
    }

    /// The target of `op` on the main or per-second Cluster connection: the master of its slot
    /// when the slot map knows it, else the connection as a whole.
    pub(super) fn master_of(&self, per_second: bool, op: &Op) -> &'static str {
        self.slots[usize::from(per_second)]
            .master(&op.key)
            .unwrap_or(name(per_second))
    }

    /// Pings every Redis and records whether all answered (for health while idle).
    pub async fn check_health(&self) -> bool {
        let mut ok = self.ping_target(false).await;
        if self.per_second.is_some() {
            ok &= self.ping_target(true).await;
        }
        self.healthy.store(ok, Ordering::Relaxed);
        if let Some(b) = &self.breakers {
            let masters = [self.slots[0].masters(), self.slots[1].masters()].concat();
            b.keep_only(&masters);
        }
        ok
    }

    /// PINGs every connection of a target (the health check, off the request path) and tells
    /// its breaker: a target that answers closes its breaker without waiting for a request. On
    /// Cluster, first re-reads the slot map, then PINGs each master and tells its own breaker.
    pub(super) async fn ping_target(&self, per_second: bool) -> bool {
        let conn = self.conn(per_second);
        let bound = self.response_timeout.max(Duration::from_millis(500));
        let slots = &self.slots[usize::from(per_second)];
        if let Some(reply) = conn.cluster_slots(&slots.masters(), bound).await
            && let Err(e) = reply
                .map_err(|e| e.to_string())
                .and_then(|r| slots.update(&r))
        {
            tracing::debug!(error = %e, "cluster slot map not refreshed");
        }
        let masters = match conn {
            RedisConn::Cluster(_) => slots.masters(),
            _ => Vec::new(),
        };
        let tries = pings_within(bound, self.response_timeout);
        if masters.is_empty() {
            let ok = answers_within(bound, tries, || conn.ping_all()).await;
            self.probed(name(per_second), ok);
            return ok;
        }
        let pings = masters.iter().map(|&m| async move {
            let ok = answers_within(bound, tries, || conn.ping_node(m)).await;
            self.probed(m, ok);
            ok
        });
        let all_ok = join_all(pings).await.into_iter().all(|ok| ok);
        // Ops whose slot was not mapped yet were counted against the whole target.
        self.probed(name(per_second), all_ok);
        all_ok
    }

    /// Whether a failed call to `target` means Redis is failing: its breaker is open or
    /// half-open (always, without breakers).
    pub(super) fn failing(&self, target: &'static str) -> bool {
        self.breakers
            .as_ref()
            .is_none_or(|b| !b.get(target).is_closed())
    }

    fn probed(&self, target: &'static str, ok: bool) {
        if let Some(b) = &self.breakers {
            b.get(target).probed(ok);
        }
    }

    /// Runs the `groups` of one target, unless its breaker is open, and tells the breaker how
    /// it went. Redis refusing one group's script for its data (an error reply such as a counter
    /// holding a value that is not a number: [`refused_for_its_data`]) is that group's own
    /// answer, not a failure of Redis: the target answered.
    pub(super) async fn call_target<'g>(
        &self,
        target: Target,
        groups: &'g TargetGroups,
        ops: &[Op],
        increment: Increment,
        now: Timestamp,
    ) -> (&'static str, &'g TargetGroups, Called) {
        let breaker = self.breakers.as_ref().map(|b| b.get(target.name));
        let permit = breaker.as_ref().map(|b| b.permit());
        if permit == Some(Permit::Rejected) {
            return (target.name, groups, Called::Rejected);
        }
        let conn = self.conn(target.per_second);
        let calls = groups.iter().map(|(script, idx)| {
            self.run((conn, target.per_second), ops, *script, idx, increment, now)
        });
        let called = match tokio::time::timeout(self.response_timeout, join_all(calls)).await {
            Err(_) => Called::Failed,
            Ok(results) => results
                .into_iter()
                .map(|r| match r {
                    Ok(decisions) => Some(Some(decisions)),
                    Err(e) if refused_for_its_data(&e) => {
                        // Per request, so debug: the limiter's failure log already notes
                        // (throttled) that these limits were answered by their failure mode.
                        tracing::debug!(
                            target_redis = target.name,
                            error = %e,
                            "Redis refused a script call for its data; its limits answer by their failure mode"
                        );
                        Some(None)
                    }
                    Err(_) => None,
                })
                .collect::<Option<Vec<_>>>()
                .map_or(Called::Failed, Called::Answered),
        };
        if let (Some(b), Some(permit)) = (breaker, permit) {
            b.record(permit, !matches!(called, Called::Failed));
        }
        (target.name, groups, called)
    }
}

/// How the calls of one target went ([`RedisStore::call_target`]).
pub(super) enum Called {
    /// The breaker is open: no call was made.
    Rejected,
    /// A call failed to reach Redis, Redis refused to work, or it did not answer within
    /// `REDIS_RESPONSE_TIMEOUT` (a failure for the breaker and for health).
    Failed,
    /// Redis answered every group: its decisions, or `None` where it refused that group's script
    /// for its data.
    Answered(Vec<Option<Vec<(usize, Decision)>>>),
}

/// How many PINGs fit in `bound` when each may wait `response_timeout` (at least two, at most 64).
fn pings_within(bound: Duration, response_timeout: Duration) -> u32 {
    let each = response_timeout.as_micros().max(1);
    u32::try_from(bound.as_micros() / each + 1)
        .unwrap_or(u32::MAX)
        .clamp(2, 64)
}

/// Whether `ping` succeeds within `bound`, sent at most `tries` times. The connection answers
/// each command within its own response timeout (`REDIS_RESPONSE_TIMEOUT`), often far shorter
/// than the health check's bound: a PING that times out on it is sent again, so one stall of a
/// healthy Redis shorter than the bound (an expire cycle, a fork for a snapshot, `DEBUG SLEEP`)
/// does not mark it down, while a Redis that stays silent for the whole bound does. An error that
/// is not a timeout (refused, reset, an error reply) fails at once.
async fn answers_within<F, Fut>(bound: Duration, tries: u32, mut ping: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), redis::RedisError>>,
{
    let pinging = async {
        for _ in 0..tries {
            match ping().await {
                Ok(()) => return true,
                Err(e) if e.is_timeout() => {}
                Err(_) => return false,
            }
        }
        false
    };
    tokio::time::timeout(bound, pinging).await.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::{Breakers, answers_within, intern, pings_within};
    use crate::store::Resilience;
    use ratelimitd_core::clock::{Clock, ManualClock, Timestamp};
    use ratelimitd_core::resilience::BreakerState;

    #[test]
    fn each_master_has_its_own_breaker_until_it_holds_no_slot() {
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Timestamp::from_secs(1)));
        let b = Breakers::new(&Resilience::default(), false, &clock).expect("breakers on");
        let (a, c) = (
            intern("10.0.0.1:6379".into()),
            intern("10.0.0.2:6379".into()),
        );
        assert!(
            std::ptr::eq(a, intern("10.0.0.1:6379".into())),
            "one name each"
        );
        for _ in 0..3 {
            let breaker = b.get(a);
            breaker.record(breaker.permit(), false);
        }
        assert_eq!(b.get(a).state(), BreakerState::Open);
        assert_eq!(b.get(c).state(), BreakerState::Closed, "the other master");
        assert_eq!(b.get("main").state(), BreakerState::Closed);
        let targets: Vec<&str> = b.reports().iter().map(|r| r.target).collect();
        assert_eq!(targets, ["10.0.0.1:6379", "10.0.0.2:6379", "main"]);
        // `a` failed over to `c`: its open breaker no longer reports an outage.
        b.keep_only(&[c]);
        let targets: Vec<&str> = b.reports().iter().map(|r| r.target).collect();
        assert_eq!(targets, ["10.0.0.2:6379", "main"]);
    }

    fn timed_out() -> redis::RedisError {
        std::io::Error::new(std::io::ErrorKind::TimedOut, "response timeout").into()
    }

    /// The replies a fake PING gives in turn (the last one repeats); counts the PINGs sent.
    fn replies(
        seq: Vec<fn() -> Result<(), redis::RedisError>>,
        sent: &std::cell::Cell<usize>,
    ) -> impl FnMut() -> std::future::Ready<Result<(), redis::RedisError>> + '_ {
        move || {
            let n = sent.get();
            sent.set(n + 1);
            std::future::ready(seq[n.min(seq.len() - 1)]())
        }
    }

    #[tokio::test]
    async fn a_ping_that_times_out_during_a_stall_is_sent_again_within_the_bound() {
        let bound = Duration::from_millis(500);
        let sent = std::cell::Cell::new(0);
        // Two PINGs caught in a stall, then an answer: healthy.
        let ping = replies(
            vec![|| Err(timed_out()), || Err(timed_out()), || Ok(())],
            &sent,
        );
        assert!(answers_within(bound, 8, ping).await);
        assert_eq!(sent.get(), 3);
        // Silent every time: down, after the PINGs the bound allows.
        sent.set(0);
        assert!(!answers_within(bound, 8, replies(vec![|| Err(timed_out())], &sent)).await);
        assert_eq!(sent.get(), 8);
        // Refused: down at once, no second PING.
        sent.set(0);
        let refused = || -> Result<(), redis::RedisError> {
            Err(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused").into())
        };
        assert!(!answers_within(bound, 8, replies(vec![refused], &sent)).await);
        assert_eq!(sent.get(), 1);
    }

    #[test]
    fn the_pings_that_fit_in_the_bound() {
        let ms = Duration::from_millis;
        // The 15 ms default under the 500 ms bound: 34 PINGs of 15 ms cover it.
        assert_eq!(pings_within(ms(500), ms(15)), 34);
        assert_eq!(pings_within(ms(500), ms(100)), 6);
        // A response timeout above the bound: the bound is the timeout, two tries at least.
        assert_eq!(pings_within(ms(2000), ms(2000)), 2);
        assert_eq!(pings_within(ms(500), Duration::ZERO), 64);
    }
}
