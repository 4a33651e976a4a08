#!/usr/bin/env bash
# What priority shedding and soft limits cost: decisions per CPU-second of the limiter with a
# plain limit, a limit with priority classes and a limit with a soft zone, side by side on the
# memory store (crates/core/examples/shedding_cost.rs; its docs say how it measures). The figures
# are the limiter's alone: a server adds the same gRPC or HTTP cost to each, so the relative cost
# in a server is smaller still.
#
#   bench/shedding.sh
#
# Linux only (/proc/thread-self/schedstat).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release --locked -p ratelimitd-core --example shedding_cost
