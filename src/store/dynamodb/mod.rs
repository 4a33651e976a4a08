//! The DynamoDB store (`BACKEND_TYPE=dynamodb`, cargo feature `dynamodb`): counters shared by
//! every instance in one DynamoDB table, for teams on AWS without Redis.
//!
//! One item per cache key (`k`). A fixed window is one `UpdateItem` with `ADD` on its count
//! (`n`), which DynamoDB applies atomically: every hit is counted, as Go and the Redis script
//! count them, and the decision comes from the count after this request's hits (`fixed.rs`).
//! Token and leaky buckets and sliding windows keep their whole state (`s`) under a version
//! number (`v`) and are updated optimistically: a consistent read, the same pure algorithm the
//! memory store runs, and a write conditioned on the version read; a lost race reads again, at
//! most [`CAS_ATTEMPTS`] times (`cas.rs`). A denial that leaves the state as it was writes
//! nothing. Sliding logs and concurrency limits are refused when the configuration loads (their
//! state grows with the limit and would be rewritten whole on every request).
//!
//! Every item carries its expiry (`e`, Unix seconds) for DynamoDB's TTL; TTL deletes lazily,
//! so reads treat an item whose `e` passed as absent. Every call of a request runs at once,
//! each op bounded by `DYNAMODB_RESPONSE_TIMEOUT`, the whole request behind one circuit breaker
//! (`REDIS_BREAKER_*`); throttling, timeouts and an unreachable endpoint answer
//! [`super::Answer::Unavailable`], so each limit's `failure_mode` decides (`errors.rs`).
//! The SDK's own retries are off: a retry here would only spend the timeout.
//!
//! Token leases (`lease`, `LEASE_DEFAULT_SIZE`) work as on Redis: a fixed window or token bucket
//! op that reserves takes this instance's grant from the same item (`lease.rs`), and the key's
//! next hits are answered from it without a call.

mod options;

pub(crate) use options::DynamoSettings;

#[cfg(feature = "dynamodb")]
mod cas;
#[cfg(feature = "dynamodb")]
mod client;
#[cfg(feature = "dynamodb")]
mod errors;
#[cfg(feature = "dynamodb")]
mod fixed;
#[cfg(feature = "dynamodb")]
mod item;
#[cfg(feature = "dynamodb")]
mod lease;
#[cfg(feature = "dynamodb")]
mod reset;
#[cfg(feature = "dynamodb")]
mod store;
#[cfg(feature = "dynamodb")]
mod table;

#[cfg(feature = "dynamodb")]
pub use store::DynamoStore;
#[cfg(feature = "dynamodb")]
pub(crate) use table::create_table;

/// How often an optimistic update reads and tries again after another instance changed the
/// item first; past that the op answers by its limit's failure mode.
#[cfg(feature = "dynamodb")]
const CAS_ATTEMPTS: usize = 8;
