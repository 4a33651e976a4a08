//! One RLQS stream's state: its domain (from the first report), the buckets it reported with
//! their recent demand, budget and last assignment. A report is answered with one action per
//! reported bucket whose assignment changed or is due for renewal; a configuration change
//! re-assigns the buckets whose budget changed and abandons those whose limit disappeared. Bad
//! reports become the gRPC status that ends the stream.
//!
//! What the board costs: a bucket's demand is posted only when it changed (or its entry is
//! half-way to expiry and the bucket was reported since), and the once-a-second re-split reads the
//! board only for buckets with active demand (reported within the assignment TTL, with requests,
//! under a rate) that the change feed names ([`super::changes`]). A bucket whose demand holds
//! still costs no store call, its renewals included (they resend the last assignment); a stream
//! announces its changes in one call per report or tick, and the process reads the feed once a
//! second for all its streams.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tonic::Status;

use super::Shared;
use super::actions;
use super::bucket::{self, BucketKey, Budget};
use super::changes::Changed;
use super::checks;
use super::demand::{self, Recent};
use super::split::{self, Assignment};
use super::tracked::{Posted, Tracked};
use crate::grpc::pb::envoy::service::rate_limit_quota::v3 as pb;
use crate::reload::Snapshot;
use crate::rlqs::Unmatched;
use crate::store::redis::quota_demand::DemandPost;
use pb::rate_limit_quota_response::BucketAction;
use ratelimitd_core::clock::{Stopwatch, Timestamp};

/// An assignment lives this many reporting intervals (at least `RLQS_MIN_ASSIGNMENT_TTL`).
const TTL_INTERVALS: u32 = 3;

/// The longest reporting interval taken into account (a stalled report must not stretch TTLs).
const MAX_INTERVAL: Duration = Duration::from_secs(300);

/// One stream's buckets and domain.
#[derive(Debug)]
pub struct Stream {
    member: u64,
    domain: Option<String>,
    buckets: HashMap<BucketKey, Tracked>,
    interval: Duration,
    version: u64,
    /// When the stream opened or last sent a report (service clock).
    heard: Timestamp,
    /// The stream's place in the board's change log (from its first report on).
    seen: Option<u64>,
    /// Fingerprints of the buckets whose demand this stream changed on the board and has not
    /// announced yet.
    pending: Vec<u64>,
    /// Entries posted to expire up to this time were announced as lapsed.
    lapsed: Timestamp,
}

impl Stream {
    /// A stream known on the demand board as `member` (unique across the fleet), opened `now`.
    pub fn new(member: u64, now: Timestamp) -> Stream {
        Stream {
            member,
            domain: None,
            buckets: HashMap::new(),
            interval: Duration::from_secs(1),
            version: 0,
            heard: now,
            seen: None,
            pending: Vec::new(),
            lapsed: now,
        }
    }

    /// How many buckets the stream tracks.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// How long the stream has sent no report, at `now`.
    pub fn silent_for(&self, now: Timestamp) -> Duration {
        Duration::from_micros(now.as_micros().saturating_sub(self.heard.as_micros()))
    }

    fn ttl(&self, shared: &Shared) -> Duration {
        (self.interval * TTL_INTERVALS).max(shared.options.min_assignment_ttl)
    }

    /// Answers one usage report: an action for each bucket whose assignment changed or is due
    /// for renewal (`None` when there is none).
    pub async fn report(
        &mut self,
        shared: &Shared,
        msg: pb::RateLimitQuotaUsageReports,
    ) -> Result<Option<pb::RateLimitQuotaResponse>, Status> {
        let now = shared.clock.now();
        self.heard = now;
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
        let bounds = checks::Bounds {
            prefix: &shared.prefix,
            domain: &domain,
            options: &shared.options,
            tracked: self.buckets.len(),
        };
        let usages = checks::usages(
            &msg.bucket_quota_usages,
            |k| self.buckets.contains_key(k),
            &bounds,
        )?;
        self.domain = Some(domain);
        // Changes made after this are seen at the next tick; the board is read below anyway.
        if self.seen.is_none() {
            self.seen = Some(shared.board.cursor(&shared.prefix).await);
        }
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
            let tracked = match self.buckets.entry(key.clone()) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    shared.metrics_buckets(1);
                    v.insert(Tracked {
                        recent: Recent::default(),
                        budget,
                        sent: None,
                        sent_at: None,
                        posted: None,
                        reported: now,
                    })
                }
            };
            let requests = u.num_requests_allowed.saturating_add(u.num_requests_denied);
            tracked.recent.add(requests, elapsed);
            tracked.reported = now;
            let budget_changed = tracked.budget != budget;
            tracked.budget = budget;
            out.extend(self.refresh(shared, &key, budget_changed, false).await);
        }
        self.version = snapshot.version;
        self.announce(shared).await;
        Ok((!out.is_empty()).then_some(pb::RateLimitQuotaResponse { bucket_action: out }))
    }

    /// The action for tracked bucket `key` if its assignment changed (a rise within
    /// [`split::HYSTERESIS`] does not count) or is due for renewal, remembered as sent. With
    /// `resplit`, the board is read even when the stream has nothing new to post.
    async fn refresh(
        &mut self,
        shared: &Shared,
        key: &BucketKey,
        budget_changed: bool,
        resplit: bool,
    ) -> Option<BucketAction> {
        let previous = self.buckets.get(key)?.sent;
        let a = self.assign(shared, key, budget_changed, resplit).await;
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
        Some(actions::assign(&key.id(), a, ttl))
    }

    /// Once a second: after a configuration change, `Stream::reassess`; otherwise the share,
    /// again from the board, of every bucket with active demand whose demands another stream
    /// changed (the change feed says which), so a new Envoy's arrival (or an old one's departure)
    /// moves the others' assignments without waiting for their next report (Envoy 1.40 reports
    /// every few seconds whatever its `reporting_interval`); and renewals of the other buckets
    /// still reported, which resend the last assignment without a store call. Entries of this
    /// stream that expired are announced (one call for all). Buckets not reported within a TTL
    /// cost nothing.
    pub async fn tick(&mut self, shared: &Shared) -> Option<pb::RateLimitQuotaResponse> {
        self.domain.as_ref()?;
        if shared.config.snapshot()?.version != self.version {
            return self.reassess(shared).await;
        }
        let (now, ttl, member) = (shared.clock.now(), self.ttl(shared), self.member);
        let changed = match self.seen.as_mut() {
            Some(seen) => shared.board.changes(&shared.prefix, seen, member).await,
            None => Changed::Buckets(HashSet::new()),
        };
        let mut live: Vec<(BucketKey, bool)> = self
            .buckets
            .iter()
            .filter(|(_, t)| t.live(now, ttl))
            .map(|(k, t)| {
                let resplit = t.active(now, ttl) && changed.contains(k.fingerprint());
                (k.clone(), resplit)
            })
            .collect();
        live.sort();
        let mut out = Vec::new();
        for (key, resplit) in live {
            out.extend(self.refresh(shared, &key, false, resplit).await);
        }
        self.lapse(now);
        self.announce(shared).await;
        (!out.is_empty()).then_some(pb::RateLimitQuotaResponse { bucket_action: out })
    }

    /// Queues the buckets whose posted entry expired since the last look (others' shares grow).
    fn lapse(&mut self, now: Timestamp) {
        let since = std::mem::replace(&mut self.lapsed, now);
        let gone = self
            .buckets
            .iter()
            .filter(|(_, t)| t.posted.is_some_and(|p| p.until > since && p.until <= now));
        self.pending.extend(gone.map(|(k, _)| k.fingerprint()));
    }

    /// Announces the queued changes (one call, none when there are none).
    async fn announce(&mut self, shared: &Shared) {
        let changed = std::mem::take(&mut self.pending);
        shared
            .board
            .announce(&shared.prefix, self.member, changed)
            .await;
    }

    fn budget_of(&self, shared: &Shared, snapshot: &Snapshot, key: &BucketKey) -> Option<Budget> {
        let name = self.domain.as_deref()?;
        let domain = snapshot.config.domain(name)?;
        let stored = shared.overrides.load();
        bucket::budget(domain, name, key, &stored, &shared.keys, shared.clock.now())
    }

    /// The assignment of tracked bucket `key` now, remembered as sent. The demand is posted when
    /// it changed, when its entry is half-way to expiry, or when the budget changed; otherwise
    /// the board is only read with `resplit`, and not at all without (the last assignment
    /// stands).
    async fn assign(
        &mut self,
        shared: &Shared,
        key: &BucketKey,
        budget_changed: bool,
        resplit: bool,
    ) -> Assignment {
        let ttl = self.ttl(shared);
        let member = self.member;
        let Some(t) = self.buckets.get(key) else {
            return Assignment::AllowAll;
        };
        let (budget, demand, previous) = (t.budget, t.recent.per_second(), t.sent);
        let a = match budget {
            None => match shared.options.unmatched {
                Unmatched::Allow => Assignment::AllowAll,
                Unmatched::Deny => Assignment::DenyAll,
            },
            Some(b @ Budget::Rate { .. }) => {
                let now = shared.clock.now();
                let milli = demand::milli(demand);
                let post = t.post_due(milli, now, ttl) || budget_changed;
                if post && t.post_changes(milli, now) {
                    self.pending.push(key.fingerprint());
                }
                if let (false, false, Some(p)) = (post, resplit, previous) {
                    return p;
                }
                let demands = shared
                    .board
                    .exchange(
                        key,
                        DemandPost {
                            member,
                            milli,
                            now,
                            ttl,
                            post,
                        },
                    )
                    .await;
                if post && let Some(t) = self.buckets.get_mut(key) {
                    let until = now.saturating_add(ttl);
                    t.posted = Some(Posted {
                        milli,
                        at: now,
                        until,
                    });
                }
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
                if let Some(t) = self.buckets.remove(&key) {
                    self.leave(shared, &key, &t).await;
                }
                shared.metrics_buckets(-1);
                shared.metrics_assignment("abandon");
                out.push(actions::abandon(&key.id()));
                continue;
            }
            t.budget = budget;
            out.extend(self.refresh(shared, &key, true, false).await);
        }
        self.announce(shared).await;
        (!out.is_empty()).then_some(pb::RateLimitQuotaResponse { bucket_action: out })
    }

    /// Takes bucket `key`'s demand off the board if an entry of this stream may still be live
    /// there (one that expired costs no call).
    async fn leave(&mut self, shared: &Shared, key: &BucketKey, t: &Tracked) {
        if t.on_board(shared.clock.now()) {
            shared.board.leave(key, self.member).await;
            self.pending.push(key.fingerprint());
        }
    }

    /// The stream ended: its demand leaves the board (so the other Envoys get its share at
    /// once, not after the demand's expiry) and its buckets the gauge.
    pub async fn close(&mut self, shared: &Shared) {
        let now = shared.clock.now();
        let posted = self.buckets.iter().filter(|(_, t)| t.on_board(now));
        let keys: Vec<BucketKey> = posted.map(|(k, _)| k.clone()).collect();
        for key in &keys {
            shared.board.leave(key, self.member).await;
        }
        self.pending.extend(keys.iter().map(BucketKey::fingerprint));
        self.announce(shared).await;
        shared.metrics_buckets(-(self.buckets.len() as i64));
        self.buckets.clear();
    }
}
