//! Operator resets on DynamoDB: each op's item deleted (`DeleteItem`, the old item returned so
//! the answer says which keys held state). Every algorithm keeps a limit's whole state in its
//! one item, so deleting it resets the window or bucket. DynamoDB finds items by their key
//! only, and listing keys under a prefix would scan (and bill) the whole table, so a reset by
//! prefix is refused.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use futures_util::future::join_all;

use super::errors::{Failure, classify};
use super::item;
use super::store::DynamoStore;
use crate::store::{Op, StoreError};
use ratelimitd_core::clock::Timestamp;

/// Why a reset by prefix is refused on DynamoDB.
pub(super) const NO_PREFIX: &str = "DynamoDB finds an item by its whole key only: a reset by key \
     prefix would scan and bill the whole table, so it is not offered on BACKEND_TYPE=dynamodb; \
     reset by descriptor instead";

impl DynamoStore {
    /// Deletes the item of `key`: whether it held live state at `now` (an expired item TTL has
    /// not deleted yet held none).
    async fn delete(&self, key: &str, now: Timestamp) -> Result<bool, Failure> {
        let out = (self.client.delete_item())
            .table_name(&self.table)
            .key(item::KEY, AttributeValue::S(key.into()))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| classify(&e))?;
        Ok(out.attributes.is_some_and(|old| !item::expired(&old, now)))
    }

    /// [`crate::store::Store::reset`] on DynamoDB: every op's item deleted at once, all within
    /// the response timeout; this instance's over-limit cache forgets the keys first.
    pub(super) async fn reset_items(&self, ops: &[Op], now: Timestamp) -> Result<u64, StoreError> {
        let mut keys: Vec<&str> = Vec::with_capacity(ops.len());
        for op in ops {
            self.forget_locally(&op.key);
            if !keys.contains(&op.key.as_str()) {
                keys.push(&op.key);
            }
        }
        let calls = keys.iter().map(|k| self.delete(k, now));
        let results = tokio::time::timeout(self.timeout, join_all(calls))
            .await
            .map_err(|_| {
                StoreError::Unavailable(format!(
                    "dynamodb did not finish the reset within {:?} (DYNAMODB_RESPONSE_TIMEOUT)",
                    self.timeout
                ))
            })?;
        let mut held = 0;
        for r in results {
            match r {
                Ok(was) => held += u64::from(was),
                Err(Failure::Down(why) | Failure::Unreadable(why)) => {
                    return Err(StoreError::Unavailable(format!("dynamodb: {why}")));
                }
                Err(Failure::Contended | Failure::Conflict) => {
                    return Err(StoreError::Unavailable(
                        "dynamodb: the item changed during the delete".into(),
                    ));
                }
            }
        }
        Ok(held)
    }
}
