#!/usr/bin/env bash
# Decisions per server CPU-second at 100% denials with the violation log on (VIOLATIONS_LOG=db,
# the embedded SQLite) and off, on the same release build: a 1-per-hour limit denies every
# request but the first of each key, so every decision is noted in the violation log (repeats of a
# key between two writes are counted in one record, so the log writes about KEYS rows a second).
# The server is pinned to core 0 and the load generator (examples/loadgen/) to core 1; loadgen
# reads the server's CPU time from /proc. Target: log on >= 90% of off.
#
#   bench/violations.sh            # RUN_SECONDS=8 CONCURRENCY=32 KEYS=100 by default
#   SKIP_BUILD=1 bench/violations.sh  # use the release build already in target/release
#
# Needs taskset and curl; Linux only.
set -euo pipefail
cd "$(dirname "$0")/.."

RUN_SECONDS=${RUN_SECONDS:-8}
CONCURRENCY=${CONCURRENCY:-32}
KEYS=${KEYS:-100}
BASE_PORT=${BASE_PORT:-18280}

[ -n "${SKIP_BUILD:-}" ] || cargo build --release --locked --bin ratelimitd --example loadgen

work=$(mktemp -d)
mkdir -p "$work/config"
printf 'domain: deny\ndescriptors:\n  - {key: client_key, rate_limit: {unit: hour, requests_per_unit: 1}}\n' \
  >"$work/config/deny.yaml"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

# Runs one measurement with the violation log set to $1.
run() {
  rm -rf "$work/data"
  env HOST=127.0.0.1 PORT=$BASE_PORT GRPC_HOST=127.0.0.1 GRPC_PORT=$((BASE_PORT + 1)) \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((BASE_PORT + 2)) ADMIN_PORT=$((BASE_PORT + 3)) \
    USE_STATSD=false RATELIMITD_CONFIG="$work/config" RATELIMITD_DATA_DIR="$work/data" \
    VIOLATIONS_LOG="$1" taskset -c 0 target/release/ratelimitd &
  pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$BASE_PORT/healthcheck" >/dev/null && break
    sleep 0.1
  done
  echo "violation log $1:"
  taskset -c 1 target/release/examples/loadgen --target "127.0.0.1:$((BASE_PORT + 1))" \
    --concurrency "$CONCURRENCY" --seconds "$RUN_SECONDS" --keys "$KEYS" \
    --domain deny --key client_key --server-pid "$pid"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
}

run off
run db
