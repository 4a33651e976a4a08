#!/usr/bin/env bash
# Decisions per server CPU-second of POST /check (wrk, HTTP/1.1 keep-alive) next to gRPC
# ShouldRateLimit (examples/loadgen/) on the same server process, one descriptor per decision
# over KEYS distinct values. The server is pinned to core 0 and the load generators to core 1;
# the server's CPU time is read from /proc before and after each run.
#
#   bench/check.sh                      # memory store
#   REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:6379 bench/check.sh   # Redis
#
# Needs wrk (Debian: apt-get install -y wrk), taskset and curl; Linux only.
set -euo pipefail
cd "$(dirname "$0")/.."

RUN_SECONDS=${RUN_SECONDS:-8}
CONCURRENCY=${CONCURRENCY:-32}
KEYS=${KEYS:-10000}
BASE_PORT=${BASE_PORT:-18080}
command -v wrk >/dev/null || { echo "bench/check.sh needs wrk (apt-get install -y wrk)" >&2; exit 1; }

cargo build --release --locked --bin ratelimitd --example loadgen

cfg=$(mktemp -d)
cp examples/config/example.yaml "$cfg/"
# The gRPC load generator's domain `example` limits remote_address 10 a second; give /check the
# same limit on client_key so both paths do the same work.
printf 'domain: api\ndescriptors:\n  - {key: client_key, rate_limit: {unit: second, requests_per_unit: 10}}\n' \
  >"$cfg/api.yaml"

HOST=127.0.0.1 PORT=$BASE_PORT GRPC_HOST=127.0.0.1 GRPC_PORT=$((BASE_PORT + 1)) \
  DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((BASE_PORT + 2)) ADMIN_PORT=$((BASE_PORT + 3)) USE_STATSD=false RATELIMITD_CONFIG="$cfg" \
  taskset -c 0 target/release/ratelimitd &
pid=$!
trap 'kill "$pid" 2>/dev/null; rm -rf "$cfg"' EXIT

for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$BASE_PORT/healthcheck" >/dev/null && break
  sleep 0.1
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

before=$(cpu_ticks)
out=$(KEYS=$KEYS taskset -c 1 wrk -t1 -c"$CONCURRENCY" -d"${RUN_SECONDS}s" -s bench/check.lua \
  "http://127.0.0.1:$BASE_PORT")
after=$(cpu_ticks)
echo "$out"
requests=$(echo "$out" | awk '/requests in/ {print $1}')
awk -v r="$requests" -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v t="$RUN_SECONDS" \
  'BEGIN { cpu = ticks / hz; if (cpu < 0.01) cpu = 0.01;
           printf "/check: %d decisions, %.0f/s, server cpu %.2fs (%.0f%% of one core): %.0f decisions per server cpu-second\n",
                  r, r / t, cpu, 100 * cpu / t, r / cpu }'

echo "gRPC:"
taskset -c 1 target/release/examples/loadgen --target "127.0.0.1:$((BASE_PORT + 1))" \
  --concurrency "$CONCURRENCY" --seconds "$RUN_SECONDS" --keys "$KEYS" --server-pid "$pid"
