#!/usr/bin/env bash
# The fleet mode's cost (docs/performance.md#fleet-mode): decisions per server CPU-second of one
# instance on the embedded store alone, then of one member of a three-member fleet (gossip every
# FLEET_GOSSIP_INTERVAL, default 200ms) taking the same load; and the gossip bytes that member
# sends per second per active key. The measured server is pinned to core 0, the load generator
# and the two other members to core 1. Every run is bounded by SECONDS_PER_RUN; nothing here
# asserts a time. Needs taskset and curl; Linux only.
#
#   bench/fleet.sh            # SECONDS_PER_RUN=8 CONCURRENCY=32 KEYS=1000 by default
#   PROFILE=debug SKIP_BUILD=1 bench/fleet.sh   # with binaries already built (gossip bytes do
#                                               # not depend on the build; CPU figures do)
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_PORT=${BASE_PORT:-18380}
SECS=${SECONDS_PER_RUN:-8}
CONC=${CONCURRENCY:-32}
KEYS=${KEYS:-1000}
for tool in taskset curl; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
PROFILE=${PROFILE:-release}
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --locked --bin ratelimitd --example loadgen
target=${CARGO_TARGET_DIR:-target}
bin=$target/$PROFILE/ratelimitd
load=$target/$PROFILE/examples/loadgen

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/config"
printf 'domain: scale\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1000000000}\n' \
  >"$work/config/scale.yaml"

# Starts instance $1 (ports BASE_PORT + 10 × $1 …) on cores $2 with the extra environment "${@:3}".
start() {
  local n=$1 cores=$2 base=$((BASE_PORT + 10 * $1))
  shift 2
  env HOST=127.0.0.1 PORT=$base GRPC_HOST=127.0.0.1 GRPC_PORT=$((base + 1)) \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((base + 2)) ADMIN_PORT=$((base + 4)) USE_STATSD=false \
    USE_PROMETHEUS=true PROMETHEUS_ADDR=127.0.0.1:$((base + 3)) POLICY_ENABLED=false \
    RATELIMITD_CONFIG="$work/config" "$@" \
    taskset -c "$cores" "$bin" >"$work/server$n.log" 2>&1 &
  pids+=("$!")
  eval "server$n=$!"
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$base/healthcheck" >/dev/null && return 0
    sleep 0.1
  done
  echo "instance $n did not start: $(tail -c 300 "$work/server$n.log")" >&2
  exit 1
}
metric() { curl -s "http://127.0.0.1:$((BASE_PORT + 3))/metrics" | awk -v m="$1" '$1 == m {print $2 + 0}'; }
measure() {
  taskset -c 1 "$load" --target 127.0.0.1:$((BASE_PORT + 1)) --domain scale --key k \
    --concurrency "$CONC" --seconds "$SECS" --keys "$KEYS" --server-pid "$server0" | sed 's/^/   /'
}

echo "== embedded store alone ($KEYS keys, $CONC in flight, ${SECS}s)"
start 0 0
measure
kill "$server0"; wait "$server0" 2>/dev/null || true

gossip=$((BASE_PORT + 100))
fleet() {
  local n=$1 peers=()
  for m in 0 1 2; do [ "$m" = "$n" ] || peers+=("127.0.0.1:$((gossip + m))"); done
  echo FLEET_BIND=127.0.0.1:$((gossip + n)) "FLEET_PEERS=$(IFS=,; echo "${peers[*]}")" \
    FLEET_SECRET=bench-secret-0123456789
}
echo "== one member of a three-member fleet ($KEYS keys, $CONC in flight, ${SECS}s)"
# shellcheck disable=SC2046
start 0 0 $(fleet 0)
# shellcheck disable=SC2046
start 1 1 $(fleet 1)
# shellcheck disable=SC2046
start 2 1 $(fleet 2)
for _ in $(seq 100); do [ "$(metric ratelimitd_fleet_peers_alive)" = 2 ] && break; sleep 0.1; done
echo "   peers alive before the run: $(metric ratelimitd_fleet_peers_alive)"
sent0=$(metric ratelimitd_fleet_sent_bytes)
started=$(date +%s.%N)
measure
sent=$(( $(metric ratelimitd_fleet_sent_bytes) - sent0 ))
keys=$(metric ratelimitd_fleet_keys_published)
awk -v b="$sent" -v k="$keys" -v s="$started" -v e="$(date +%s.%N)" 'BEGIN {
  t = e - s; printf "   gossip sent: %d bytes in %.1fs by the measured member, %d keys published: %.0f bytes/s, %.1f bytes/s per active key\n", b, t, k, b / t, b / t / (k > 0 ? k : 1)
}'
echo "   gossip age at the end: $(metric ratelimitd_fleet_gossip_age_seconds) s"
