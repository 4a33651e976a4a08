//! Token leases for hot keys: a second tier in front of a shared (Redis) counter. When a fixed
//! window op carries a lease (`lease: N` on its limit, or `LEASE_DEFAULT_SIZE`), the Redis store
//! sends it with a reservation: one atomic script call (`lua/lease.lua`) adds the op's hits and,
//! when they fit, also takes a grant of `min(N, room / SHARE)` hits from the same counter, where
//! `room` is what is left of the limit after the op. The grant is never more than remains, so the
//! fleet can never admit more than the limit. This instance then answers the key's next hits from
//! its grant under a short per-table lock, without a Redis call ([`Leases::serve`], reported as
//! `Source::Lease`), and reserves again when the grant is spent.
//!
//! Near the limit the grant shrinks with the room (a quarter of it, so instances cannot starve
//! each other), and once it would be below [`MIN_GRANT`] nothing is reserved: the last hits of a
//! window are decided by Redis one by one, exactly.
//!
//! Unspent hits go back: a lease ends with its window (the counter key is per window, so there is
//! nothing to give back); on reload and shutdown [`Leases::drain`] empties the table and the store
//! refunds what was left. A lease whose limit changed (another rate or lease size) is given back
//! inside the next reservation of its key. A killed instance cannot give back: up to `N` hits per
//! key it held stay counted until that window ends — the under-admission bound of a crash.
//!
//! Only fixed windows lease (validation refuses `lease` elsewhere): a sliding log stamps each hit
//! with its own time, a sliding window weighs hits by when they came, and a leaky bucket's answer
//! is a time slot per hit, so a batch taken now would be spent at other times than it was counted
//! at; token buckets would need a lease time-to-live and a refund of tokens — not done yet.

pub mod counters;

use std::collections::HashMap;

use parking_lot::Mutex;

use super::Op;
use crate::algorithm::{Algorithm, Decision, LimitSpec, fixed_window};
use crate::clock::Timestamp;
pub use counters::{LeaseCounters, LeaseTotals};

/// The largest `lease` a limit may ask for.
pub const MAX_LEASE: u32 = 1_000_000;
/// A grant is at most one `SHARE`th of the room left in the window.
pub const SHARE: u64 = 4;
/// Grants smaller than this are not taken: the hit goes to Redis alone.
pub const MIN_GRANT: u64 = 2;
/// The most keys with a live lease; past it (after dropping ended windows) ops go to Redis alone.
const MAX_LEASED_KEYS: usize = 100_000;

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
    /// When its window ends.
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

/// This instance's leases, by counter key.
#[derive(Debug, Default)]
pub struct Leases {
    table: Mutex<HashMap<String, Lease>>,
    /// Unspent hits of leases whose limit changed, given back by the key's next reservation.
    outdated: Mutex<HashMap<String, (LimitSpec, u64)>>,
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

    /// The lease size of `op`: 0 unless it is a fixed window op that takes hits now.
    pub fn size(&self, op: &Op) -> u32 {
        let leasable =
            op.spec.algorithm == Algorithm::FixedWindow && !op.refund && op.max_wait.is_zero();
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
        let mut table = self.table.lock();
        if let Some(l) = table.get_mut(&op.key) {
            if l.until <= now {
                // Its window is over: the counter it was taken from is gone with it.
                table.remove(&op.key);
            } else if l.spec != op.spec || l.size != size {
                let (spec, left) = (l.spec, l.left);
                table.remove(&op.key);
                let mut outdated = self.outdated.lock();
                outdated.entry(op.key.clone()).or_insert((spec, 0)).1 += left;
            } else if l.left >= op.hits {
                l.left -= op.hits;
                l.remaining = l.remaining.saturating_sub(op.hits);
                let after = op.spec.limit.saturating_sub(l.remaining);
                let d = fixed_window::decide(
                    after.saturating_sub(op.hits),
                    after,
                    op.spec.limit,
                    op.spec.window,
                    now,
                );
                if l.left == 0 {
                    table.remove(&op.key);
                }
                drop(table);
                self.counters.served(op.hits);
                return Serve::Served(d);
            }
        }
        if table.len() >= MAX_LEASED_KEYS {
            table.retain(|_, l| l.until > now);
            if table.len() >= MAX_LEASED_KEYS {
                return Serve::Plain;
            }
        }
        Serve::Reserve
    }

    /// The unspent hits of an outdated lease on `key`, for its next reservation to give back.
    pub fn take_outdated(&self, key: &str) -> u64 {
        self.outdated.lock().remove(key).map_or(0, |(_, hits)| hits)
    }

    /// Records a reservation's answer: `d` decided the op's own hits, `granted` more were taken
    /// for this instance (0: none). Grants that race on one key add up.
    pub fn granted(&self, op: &Op, d: &Decision, granted: u64) {
        if granted == 0 {
            return;
        }
        self.counters.taken(granted);
        let size = self.size(op);
        let mut table = self.table.lock();
        let lease = table.entry(op.key.clone()).or_insert(Lease {
            spec: op.spec,
            size,
            left: 0,
            remaining: d.remaining,
            until: d.expires_at,
        });
        lease.left += granted;
        // The newest answer does not count this instance's older grant as remaining: never report
        // less than what this instance can still admit on its own.
        lease.remaining = lease.remaining.min(d.remaining).max(lease.left);
    }

    /// Takes every lease still live at `now` out of the table (ended windows are dropped), for
    /// the caller to refund.
    pub fn drain(&self, now: Timestamp) -> Vec<Unspent> {
        let table = std::mem::take(&mut *self.table.lock());
        let outdated = std::mem::take(&mut *self.outdated.lock());
        let live = table
            .into_iter()
            .filter(|(_, l)| l.until > now)
            .map(|(key, l)| (key, l.spec, l.left));
        let outdated = outdated
            .into_iter()
            .map(|(key, (spec, hits))| (key, spec, hits));
        live.chain(outdated)
            .filter(|(_, _, hits)| *hits > 0)
            .map(|(key, spec, hits)| Unspent { key, spec, hits })
            .collect()
    }

    /// Hits held on every key now (tests).
    pub fn held(&self) -> u64 {
        self.table.lock().values().map(|l| l.left).sum()
    }
}

#[cfg(test)]
mod tests;
