//! The stores side by side: the memory store's bounds, every algorithm deciding identically on
//! memory, Redis and a Redis Cluster, calendar windows on every store and memcached, DynamoDB against dynalite, and the shared
//! test servers keeping services apart.

mod calendar;
mod conformance;
#[cfg(feature = "dynamodb")]
mod dynamodb;
mod fleet;
mod fleet_membership;
mod fleet_security;
mod memcache;
mod memcache_shedding;
mod memory;
mod shared;
