//! Hot key split (`split: N` on a limit): the limit's counter becomes `N` sub-keys, each request
//! charges one of them against that sub-key's share of the limit, and the sub-keys sit in `N`
//! different Redis Cluster hash slots, so one hot descriptor loads `N` slots (and so, on a
//! cluster whose masters own equal runs of slots, up to `N` masters) instead of one.
//!
//! **Exactness.** Sub-key `i` of `N` counts against `floor(L/N) + (i < L mod N)`: the shares add
//! up to `L` exactly, and each sub-key is exact on its own, so all instances together never admit
//! more than `L` in a window (for buckets: more than the burst at once, or the rate over time).
//! The error is the other way: a request refused by a full sub-key while another still has room is
//! under-admission, which grows with how unevenly requests fall on the sub-keys.
//!
//! **Which sub-key.** A uniform draw of the limiter's [`Random`] (seeded in tests), so sub-keys
//! fill evenly whatever the callers do; a concurrency limit hashes the holder id instead, so the
//! release of a slot reaches the sub-key that holds it.
//!
//! **Which slot.** Every key of one limit shares the hash tag `{…}` of its identity
//! ([`super::key`]); a sub-key appends `#N.i.s` inside that tag, where the salt `s` is the smallest
//! whose slot falls in the middle half of the `i`-th of `N` equal runs of the 16 384 slots. A
//! cluster whose masters own equal runs (as `redis-cli --cluster create` makes them) and whose
//! master count divides `N` so gets `N / masters` sub-keys on every master. The salt is a pure
//! function of the key, so every instance finds the same one.

use std::ops::Range;

use crate::algorithm::LimitSpec;
use crate::random::Random;

/// Redis Cluster's number of hash slots.
pub const SLOTS: u16 = 16_384;

/// Most salts tried for one sub-key. The middle half of a run is hit with probability
/// `1 / (2N)` per salt (1/128 at the largest `N`), so this bound is never reached in practice;
/// when it is, the first salt in the run is kept (or 0), which is still a valid, exact key.
const MAX_SALTS: u32 = 4096;

/// One sub-key of a split limit: sub-key `i` of `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubKey {
    /// How many sub-keys the limit has (`split`).
    pub n: u32,
    /// This sub-key, `0..n`.
    pub i: u32,
}

impl SubKey {
    /// The sub-key a request charges among `n`: the one `holder` hashes to (a concurrency
    /// limit's holder id, so that its release reaches the same sub-key), else a uniform draw.
    pub fn choose(n: u32, holder: Option<&str>, random: &dyn Random) -> SubKey {
        let n = n.max(1);
        let i = match holder {
            Some(holder) => (fnv1a(holder.as_bytes()) % u64::from(n)) as u32,
            // `unit()` is below 1, so the product is below `n`; `min` guards the rounding anyway.
            None => ((random.unit() * f64::from(n)) as u32).min(n - 1),
        };
        SubKey { n, i }
    }

    /// The spec sub-key `self` counts against: `whole` with its limit and burst shared out.
    pub fn spec(self, whole: &LimitSpec) -> LimitSpec {
        LimitSpec {
            limit: share(whole.limit, self.n, self.i),
            burst: share(whole.burst, self.n, self.i),
            ..*whole
        }
    }
}

/// Sub-key `i`'s share of `total` among `n`: `floor(total / n)`, plus one for the first
/// `total mod n` sub-keys, so that the shares add up to `total` exactly.
pub fn share(total: u64, n: u32, i: u32) -> u64 {
    let n = u64::from(n.max(1));
    total / n + u64::from(u64::from(i) < total % n)
}

/// Where a split op's sub-key marker sits in its key, with what its other sub-keys need: the
/// unsplit spec to share out. [`super::plan::Plans::sub_ops`] builds every sub-key from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// The sub-key the op charges.
    pub sub: SubKey,
    /// The limit's spec before it was shared out.
    pub whole: LimitSpec,
    /// The marker's bytes in the op's key.
    pub at: Range<usize>,
}

/// Appends sub-key `sub`'s marker, `#n.i.salt`, to `key`: the key so far, whose hash tag is
/// open (the caller closes it next). The salt puts the key's slot in sub-key `i`'s run.
pub(crate) fn push_marker(key: &mut String, sub: SubKey) {
    key.push('#');
    key.push_str(itoa::Buffer::new().format(sub.n));
    key.push('.');
    key.push_str(itoa::Buffer::new().format(sub.i));
    key.push('.');
    let salt = salt(key, sub);
    key.push_str(itoa::Buffer::new().format(salt));
}

/// The salt for `key` (ending with the marker's `#n.i.`), by the rule of this module. When the
/// hash tag is not open at the end of `key` (a `}` in a value closed it early, or the prefix has
/// its own tag), no salt moves the slot: 0.
fn salt(key: &str, sub: SubKey) -> u32 {
    let Some(open) = key.find('{') else { return 0 };
    let tag = &key.as_bytes()[open + 1..];
    if tag.contains(&b'}') {
        return 0;
    }
    let state = crc16_update(0, tag);
    let n = u32::from(SLOTS);
    let parts = sub.n.max(1);
    let i = sub.i.min(parts - 1);
    let run = (i * n / parts)..((i + 1) * n / parts);
    let middle = ((4 * i + 1) * n / (4 * parts))..((4 * i + 3) * n / (4 * parts));
    let mut fallback = None;
    for salt in 0..MAX_SALTS {
        let mut digits = itoa::Buffer::new();
        let slot = u32::from(crc16_update(state, digits.format(salt).as_bytes()) % SLOTS);
        if middle.contains(&slot) {
            return salt;
        }
        if fallback.is_none() && run.contains(&slot) {
            fallback = Some(salt);
        }
    }
    fallback.unwrap_or(0)
}

/// The Redis Cluster hash slot of `key`: CRC16 of its [`hash_tag`].
pub fn key_slot(key: &str) -> u16 {
    crc16_update(0, hash_tag(key).as_bytes()) % SLOTS
}

/// What Redis Cluster hashes of `key`: its hash tag (the text between the first `{` and the next
/// `}`, when not empty), else the whole key. Keys with the same tag live in one slot.
pub fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{')
        && let Some(len) = key[open + 1..].find('}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// CRC-16/XMODEM (Redis Cluster's key hash), continued from `crc` over `bytes`.
fn crc16_update(mut crc: u16, bytes: &[u8]) -> u16 {
    for &b in bytes {
        crc = (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ b)];
    }
    crc
}

/// The CRC-16/XMODEM table (polynomial 0x1021).
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// FNV-1a, 64 bits: the same on every instance and in every process (a holder id must reach the
/// same sub-key from any instance), unlike the process-seeded hashers.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests;
