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
        let domain = match (&self.domain, msg.domain.as_str()) {
            (None, "") => {
                return Err(Status::invalid_argument(
                    "the first usage report of a stream must name its domain",
                ));
            }
            (None, d) => d.to_string(),
            (Some(d), "") => d.clone(),
            (Some(d), new) if d == new => d.clone(),
            (Some(d), new) => {
                return Err(Status::invalid_argument(format!(
                    "the stream's domain is '{d}'; a report named '{new}' (open a new stream to change domains)"
                )));
            }
        };
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
        let usages = self.check(&msg.bucket_quota_usages, shared)?;
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
            let key_name = self.demand_key(shared, &key);
            let previous = self.buckets[&key].sent;
            let a = self.assign(shared, &key, &key_name, budget_changed).await;
            let ttl = self.ttl(shared);
            // Envoy 1.40 rebuilds (and refills) its token bucket on every assignment it
            // receives, so an unchanged one is only resent two reporting intervals before it
            // would expire (at least half its TTL after it was sent).
            let renew = ttl.saturating_sub(self.interval * 2).max(ttl / 2);
            let Some(t) = self.buckets.get_mut(&key) else {
                continue;
            };
            let due = t.sent_at.as_ref().is_none_or(|w| w.elapsed() >= renew);
            if previous != Some(a) || due {
                t.sent_at = Some(Stopwatch::start());
                shared.metrics_assignment(a.strategy());
                out.push(actions::assign(&t.id, a, ttl));
            }
        }
        self.version = snapshot.version;
        Ok((!out.is_empty()).then_some(pb::RateLimitQuotaResponse { bucket_action: out }))
    }

    /// Checks every usage of a report before any is applied.
    fn check<'u>(
        &self,
        usages: &'u [pb::rate_limit_quota_usage_reports::BucketQuotaUsage],
        shared: &Shared,
    ) -> Result<
        Vec<(
            BucketKey,
            &'u pb::rate_limit_quota_usage_reports::BucketQuotaUsage,
        )>,
        Status,
    > {
        let mut checked = Vec::with_capacity(usages.len());
        let mut added = 0usize;
        for (i, u) in usages.iter().enumerate() {
            let key = u
                .bucket_id
                .as_ref()
                .and_then(|id| BucketKey::of(&id.bucket))
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "bucket_quota_usages[{i}].bucket_id: missing, empty, or with an empty key or value"
                    ))
                })?;
            if !self.buckets.contains_key(&key) {
                added += 1;
                let max = shared.settings.max_buckets_per_stream;
                if self.buckets.len() + added > max {
                    return Err(Status::resource_exhausted(format!(
                        "bucket_quota_usages[{i}]: this stream already reports {} buckets (RLQS_MAX_BUCKETS_PER_STREAM={max})",
                        self.buckets.len()
                    )));
                }
            }
            checked.push((key, u));
        }
        Ok(checked)
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
    /// abandon actions for buckets whose limit disappeared (`None` when nothing changed).
    pub async fn reassess(&mut self, shared: &Shared) -> Option<pb::RateLimitQuotaResponse> {
        self.domain.as_ref()?;
        let snapshot = shared.config.snapshot()?;
        if snapshot.version == self.version {
            return None;
        }
        self.version = snapshot.version;
        let ttl = self.ttl(shared);
        let mut out = Vec::new();
        let mut keys: Vec<BucketKey> = self.buckets.keys().cloned().collect();
        keys.sort();
        for key in keys {
            let budget = self.budget_of(shared, &snapshot, &key);
            let Some(t) = self.buckets.get_mut(&key) else {
                continue;
            };
            if t.budget == budget {
                continue;
            }
            if t.budget.is_some() && budget.is_none() {
                let id = t.id.clone();
                self.buckets.remove(&key);
                shared
                    .board
                    .leave(&self.demand_key(shared, &key), self.member);
                shared.metrics_buckets(-1);
                shared.metrics_assignment("abandon");
                out.push(actions::abandon(&id));
                continue;
            }
            t.budget = budget;
            let name = self.demand_key(shared, &key);
            let a = self.assign(shared, &key, &name, true).await;
            shared.metrics_assignment(a.strategy());
            if let Some(t) = self.buckets.get_mut(&key) {
                t.sent_at = Some(Stopwatch::start());
            }
            out.push(actions::assign(&self.buckets[&key].id, a, ttl));
        }
        (!out.is_empty()).then_some(pb::RateLimitQuotaResponse { bucket_action: out })
    }

    /// The stream ended: its demand leaves this process's board and its buckets the gauge.
    pub fn close(&mut self, shared: &Shared) {
        for key in self.buckets.keys() {
            shared
                .board
                .leave(&self.demand_key(shared, key), self.member);
        }
        shared.metrics_buckets(-(self.buckets.len() as i64));
        self.buckets.clear();
    }
}
