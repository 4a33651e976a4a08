//! Token leases for hot keys: a second tier in front of a shared (Redis, DynamoDB) counter. When a
//! fixed window or token bucket op carries a lease (`lease: N` on its limit, or
//! `LEASE_DEFAULT_SIZE`), the Redis store sends it with a reservation: one atomic script call (`lua/lease.lua`,
//! `lua/bucket_lease.lua`) adds the op's hits and, when they fit, also takes a grant of
//! `min(N, room / SHARE)` hits (tokens) from the same counter (bucket), where `room` is what is
//! left of the limit (the whole tokens in the bucket) after the op. The grant is never more than remains, so
//! the fleet can never admit more than the limit. (The DynamoDB store takes the same grant in its
//! own conditional writes.) This instance then answers the key's next hits
//! from its grant under a short lock on one of [`SHARDS`] parts of the table (picked by the key's
//! hash, so hot keys on different shards never wait for each other), without a Redis call ([`Leases::serve`], reported
//! as `Source::Lease`), and reserves again when the grant is spent.
//!
//! Near the limit the grant shrinks with the room (a quarter of it, so instances cannot starve each
//! other), and once it would be below [`MIN_GRANT`] nothing is reserved: the last hits of a window
//! are decided by Redis one by one, exactly.
//!
//! Unspent hits go back: a fixed window lease ends with its window (the counter key is per window,
//! so there is nothing to give back); a token bucket lease lives for [`local::bucket_ttl`] (the
//! time the bucket takes to refill the grant), then its unspent tokens are given back — by the
//! key's next reservation, or by [`Leases::drain_expired`] within a second; on reload and shutdown
//! [`Leases::drain`] empties the table and the store refunds what was left. A lease whose limit
//! changed (another rate or lease size) is given back inside the next reservation of its key, or by
//! [`Leases::drain_expired`]. A killed instance cannot give back: up to `N` hits per key it held
//! stay counted until that window ends (a bucket refills them) — the under-admission bound of a
//! crash.
//!
//! A refund of tokens never fills a bucket past its capacity. Only fixed windows and token buckets
//! lease (validation refuses `lease` elsewhere): a sliding log stamps each hit with its own time, a
//! sliding window weighs hits by when they came, and a leaky bucket's answer is a time slot per
//! hit, so a batch taken now would be spent at other times than it was counted at.

pub mod counters;
pub mod local;

use std::collections::HashMap;

use parking_lot::Mutex;

use super::Op;
use crate::algorithm::{Algorithm, Decision, LimitSpec};
use crate::clock::Timestamp;
pub use counters::{LeaseCounters, LeaseTotals};

pub use crate::config::MAX_LEASE;
/// A grant is at most one `SHARE`th of the room left in the window.
pub const SHARE: u64 = 4;
/// Grants smaller than this are not taken: the hit goes to Redis alone.
pub const MIN_GRANT: u64 = 2;
/// The most keys with a live lease; past it (after dropping ended windows) ops go to Redis alone.
const MAX_LEASED_KEYS: usize = 100_000;
/// Parts of the lease table, each with its own lock; a key always lives in the same one.
pub const SHARDS: usize = 16;
/// Live leases per shard (the table's bound spread evenly).
const MAX_LEASED_PER_SHARD: usize = MAX_LEASED_KEYS / SHARDS;

/// The hits one instance holds on one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lease {
    /// The limit it was taken for: another limit never spends it.
    spec: LimitSpec,
    /// The lease size it was taken with.
    size: u32,
    /// Hits reserved and not spent yet.
    left: u64,
    /// What Redis said remained of the limit at the last reservation (the grant not counted).
    remaining: u64,
    /// When it stops serving: its window's end, or a token bucket lease's TTL.
    until: Timestamp,
}

/// What to do with one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serve {
    /// Answered from this instance's lease.
    Served(Decision),
    /// Send it to Redis with a reservation ([`Leases::size`] hits at most).
    Reserve,
    /// No lease applies: the op goes to Redis as it is.
    Plain,
}

/// One unspent lease taken out of the table, to be refunded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unspent {
    /// The counter key.
    pub key: String,
    /// Its limit.
    pub spec: LimitSpec,
    /// The hits to give back.
    pub hits: u64,
}

impl Unspent {
    /// The refund op that gives these hits back to the shared counter (never itself leased).
    pub fn refund(self) -> Op {
        Op {
            key: self.key,
            spec: self.spec,
            hits: self.hits,
            refund: true,
            max_wait: std::time::Duration::ZERO,
            lease: Some(0),
            holder: String::new(),
            only_admitted: false,
            report: false,
        }
    }
}

/// The hits the store took back for `refund` (an [`Unspent::refund`] op) that it answered `d`:
/// a fixed window's refund says how far its count went down; a bucket's only how full it is now,
/// so its tokens count as sent (never past full: the rest was refilled meanwhile).
pub fn returned(refund: &Op, d: &Decision) -> u64 {
    match refund.spec.algorithm {
        Algorithm::TokenBucket => refund.hits,
        _ => d.before.saturating_sub(d.after),
    }
}

/// Gives `unspent` back to `store` as refunds at `now` (a reload, shutdown, an expired bucket
/// lease) and adds what the store took back to `counters`; returns it. A failed call is logged
/// and gives back nothing: those hits stay counted until their window ends (a bucket refills
/// them), as a killed instance's do.
async fn give_back<S: super::Store + ?Sized>(
    store: &S,
    counters: &LeaseCounters,
    unspent: Vec<Unspent>,
    now: Timestamp,
) -> u64 {
    let ops: Vec<Op> = unspent.into_iter().map(Unspent::refund).collect();
    if ops.is_empty() {
        return 0;
    }
    let answers = match store.apply(&ops, now).await {
        Ok(answers) => answers,
        Err(e) => {
            tracing::warn!(error = %e, "unspent leases not given back");
            return 0;
        }
    };
    let returned = (ops.iter().zip(&answers))
        .filter_map(|(op, a)| Some(returned(op, a.decision()?)))
        .sum();
    counters.returned(returned);
    tracing::info!(
        keys = ops.len(),
        hits = returned,
        "unspent leases given back"
    );
    returned
}

/// This instance's leases, by counter key.
#[derive(Debug, Default)]
pub struct Leases {
    /// Live leases, sharded by key hash.
    table: [Mutex<HashMap<String, Lease>>; SHARDS],
    /// Unspent hits of retired leases (limit changed, bucket TTL passed), given back by the key's
    /// next reservation or by [`Leases::drain_expired`]; same shards as `table`. A table shard
    /// is always locked before its outdated shard.
    outdated: [Mutex<HashMap<String, (LimitSpec, u64)>>; SHARDS],
    /// Picks a key's shard.
    hasher: ahash::RandomState,
    /// `LEASE_DEFAULT_SIZE`.
    default_size: u32,
    /// What the leases did, for metrics.
    pub counters: LeaseCounters,
}

impl Leases {
    /// No leases yet; ops without their own `lease` use `default_size` (0 = none).
    pub fn new(default_size: u32) -> Leases {
        Leases {
            default_size: default_size.min(MAX_LEASE),
            ..Leases::default()
        }
    }

    /// The shard of `key`.
    fn shard(&self, key: &str) -> usize {
        (self.hasher.hash_one(key) >> 32) as usize % SHARDS
    }

    /// The lease size of `op`: 0 unless it is a fixed window or token bucket op taking hits now.
    pub fn size(&self, op: &Op) -> u32 {
        let leasable = matches!(
            op.spec.algorithm,
            Algorithm::FixedWindow | Algorithm::TokenBucket
        ) && !op.refund
            && op.max_wait.is_zero();
        if leasable {
            op.lease.unwrap_or(self.default_size).min(MAX_LEASE)
        } else {
            0
        }
    }

    /// Answers `op` at `now` from its key's lease when that holds enough hits, else says how to
    /// send it to Redis.
    pub fn serve(&self, op: &Op, now: Timestamp) -> Serve {
        let size = self.size(op);
        if size == 0 {
            return Serve::Plain;
        }
        let mut table = self.table[self.shard(&op.key)].lock();
        if let Some(l) = table.get_mut(&op.key) {
            if l.until <= now || l.spec != op.spec || l.size != size {
                // Expired or taken for another limit: its reservation gives it back.
                let l = *l;
                table.remove(&op.key);
                self.retire(&op.key, &l, now);
            } else if l.left >= op.hits {
                l.left -= op.hits;
                l.remaining = l.remaining.saturating_sub(op.hits);
                let d = local::decide(&op.spec, l.remaining, op.hits, now);
                if l.left == 0 {
                    table.remove(&op.key);
                }
                drop(table);
                self.counters.served(op.hits);
                return Serve::Served(d);
            }
        }
        if table.len() >= MAX_LEASED_PER_SHARD {
            self.expire(&mut table, now);
            if table.len() >= MAX_LEASED_PER_SHARD {
                return Serve::Plain;
            }
        }
        Serve::Reserve
    }

    /// Puts the unspent hits of a lease taken out of the table on `key` aside to be given back,
    /// unless an ended fixed window took them along.
    fn retire(&self, key: &str, l: &Lease, now: Timestamp) {
        let gone = l.spec.algorithm == Algorithm::FixedWindow && l.until <= now;
        if !gone && l.left > 0 {
            let mut outdated = self.outdated[self.shard(key)].lock();
            outdated.entry(key.to_owned()).or_insert((l.spec, 0)).1 += l.left;
        }
    }

    /// Takes every lease that stopped serving at `now` out of `table` (one shard), retiring each.
    fn expire(&self, table: &mut HashMap<String, Lease>, now: Timestamp) {
        let ended: Vec<String> = table
            .iter()
            .filter(|(_, l)| l.until <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in ended {
            if let Some(l) = table.remove(&key) {
                self.retire(&key, &l, now);
            }
        }
    }

    /// The unspent hits of an outdated or expired lease on `key`, for the next reservation of
    /// `op` to give back (only into a counter of the same algorithm: others wait for the drain).
    pub fn take_outdated(&self, op: &Op) -> u64 {
        let mut outdated = self.outdated[self.shard(&op.key)].lock();
        match outdated.get(&op.key) {
            Some((spec, _)) if spec.algorithm == op.spec.algorithm => {
                outdated.remove(&op.key).map_or(0, |(_, hits)| hits)
            }
            _ => 0,
        }
    }

    /// Records a reservation's answer: `d` decided the op's own hits, `granted` more were taken
    /// for this instance (0: none). Grants that race on one key add up.
    pub fn granted(&self, op: &Op, d: &Decision, granted: u64, now: Timestamp) {
        if granted == 0 {
            return;
        }
        self.counters.taken(granted);
        let size = self.size(op);
        let mut table = self.table[self.shard(&op.key)].lock();
        let lease = table.entry(op.key.clone()).or_insert(Lease {
            spec: op.spec,
            size,
            left: 0,
            remaining: d.remaining,
            until: local::until(&op.spec, size, d, now),
        });
        lease.left += granted;
        // The newest answer does not count this instance's older grant as remaining: never report
        // less than what this instance can still admit on its own.
        lease.remaining = lease.remaining.min(d.remaining).max(lease.left);
    }

    /// Gives every lease of this instance back to `store` at `now` (a reload, shutdown): what
    /// [`Leases::drain`] takes, refunded in one call; returns the hits the store took back.
    /// Leases whose call fails stay counted until their window ends (a bucket refills them), like
    /// a killed instance's.
    pub async fn give_back_all<S: super::Store + ?Sized>(&self, store: &S, now: Timestamp) -> u64 {
        give_back(store, &self.counters, self.drain(now), now).await
    }

    /// Gives back to `store` the token bucket leases whose TTL passed at `now` and the leases of
    /// changed limits that no reservation gave back yet ([`Leases::drain_expired`]).
    pub async fn give_back_expired<S: super::Store + ?Sized>(
        &self,
        store: &S,
        now: Timestamp,
    ) -> u64 {
        give_back(store, &self.counters, self.drain_expired(now), now).await
    }

    /// Takes every lease out of the table (ended windows are dropped), for the caller to refund.
    pub fn drain(&self, now: Timestamp) -> Vec<Unspent> {
        for shard in &self.table {
            let table = std::mem::take(&mut *shard.lock());
            for (key, l) in table {
                self.retire(&key, &l, now);
            }
        }
        self.take_retired()
    }

    /// Takes the leases that stopped serving at `now` (token bucket TTLs) and those put aside
    /// for another limit out of the table, for the caller to refund; live leases stay. Shard by
    /// shard, so requests on other shards go on during the sweep.
    pub fn drain_expired(&self, now: Timestamp) -> Vec<Unspent> {
        for shard in &self.table {
            self.expire(&mut shard.lock(), now);
        }
        self.take_retired()
    }

    fn take_retired(&self) -> Vec<Unspent> {
        (self.outdated.iter())
            .flat_map(|shard| std::mem::take(&mut *shard.lock()))
            .filter(|(_, (_, hits))| *hits > 0)
            .map(|(key, (spec, hits))| Unspent { key, spec, hits })
            .collect()
    }

    /// Drops this instance's lease on `key` and any unspent hits put aside for it, without giving
    /// them back: the counter they were reserved from was just reset. True when one was held.
    pub fn forget(&self, key: &str) -> bool {
        let shard = self.shard(key);
        let mut table = self.table[shard].lock();
        let leased = table.remove(key).is_some();
        let outdated = self.outdated[shard].lock().remove(key).is_some();
        leased || outdated
    }

    /// [`Leases::forget`] for every key starting with `prefix`; how many were held.
    pub fn forget_prefix(&self, prefix: &str) -> usize {
        let mut n = 0;
        for (table, outdated) in self.table.iter().zip(&self.outdated) {
            let mut table = table.lock();
            let before = table.len();
            table.retain(|k, _| !k.starts_with(prefix));
            n += before - table.len();
            outdated.lock().retain(|k, _| !k.starts_with(prefix));
        }
        n
    }

    /// Hits held on every key now (tests).
    pub fn held(&self) -> u64 {
        (self.table.iter())
            .map(|shard| shard.lock().values().map(|l| l.left).sum::<u64>())
            .sum()
    }
}

#[cfg(test)]
mod tests;
