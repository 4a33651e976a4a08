//! One RLQS stream's state: its domain (from the first report), the buckets it reported with
//! their recent demand, budget and last assignment. A report is answered with one action per
//! reported bucket; a configuration change re-assigns the buckets whose budget changed and
//! abandons those whose limit disappeared. Bad reports become the gRPC status that ends the stream.

use std::collections::HashMap;
use std::time::Duration;

use tonic::Status;

use super::Shared;
use super::actions;
use super::bucket::{self, BucketKey, Budget};
use super::checks;
use super::demand::Recent;
use super::split::{self, Assignment};
use crate::clock::Stopwatch;
use crate::grpc::pb::envoy::service::rate_limit_quota::v3 as pb;
use crate::reload::Snapshot;
use crate::settings::Unmatched;

/// An assignment lives this many reporting intervals (at least `RLQS_MIN_ASSIGNMENT_TTL`).
const TTL_INTERVALS: u32 = 3;

/// The longest reporting interval taken into account (a stalled report must not stretch TTLs).
const MAX_INTERVAL: Duration = Duration::from_secs(300);

#[derive(Debug)]
struct Tracked {
    id: pb::BucketId,
    recent: Recent,
    /// `None`: no limit matched (the unmatched default applies).
    budget: Option<Budget>,
    sent: Option<Assignment>,
    /// When the last action for this bucket went out (real time: Envoy's assignments expire on
    /// Envoy's clock).
    sent_at: Option<Stopwatch>,
}

/// One stream's buckets and domain.
#[derive(Debug)]
pub struct Stream {
    member: u64,
    domain: Option<String>,
    buckets: HashMap<BucketKey, Tracked>,
    interval: Duration,
    version: u64,
}

impl Stream {
    /// A stream known on the demand board as `member` (unique across the fleet).
    pub fn new(member: u64) -> Stream {
        Stream {
            member,
            domain: None,
            buckets: HashMap::new(),
            interval: Duration::from_secs(1),
            version: 0,
        }
    }

    /// How many buckets the stream tracks.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    fn ttl(&self, shared: &Shared) -> Duration {
        (self.interval * TTL_INTERVALS).max(shared.settings.min_assignment_ttl)
    }

    /// Answers one usage report: an action for each bucket whose assignment changed or is due
    /// for renewal (`None` when there is none).
    pub async fn report(
        &mut self,
        shared: &Shared,
        msg: pb::RateLimitQuotaUsageReports,
    ) -> Result<Option<pb::RateLimitQuotaResponse>, Status> {
        let domain = checks::domain(self.domain.as_deref(), &msg.domain)?;
        let snapshot = shared
            .config
            .snapshot()
            .ok_or_else(|| Status::failed_precondition("no rate limit configuration is loaded"))?;
        if snapshot.config.domain(&domain).is_none() {
            return Err(Status::not_found(format!(
                "unknown domain '{domain}': no rate limit configuration names it"
            )));
        }
        self.domain = Some(domain);
        let usages = checks::usages(
            &msg.bucket_quota_usages,
            |k| self.buckets.contains_key(k),
            (self.buckets.len(), shared.settings.max_buckets_per_stream),
        )?;
        let mut out = Vec::with_capacity(usages.len());
        for (key, u) in usages {
            let elapsed = u
                .time_elapsed
                .map(|d| Duration::new(d.seconds.max(0) as u64, d.nanos.max(0) as u32))
                .unwrap_or_default();
            if !elapsed.is_zero() {
                self.interval = elapsed.clamp(Duration::from_secs(1), MAX_INTERVAL);
            }
            shared.metrics_reported(u.num_requests_allowed, u.num_requests_denied);
            let budget = self.budget_of(shared, &snapshot, &key);
            let is_new = !self.buckets.contains_key(&key);
            let tracked = self.buckets.entry(key.clone()).or_insert_with(|| Tracked {
                id: u.bucket_id.clone().unwrap_or_default(),
                recent: Recent::default(),
                budget,
                sent: None,
                sent_at: None,
            });
            if is_new {
                shared.metrics_buckets(1);
            }
            let requests = u.num_requests_allowed.saturating_add(u.num_requests_denied);
            tracked.recent.add(requests, elapsed);
            let budget_changed = tracked.budget != budget;
            tracked.budget = budget;
            out.extend(self.refresh(shared, &key, budget_changed).await);
        }
        self.version = snapshot.version;
        Ok((!out.is_empty()).then_some(pb::RateLimitQuotaResponse { bucket_action: out }))
    }

    /// The action for tracked bucket `key` if its assignment changed (a rise within
    /// [`split::HYSTERESIS`] does not count) or is due for renewal, remembered as sent.
    async fn refresh(
        &mut self,
        shared: &Shared,
        key: &BucketKey,
        budget_changed: bool,
    ) -> Option<pb::rate_limit_quota_response::BucketAction> {
        let previous = self.buckets.get(key)?.sent;
        let name = self.demand_key(shared, key);
        let a = self.assign(shared, key, &name, budget_changed).await;
        let ttl = self.ttl(shared);
        // Envoy rebuilds (and refills) its token bucket whenever an assignment's numbers change;
        // an unchanged one is resent two reporting intervals before it would expire (at least
        // half its TTL after it was sent), so it never lapses while ratelimitd is reachable.
        let renew = ttl.saturating_sub(self.interval * 2).max(ttl / 2);
        let t = self.buckets.get_mut(key)?;
        let due = t.sent_at.as_ref().is_none_or(|w| w.elapsed() >= renew);
        if previous == Some(a) && !due {
            return None;
        }
        t.sent_at = Some(Stopwatch::start());
        shared.metrics_assignment(a.strategy());
        Some(actions::assign(&t.id, a, ttl))
    }

    /// Once a second: after a configuration change, [`Stream::reassess`]; otherwise every
    /// bucket's share again from the board, so a new Envoy's arrival (or an old one's departure)
    /// moves the others' assignments without waiting for their next report (Envoy 1.40 reports
    /// every few seconds whatever its `reporting_interval`).
    pub async fn tick(&mut self, shared: &Shared) -> Option<pb::RateLimitQuotaResponse> {
        self.domain.as_ref()?;
        if shared.config.snapshot()?.version != self.version {
            return self.reassess(shared).await;
        }
        let mut keys: Vec<BucketKey> = self.buckets.keys().cloned().collect();
        keys.sort();
        let mut out = Vec::new();
        for key in keys {
            out.extend(self.refresh(shared, &key, false).await);
        }
        (!out.is_empty()).then_some(pb::RateLimitQuotaResponse { bucket_action: out })
    }

    fn budget_of(&self, shared: &Shared, snapshot: &Snapshot, key: &BucketKey) -> Option<Budget> {
        let name = self.domain.as_deref()?;
        let domain = snapshot.config.domain(name)?;
        let stored = shared.overrides.load();
        bucket::budget(
            domain,
            name,
            key,
            (&stored, &shared.keys),
            shared.clock.now(),
        )
    }

    fn demand_key(&self, shared: &Shared, key: &BucketKey) -> String {
        key.demand_key(&shared.prefix, self.domain.as_deref().unwrap_or(""))
    }

    /// The assignment of tracked bucket `key` now, remembered as sent.
    async fn assign(
        &mut self,
        shared: &Shared,
        key: &BucketKey,
        demand_key: &str,
        budget_changed: bool,
    ) -> Assignment {
        let ttl = self.ttl(shared);
        let member = self.member;
        let Some(t) = self.buckets.get(key) else {
            return Assignment::AllowAll;
        };
        let (budget, demand, previous) = (t.budget, t.recent.per_second(), t.sent);
        let a = match budget {
            None => match shared.settings.unmatched {
                Unmatched::Allow => Assignment::AllowAll,
                Unmatched::Deny => Assignment::DenyAll,
            },
            Some(b @ Budget::Rate { .. }) => {
                let now = shared.clock.now();
                let demands = shared
                    .board
                    .exchange(demand_key, (member, demand), now, ttl)
                    .await;
                let next = split::assign(b, split::fraction(&demands));
                if budget_changed {
                    next
                } else {
                    split::steady(previous, next)
                }
            }
            Some(b) => split::assign(b, 1.0),
        };
        if let Some(t) = self.buckets.get_mut(key) {
            t.sent = Some(a);
        }
        a
    }

    /// After a configuration change: new assignments for buckets whose budget changed, and
    /// abandon actions for buckets whose limit disappeared.
    async fn reassess(&mut self, shared: &Shared) -> Option<pb::RateLimitQuotaResponse> {
        let snapshot = shared.config.snapshot()?;
        self.version = snapshot.version;
        let mut out = Vec::new();
        let mut keys: Vec<BucketKey> = self.buckets.keys().cloned().collect();
        keys.sort();
        for key in keys {
            let budget = self.budget_of(shared, &snapshot, &key);
            let t = self.buckets.get_mut(&key)?;
            if t.budget == budget {
                continue;
            }
            if t.budget.is_some() && budget.is_none() {
                let id = t.id.clone();
                self.buckets.remove(&key);
                let name = self.demand_key(shared, &key);
                shared.board.leave(&name, self.member).await;
                shared.metrics_buckets(-1);
                shared.metrics_assignment("abandon");
                out.push(actions::abandon(&id));
                continue;
            }
            t.budget = budget;
            out.extend(self.refresh(shared, &key, true).await);
        }
        (!out.is_empty()).then_some(pb::RateLimitQuotaResponse { bucket_action: out })
    }

    /// The stream ended: its demand leaves the board (so the other Envoys get its share at
    /// once, not after the demand's expiry) and its buckets the gauge.
    pub async fn close(&mut self, shared: &Shared) {
        for key in self.buckets.keys() {
            shared
                .board
                .leave(&self.demand_key(shared, key), self.member)
                .await;
        }
        shared.metrics_buckets(-(self.buckets.len() as i64));
        self.buckets.clear();
    }
}
