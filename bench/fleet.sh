#!/usr/bin/env bash
# The fleet mode's cost (docs/performance.md#fleet-mode): decisions per server CPU-second of one
# instance on the embedded store alone and of one member of a three-member fleet (gossip every
# FLEET_GOSSIP_INTERVAL, default 200ms) taking the same load, in alternating rounds of one run
# (a shared machine's speed drifts between runs; alternating puts both under the same drift);
# and the gossip bytes that member sends per second per active key. All four instances run for
# the whole benchmark: the instance alone and the measured member are pinned to core 0, the load
# generator and the two other members to core 1. Every run is bounded by SECONDS_PER_RUN;
# nothing here asserts a time. Prints `uptime` before and after (the load of other programs).
# Needs taskset and curl; Linux only.
#
#   bench/fleet.sh            # ROUNDS=3 SECONDS_PER_RUN=8 CONCURRENCY=32 KEYS=1000 by default
#   SERVER_CORES=0,1 bench/fleet.sh   # the measured servers on both cores (lock contention shows
#                                     # only when a server decides on several cores at once)
#   PROFILE=debug SKIP_BUILD=1 bench/fleet.sh   # with binaries already built (gossip bytes do
#                                               # not depend on the build; CPU figures do)
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_PORT=${BASE_PORT:-18380}
SECS=${SECONDS_PER_RUN:-8}
ROUNDS=${ROUNDS:-3}
CONC=${CONCURRENCY:-32}
KEYS=${KEYS:-1000}
SERVER_CORES=${SERVER_CORES:-0}
for tool in taskset curl; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
PROFILE=${PROFILE:-release}
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --locked --bin ratelimitd --example loadgen
target=${CARGO_TARGET_DIR:-target}
bin=$target/$PROFILE/ratelimitd
load=$target/$PROFILE/examples/loadgen

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_workdir

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
# metric NAME N: instance N's value of NAME.
metric() { curl -s "http://127.0.0.1:$((BASE_PORT + 10 * $2 + 3))/metrics" | awk -v m="$1" '$1 == m {print $2 + 0}'; }
# measure N: a load run on instance N; prints its decisions per server CPU-second last.
measure() {
  local pid
  pid=$(eval echo "\$server$1")
  taskset -c 1 "$load" --target 127.0.0.1:$((BASE_PORT + 10 * $1 + 1)) --domain scale --key k \
    --concurrency "$CONC" --seconds "$SECS" --keys "$KEYS" --server-pid "$pid" >"$work/run.txt"
  sed 's/^/     /' "$work/run.txt" >&2
  awk '/per server cpu-second/ {print $(NF-4)}' "$work/run.txt"
}

gossip=$((BASE_PORT + 100))
fleet() {
  local n=$1 peers=()
  for m in 1 2 3; do [ "$m" = "$n" ] || peers+=("127.0.0.1:$((gossip + m))"); done
  echo FLEET_BIND=127.0.0.1:$((gossip + n)) "FLEET_PEERS=$(IFS=,; echo "${peers[*]}")" \
    FLEET_SECRET=bench-secret-0123456789
}
echo "uptime before: $(uptime)"
start 0 "$SERVER_CORES"
# shellcheck disable=SC2046
start 1 "$SERVER_CORES" $(fleet 1)
# shellcheck disable=SC2046
start 2 1 $(fleet 2)
# shellcheck disable=SC2046
start 3 1 $(fleet 3)
for _ in $(seq 100); do [ "$(metric ratelimitd_fleet_peers_alive 1)" = 2 ] && break; sleep 0.1; done
echo "peers alive of the measured member: $(metric ratelimitd_fleet_peers_alive 1)"

alone=() member=() per_key=()
for round in $(seq "$ROUNDS"); do
  echo "== round $round: embedded store alone ($KEYS keys, $CONC in flight, ${SECS}s)"
  alone+=("$(measure 0)")
  echo "== round $round: one member of a three-member fleet"
  sent0=$(metric ratelimitd_fleet_sent_bytes 1)
  started=$(date +%s.%N)
  member+=("$(measure 1)")
  sent=$(($(metric ratelimitd_fleet_sent_bytes 1) - sent0))
  keys=$(metric ratelimitd_fleet_keys_published 1)
  per_key+=("$(awk -v b="$sent" -v k="$keys" -v s="$started" -v e="$(date +%s.%N)" 'BEGIN {
    t = e - s; printf "%.1f", b / t / (k > 0 ? k : 1) }')")
  echo "     gossip sent by the member: $sent bytes, $keys keys published: ${per_key[-1]} bytes/s per active key;" \
    "gossip age $(metric ratelimitd_fleet_gossip_age_seconds 1) s;" \
    "estimated over-admission $(metric ratelimitd_fleet_estimated_overadmission 1)"
done
echo "uptime after: $(uptime)"
echo "== decisions per server CPU-second, round by round"
for i in "${!alone[@]}"; do
  awk -v a="${alone[$i]}" -v m="${member[$i]}" -v r="$((i + 1))" 'BEGIN {
    printf "   round %d: alone %.0f, fleet member %.0f (%+.1f %%)\n", r, a, m, (m - a) * 100 / a }'
done
echo "   gossip bytes/s per active key: ${per_key[*]}"
