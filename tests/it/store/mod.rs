//! The stores side by side: the memory store's bounds, every algorithm deciding identically on
//! memory, Redis and a Redis Cluster, calendar windows on every store and memcached, DynamoDB against dynalite (token leases too), and the shared
//! test servers keeping services apart.

mod calendar;
mod conformance;
#[cfg(feature = "dynamodb")]
mod dynamodb;
#[cfg(feature = "dynamodb")]
mod dynamodb_lease;
mod fleet;
mod fleet_membership;
mod fleet_security;
mod memcache;
mod memcache_shedding;
mod memory;
mod shared;
