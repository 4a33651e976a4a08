//! Fixed windows on DynamoDB: one `UpdateItem` that `ADD`s the hits to the count and returns the
//! count after them, which DynamoDB applies atomically across every instance. As in Go and the
//! Redis script, every hit is counted, even past the limit, and the decision is
//! [`fixed_window::decide`] on the count before and after; a usage report is the same `ADD`
//! answered as a report. A limit that sheds (`Op::only_admitted`) adds only under the condition
//! that the count stays within the limit; a refused one reads the count to be judged on. A
//! refund takes back at most what is counted, under the condition that the count is still at
//! least that much. The cache key holds the window's start, so a window's item is never reused
//! by the next one, and its expiry (`e`) is the window's end plus the expiration jitter.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use super::errors::{Failure, classify};
use super::{CAS_ATTEMPTS, DynamoStore, item};
use ratelimitd_core::algorithm::{Decision, fixed_window};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::store::Op;

/// The count of an item (0 when absent).
fn count_of(found: Option<&item::Item>) -> u64 {
    found
        .and_then(|i| item::number(i, item::COUNT))
        .unwrap_or(0)
}

/// The decision on `op`'s limit for a count that went from `before` to `after` at `now`.
pub(super) fn judged(op: &Op, before: u64, after: u64, now: Timestamp) -> Decision {
    let (before, after) = (
        before.min(fixed_window::MAX_COUNT),
        after.min(fixed_window::MAX_COUNT),
    );
    fixed_window::decide(before, after, op.spec.limit, op.spec.window, now)
}

impl DynamoStore {
    /// Applies `op` (a fixed window) at `now`.
    pub(super) async fn fixed(&self, op: &Op, now: Timestamp) -> Result<Decision, Failure> {
        let spec = &op.spec;
        let decide = |before: u64, after: u64| judged(op, before, after, now);
        if op.refund {
            return self.fixed_refund(op, now).await;
        }
        if op.hits == 0 {
            let count = count_of(self.read(&op.key, &[item::COUNT]).await?.as_ref());
            let d = decide(count, count);
            return Ok(if op.report { d.reported() } else { d });
        }
        if op.only_admitted {
            let fits = spec.limit.checked_sub(op.hits);
            if let Some(room) = fits {
                match self.add(op, now, Some(room), 0).await {
                    Ok(after) => return Ok(decide(after.saturating_sub(op.hits), after)),
                    Err(Failure::Conflict) => {}
                    Err(e) => return Err(e),
                }
            }
            // Refused: nothing added, judged as the hits it asked for (as the Redis script).
            let count = count_of(self.read(&op.key, &[item::COUNT]).await?.as_ref());
            return Ok(decide(count, count.saturating_add(op.hits)));
        }
        let after = self.add(op, now, None, 0).await?;
        let d = decide(after.saturating_sub(op.hits), after);
        Ok(if op.report { d.reported() } else { d })
    }

    /// `ADD`s `op.hits` to its count (when `at_most`, only if the count is at most that before),
    /// setting the expiry on a new item; returns the count after. `give_back` hits of this
    /// instance's outdated lease come off in the same write, on the condition that the count
    /// still holds them (`Failure::Conflict` when it does not: the item was reset meanwhile).
    pub(super) async fn add(
        &self,
        op: &Op,
        now: Timestamp,
        at_most: Option<u64>,
        give_back: u64,
    ) -> Result<u64, Failure> {
        let jitter = match self.jitter_max_secs {
            0 => 0,
            max => fastrand::u64(0..max),
        };
        let expires = now.as_secs() + op.spec.window.key_ttl_secs(now) + jitter;
        let mut call = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(item::KEY, AttributeValue::S(op.key.clone()))
            .update_expression("ADD #n :h SET #e = if_not_exists(#e, :e)")
            .expression_attribute_names("#n", item::COUNT)
            .expression_attribute_names("#e", item::EXPIRES)
            .expression_attribute_values(":h", delta(op.hits, give_back))
            .expression_attribute_values(":e", item::n(expires))
            .return_values(ReturnValue::UpdatedNew);
        let mut conditions = Vec::new();
        if let Some(room) = at_most {
            conditions.push("(attribute_not_exists(#n) OR #n <= :room)");
            call = call.expression_attribute_values(":room", item::n(room));
        }
        if give_back > 0 {
            conditions.push("#n >= :back");
            call = call.expression_attribute_values(":back", item::n(give_back));
        }
        if !conditions.is_empty() {
            call = call.condition_expression(conditions.join(" AND "));
        }
        let out = call.send().await.map_err(|e| classify(&e))?;
        out.attributes()
            .and_then(|a| item::number(a, item::COUNT))
            .ok_or_else(|| Failure::Unreadable("UpdateItem returned no count".into()))
    }

    /// Gives back up to `op.hits` of the count (never below zero, never creating the item).
    async fn fixed_refund(&self, op: &Op, now: Timestamp) -> Result<Decision, Failure> {
        let spec = &op.spec;
        for _ in 0..CAS_ATTEMPTS {
            let count = count_of(self.read(&op.key, &[item::COUNT]).await?.as_ref());
            let taken = count.min(op.hits);
            if taken == 0 {
                return Ok(fixed_window::decide_refund(
                    count,
                    count,
                    spec.limit,
                    spec.window,
                    now,
                ));
            }
            let out = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(item::KEY, AttributeValue::S(op.key.clone()))
                .update_expression("ADD #n :minus")
                .condition_expression("#n >= :taken")
                .expression_attribute_names("#n", item::COUNT)
                .expression_attribute_values(":minus", AttributeValue::N(format!("-{taken}")))
                .expression_attribute_values(":taken", item::n(taken))
                .return_values(ReturnValue::UpdatedNew)
                .send()
                .await
                .map_err(|e| classify(&e));
            match out {
                Ok(out) => {
                    let after = (out.attributes())
                        .and_then(|a| item::number(a, item::COUNT))
                        .unwrap_or(count - taken);
                    let before = after.saturating_add(taken);
                    return Ok(fixed_window::decide_refund(
                        before,
                        after,
                        spec.limit,
                        spec.window,
                        now,
                    ));
                }
                Err(Failure::Conflict) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Failure::Contended)
    }
}

/// `hits - give_back` as a DynamoDB number (negative when more goes back than comes in).
fn delta(hits: u64, give_back: u64) -> AttributeValue {
    if hits >= give_back {
        item::n(hits - give_back)
    } else {
        AttributeValue::N(format!("-{}", give_back - hits))
    }
}
