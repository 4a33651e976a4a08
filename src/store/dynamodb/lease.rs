//! Token leases on DynamoDB ([`ratelimitd_core::store::lease`]): the grant is taken from the
//! same counter or bucket as the op's hits, by the same rule as on Redis — a `SHARE`th of the
//! room left after the op, at most the lease size, nothing below `MIN_GRANT` — so the fleet never
//! admits more than the limit, and the key's next hits are answered from the grant without a
//! DynamoDB call.
//!
//! A fixed window reserves in two writes. The `ADD` of the op's hits returns the count after
//! them (the op is decided on it, as without a lease); then, when the rule allows a grant `g`, a
//! second `ADD g` runs on the condition that the count is still at most `limit - SHARE × g`:
//! the Redis rule checked against the count at the moment of the grant, so a grant never takes
//! more than a `SHARE`th of what is left, however other instances moved the count in between.
//! A grant that loses that race is simply not taken. One write adding hits and grant together
//! would need the count before the write to size the grant: guessing it costs a failed
//! conditional write (DynamoDB bills those) each time the guess is wrong — on every request
//! once a hot key is over its limit, the case leases are for — while the second write costs
//! one write unit per grant, and nothing at all once the key is over (no grant is tried).
//!
//! A token bucket takes its grant inside the op's own optimistic write (`cas.rs`): the same read,
//! the op's hits, then the grant out of the whole tokens left, one conditional `PutItem`.
//!
//! Unspent hits go back as on Redis: the unspent tokens of an expired bucket lease, and the
//! unspent hits of a lease whose limit changed, come off inside the key's next reservation or
//! through [`DynamoStore::give_back_expired`]; reload and shutdown refund every lease
//! ([`DynamoStore::give_back_leases`]). A fixed window lease otherwise ends with its window.

use aws_sdk_dynamodb::types::AttributeValue;

use super::errors::{Failure, classify};
use super::fixed::judged;
use super::{DynamoStore, item};
use ratelimitd_core::algorithm::token_bucket::{self, Params, TokenBucketState};
use ratelimitd_core::algorithm::{AlgorithmState, Decision};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::store::Op;
use ratelimitd_core::store::lease::{LeaseTotals, MIN_GRANT, SHARE};

/// What one op reserves: the lease size (0: no reservation), and the unspent hits of this
/// instance's outdated lease on the key to give back first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Reservation {
    /// The most hits (tokens) to grant.
    pub(super) size: u64,
    /// Hits (tokens) to give back before the op.
    pub(super) give_back: u64,
}

/// What a reservation got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Grant {
    /// Hits (tokens) granted to this instance.
    pub(super) granted: u64,
    /// Hits (tokens) the counter (bucket) took back.
    pub(super) returned: u64,
}

/// The grant the lease rule allows on `room` hits (tokens) left: a `SHARE`th of it, at most
/// `size`, and 0 when that is below `MIN_GRANT`.
fn grant_on(room: u64, size: u64) -> u64 {
    let grant = size.min(room / SHARE);
    if grant < MIN_GRANT { 0 } else { grant }
}

/// Gives `tokens` back to the bucket in `state` at `now`, never past full (a missing bucket is
/// full: nothing to give); the whole tokens it took back.
pub(super) fn give_back_tokens(
    op: &Op,
    state: &mut Option<AlgorithmState>,
    tokens: u64,
    now: Timestamp,
) -> u64 {
    let Some(AlgorithmState::TokenBucket(bucket)) = state.as_mut() else {
        return 0;
    };
    if tokens == 0 {
        return 0;
    }
    let p = Params::of(&op.spec);
    let t = p.quanta(now);
    let before = token_bucket::step(&p, *bucket, 0, t).debt_before;
    let after = token_bucket::give_back(&p, before, tokens).debt_after;
    *bucket = TokenBucketState {
        last: t,
        debt: after,
    };
    (before - after) / p.token_cost
}

/// Takes this instance's grant out of the bucket in `state`, after the op that decided `d`:
/// only when the op was admitted and the bucket refills. The tokens granted.
pub(super) fn grant_tokens(
    op: &Op,
    state: &mut Option<AlgorithmState>,
    d: &Decision,
    size: u64,
) -> u64 {
    let Some(AlgorithmState::TokenBucket(bucket)) = state.as_mut() else {
        return 0;
    };
    let p = Params::of(&op.spec);
    if size == 0 || d.over_limit || p.rate == 0 {
        return 0;
    }
    let tokens = (p.capacity - bucket.debt.min(p.capacity)) / p.token_cost;
    let grant = grant_on(tokens, size);
    bucket.debt += grant * p.token_cost;
    grant
}

/// When the bucket in `state` is full again at the rate of `op`'s limit: the item's expiry once
/// a grant made it emptier than the op's own decision says (an item read as gone is a full
/// bucket, so it must not go before the granted tokens have refilled).
pub(super) fn full_at(
    op: &Op,
    state: Option<&AlgorithmState>,
    now: Timestamp,
) -> Option<Timestamp> {
    let Some(AlgorithmState::TokenBucket(bucket)) = state else {
        return None;
    };
    let p = Params::of(&op.spec);
    (p.rate > 0).then(|| {
        Timestamp::from_micros(
            now.as_micros()
                .saturating_add(p.micros_until(bucket.debt, now)),
        )
    })
}

impl DynamoStore {
    /// Applies `op` (a fixed window) at `now` with a reservation `r`: the op's hits (less what
    /// goes back) in one `ADD`, then the grant in a second, conditional one.
    pub(super) async fn fixed_reserve(
        &self,
        op: &Op,
        now: Timestamp,
        r: Reservation,
    ) -> Result<(Decision, Grant), Failure> {
        let (after, returned) = match self.add(op, now, None, r.give_back).await {
            Ok(after) => (after, r.give_back),
            // The count no longer holds the hits to give back: it was reset meanwhile.
            Err(Failure::Conflict) => (self.add(op, now, None, 0).await?, 0),
            Err(e) => return Err(e),
        };
        let d = judged(op, after.saturating_sub(op.hits), after, now);
        let grant = grant_on(op.spec.limit.saturating_sub(after), r.size);
        let granted = match grant {
            0 => 0,
            g => match self.take_grant(op, g).await {
                Ok(()) => g,
                // Another instance moved the count past the rule: no grant this time.
                Err(Failure::Conflict) => 0,
                // The op itself was counted and decided; only the grant is missing (if the
                // write went through unanswered, it stays counted until the window ends).
                Err(e) => {
                    tracing::debug!(key = %op.key, error = ?e, "DynamoDB lease grant failed");
                    0
                }
            },
        };
        Ok((d, Grant { granted, returned }))
    }

    /// `ADD`s `grant` to `op`'s count on the condition that the count leaves room for it by
    /// the lease rule: at most `limit - SHARE × grant` before it.
    async fn take_grant(&self, op: &Op, grant: u64) -> Result<(), Failure> {
        let most = op.spec.limit.saturating_sub(SHARE * grant);
        self.client
            .update_item()
            .table_name(&self.table)
            .key(item::KEY, AttributeValue::S(op.key.clone()))
            .update_expression("ADD #n :g")
            .condition_expression("#n <= :most")
            .expression_attribute_names("#n", item::COUNT)
            .expression_attribute_values(":g", item::n(grant))
            .expression_attribute_values(":most", item::n(most))
            .send()
            .await
            .map_err(|e| classify(&e))?;
        Ok(())
    }

    /// What this store's leases did so far, for the metrics.
    pub fn lease_totals(&self) -> LeaseTotals {
        self.leases.counters.read()
    }

    /// Hits (tokens) this instance's leases hold now (tests).
    pub fn leased(&self) -> u64 {
        self.leases.held()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimitd_core::algorithm::{Algorithm, LimitSpec, Window};

    fn bucket_op(burst: u64) -> Op {
        let spec = LimitSpec {
            algorithm: Algorithm::TokenBucket,
            limit: 100,
            window: Window::from_secs(3600).unwrap(),
            burst,
        };
        Op {
            lease: Some(10),
            ..Op::new("b", spec, 1)
        }
    }

    #[test]
    fn grants_follow_the_redis_rule() {
        assert_eq!(grant_on(1000, 100), 100, "the lease size when room allows");
        assert_eq!(
            grant_on(100, 100),
            25,
            "a quarter of the room near the limit"
        );
        assert_eq!(grant_on(7, 100), 0, "nothing below the minimum grant");
        assert_eq!(grant_on(8, 100), 2);
    }

    #[test]
    fn a_bucket_grant_comes_out_of_the_tokens_left_and_goes_back_never_past_full() {
        let now = Timestamp::from_secs(1_000_000);
        let op = bucket_op(100);
        let mut state = None;
        let d = op.run_on(&mut state, now);
        assert_eq!(d.remaining, 99);
        assert_eq!(grant_tokens(&op, &mut state, &d, 10), 10);
        let check = Op {
            hits: 0,
            ..op.clone()
        };
        let mut seen = state.clone();
        assert_eq!(
            check.run_on(&mut seen, now).remaining,
            89,
            "granted tokens are taken"
        );
        assert!(
            full_at(&op, state.as_ref(), now).unwrap() > d.expires_at,
            "expires once refilled"
        );
        assert_eq!(give_back_tokens(&op, &mut state, 10, now), 10);
        assert_eq!(
            give_back_tokens(&op, &mut state, 10, now),
            1,
            "never past full"
        );
        assert_eq!(
            give_back_tokens(&op, &mut None, 10, now),
            0,
            "a missing bucket is full"
        );
        let denied = Decision {
            over_limit: true,
            ..d
        };
        assert_eq!(
            grant_tokens(&op, &mut state, &denied, 10),
            0,
            "no grant on a denial"
        );
    }
}
