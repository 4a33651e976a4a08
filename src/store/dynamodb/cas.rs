//! Token buckets, leaky buckets (GCRA) and sliding windows on DynamoDB: optimistic updates of the
//! whole state. A strongly consistent read gives the state and its version; the pure algorithm
//! (the memory store's, [`Op::run_on`]) decides on it; the new state is written only if the item
//! still holds that version (or, for a new key, still does not exist). Another instance's write
//! in between fails the condition and the op reads again after a short random pause, up to
//! [`CAS_ATTEMPTS`] times. Each
//! decision therefore runs on the latest state, as if under one lock shared by every instance:
//! exact. A decision that leaves the state unchanged (a denial at the same instant, a check)
//! writes nothing, and a refund never creates an item. A token bucket op that reserves a lease
//! takes its grant (and gives an outdated lease's tokens back) in the same write (`lease.rs`).

use aws_sdk_dynamodb::types::AttributeValue;

use super::errors::{Failure, classify};
use super::lease::{self, Grant, Reservation};
use super::{CAS_ATTEMPTS, DynamoStore, item};
use ratelimitd_core::algorithm::Decision;
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::store::Op;

impl DynamoStore {
    /// Applies `op` (a bucket or a sliding window) at `now`; a token bucket op with a
    /// reservation `r` also gives back and takes its lease's tokens.
    pub(super) async fn cas(
        &self,
        op: &Op,
        now: Timestamp,
        r: Reservation,
    ) -> Result<(Decision, Grant), Failure> {
        for attempt in 0..CAS_ATTEMPTS {
            if attempt > 0 {
                // Spread the racers out: up to a millisecond per race lost so far.
                let micros = fastrand::u64(0..1_000 * attempt as u64);
                tokio::time::sleep(std::time::Duration::from_micros(micros)).await;
            }
            let found = self
                .read(&op.key, &[item::STATE, item::VERSION, item::EXPIRES])
                .await?;
            let version = found.as_ref().map(|i| item::number(i, item::VERSION));
            let held = match found.as_ref().filter(|i| !item::expired(i, now)) {
                None => None,
                Some(i) => {
                    let text = i.get(item::STATE).and_then(|s| s.as_s().ok());
                    let state = text.and_then(|t| item::decode(op.spec.algorithm, t));
                    if state.is_none() {
                        return Err(Failure::Unreadable(format!(
                            "attribute {} of {} is not a {} state",
                            item::STATE,
                            op.key,
                            op.spec.algorithm.name()
                        )));
                    }
                    state
                }
            };
            let mut state = held.clone();
            let returned = lease::give_back_tokens(op, &mut state, r.give_back, now);
            let d = op.run_on(&mut state, now);
            let granted = lease::grant_tokens(op, &mut state, &d, r.size);
            let nothing = Grant::default();
            if (op.refund && found.is_none()) || (held.is_some() && state == held) {
                return Ok((d, nothing));
            }
            let Some(text) = state.as_ref().and_then(item::encode) else {
                return Ok((d, nothing));
            };
            let expires_at = match granted {
                0 => d.expires_at,
                _ => lease::full_at(op, state.as_ref(), now).unwrap_or(d.expires_at),
            };
            match self.put(op, &text, version, expires_at).await {
                Ok(()) => return Ok((d, Grant { granted, returned })),
                Err(Failure::Conflict) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Failure::Contended)
    }

    /// Writes `text` as `op`'s state, on condition that the item still holds `version` (`None`:
    /// the item did not exist; `Some(None)`: it existed without a version).
    async fn put(
        &self,
        op: &Op,
        text: &str,
        version: Option<Option<u64>>,
        expires_at: Timestamp,
    ) -> Result<(), Failure> {
        let next = version.flatten().unwrap_or(0) + 1;
        let mut call = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(item::KEY, AttributeValue::S(op.key.clone()))
            .item(item::STATE, AttributeValue::S(text.into()))
            .item(item::VERSION, item::n(next))
            .item(item::EXPIRES, item::n(item::expiry_secs(expires_at)));
        call = match version {
            None => call
                .condition_expression("attribute_not_exists(#k)")
                .expression_attribute_names("#k", item::KEY),
            Some(None) => call
                .condition_expression("attribute_not_exists(#v)")
                .expression_attribute_names("#v", item::VERSION),
            Some(Some(v)) => call
                .condition_expression("#v = :v")
                .expression_attribute_names("#v", item::VERSION)
                .expression_attribute_values(":v", item::n(v)),
        };
        call.send().await.map_err(|e| classify(&e))?;
        Ok(())
    }
}
