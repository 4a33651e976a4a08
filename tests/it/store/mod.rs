//! The stores side by side: the memory store's bounds, every algorithm deciding identically on
//! memory, Redis and a Redis Cluster, calendar windows on every store and memcached, and the shared
//! test servers keeping services apart.

mod calendar;
mod conformance;
mod fleet;
mod fleet_security;
mod memcache;
mod memory;
mod shared;
