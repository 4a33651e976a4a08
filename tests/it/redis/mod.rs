//! The Redis store against real `redis-server` processes: keys and formats, deadlines, stalls and
//! the breaker, chaos (kills, failovers, a lost Cluster master), TLS and Sentinel, exact counting
//! across processes, server time and hits no limit can hold.

mod chaos_breaker;
mod chaos_topology;
mod concurrency_exact;
mod concurrency_outage;
mod deadline;
mod exact;
mod joined;
mod poison_hits;
mod server_time;
mod split;
mod stall;
mod start_without_redis;
mod store;
mod tls_modes;
mod tls_sentinel;
