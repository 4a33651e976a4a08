//! Token leases on a real Redis and Redis Cluster: fixed windows, token buckets, fleets of
//! instances and the real binary giving its leases back on SIGTERM.

mod bucket;
mod fleet;
mod window;
