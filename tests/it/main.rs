//! Every integration test of ratelimitd in one binary, by area: the service started in process
//! or as the real binary, on 127.0.0.1, talked to over real gRPC and HTTP, against real Redis,
//! PostgreSQL and Envoy processes. One binary links once after a library edit, and its tests share
//! one set of servers (one Redis, one Redis Cluster: `support/stores.rs`), each test keeping to
//! keys of its own.
//!
//! `cargo test --test it redis::` runs one area. A test needing a program that is not installed is
//! skipped with a one-line message, unless the run requires everything (`CI=true`, or
//! `RATELIMITD_TEST_REQUIRE_ALL=1` as `tests/run.sh` sets): `support/require.rs`.

mod admin;
mod envoy;
mod fuzz;
mod grpc;
mod http;
mod leases;
mod observability;
mod ops;
mod policy;
mod redis;
mod regions;
mod rlqs;
mod store;
mod support;
mod tiers;
