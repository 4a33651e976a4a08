#!/usr/bin/env bash
# The cost of limits shared by regions (docs/regions.md#cost, docs/performance.md#regions):
#  1. decisions per server CPU-second through the real server (gRPC, examples/loadgen, 10 000
#     keys) on a real regional Redis, a worldwide limit with follow_demand and a global store
#     against the same limit without regions; the two alternate, ROUNDS times each, in one run;
#     the server pinned to core 0, the load generator to core 1; the ratio of the means;
#  2. global-store commands per second per region for 10 000 active keys, counted by the global
#     redis-server (INFO commandstats): the keys used in one region only (eu), then every key
#     used in two regions (eu and us), each under a small limit their demand presses on, after
#     WARM_SECONDS for the keys' shares to settle (a key used alone climbs to its whole share).
# Every run is bounded by its seconds; nothing here asserts a time. Needs redis-server,
# redis-cli, taskset and curl; Linux only.
#
# `instructions` measures what the load of a shared machine cannot move (bench/lib.sh): the
# instructions per decision of the whole server process under valgrind's callgrind, through gRPC
# (examples/loadgen, 64 in flight, KEYS values) on a real regional Redis, for the same limit
# plain, with static shares, and following demand with a global store. DECISIONS warm-up
# decisions, then the same ones counted. The demand-following server syncs every SYNC_INTERVAL
# (default 1h: longer than the run, so the figure is the request path's alone; under callgrind
# the server runs tens of times slower, so a 1 s round would weigh tens of times more per
# decision than it does at speed). The dumps stay in $OUT_DIR (default
# $CARGO_TARGET_DIR/regions-callgrind) for callgrind_annotate.
#
#   bench/regions.sh          # ROUNDS=3 SECONDS_PER_RUN=8 CONCURRENCY=64 KEYS=10000 RATE=2000
#                             # WARM_SECONDS=40; ONLY=1 or ONLY=2 runs that part only
#   bench/regions.sh instructions   # DECISIONS=20000 SYNC_INTERVAL=1h VARIANTS="plain static world"
#   PROFILE=debug SKIP_BUILD=1 bench/regions.sh   # with binaries already built in
#                                                 # $CARGO_TARGET_DIR (default target) (the command
#                                                 # counts do not depend on the build; CPU does)
#   RATELIMITD_BIN=path       # measures that ratelimitd binary (loadgen still from the target dir)
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-rounds}
case $MODE in rounds | instructions) ;; *) echo "usage: $0 [rounds|instructions]" >&2; exit 2 ;; esac

BASE_PORT=${BASE_PORT:-18480}
ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_PER_RUN:-8}
CONC=${CONCURRENCY:-64}
KEYS=${KEYS:-10000}
RATE=${RATE:-2000}
WARM=${WARM_SECONDS:-40}
DECISIONS=${DECISIONS:-20000}
SYNC=${SYNC_INTERVAL:-1h}
tools=(redis-server redis-cli taskset curl)
[ "$MODE" = rounds ] || tools+=(valgrind callgrind_control)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
PROFILE=${PROFILE:-release}
profile=(--release)
[ "$PROFILE" = release ] || profile=(--profile "$PROFILE")
[ "$PROFILE" != debug ] || profile=()
[ -n "${SKIP_BUILD:-}" ] || cargo build "${profile[@]}" --locked --bin ratelimitd --example loadgen
target=${CARGO_TARGET_DIR:-target}
bin=${RATELIMITD_BIN:-$target/$PROFILE/ratelimitd}
load=$target/$PROFILE/examples/loadgen

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_workdir
echo "uptime: $(uptime)"

# Redis $1 on port BASE_PORT + 50 + $1 (1, 2: the regions' own; 9: the global store).
redis() {
  local port=$((BASE_PORT + 50 + $1))
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
    >"$work/redis$1.log" 2>&1 &
  pids+=("$!")
  for _ in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return 0; sleep 0.1; done
  echo "redis $1 did not start" >&2
  exit 1
}
rcli() { redis-cli -p $((BASE_PORT + 50 + $1)) "${@:2}"; }
redis 1
redis 2
redis 9
global=127.0.0.1:$((BASE_PORT + 59))

limit() { printf 'domain: bench\ndescriptors:\n  - key: k\n    rate_limit: {unit: %s, requests_per_unit: %s%s}\n' "$@"; }
mkdir -p "$work/plain" "$work/world" "$work/small"
limit hour 1000000000 '' >"$work/plain/bench.yaml"
limit hour 1000000000 ', regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: true}' >"$work/world/bench.yaml"
limit minute 2 ', regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: true}' >"$work/small/bench.yaml"

# Starts instance $1 (ports BASE_PORT + 10 × $1 …) on cores $2, config dir $3, regional Redis $4,
# with the extra environment "${@:5}"; sets server$1.
start() {
  local n=$1 cores=$2 config=$3 store=$4 base=$((BASE_PORT + 10 * $1))
  shift 4
  rcli "$store" flushall >/dev/null
  # Pinned to its cores, or under callgrind (which runs the threads one at a time anyway, tens
  # of times slower: a Redis answer may then take longer than the default timeout).
  local under=(taskset -c "$cores") tries=100
  if [ "$MODE" = instructions ]; then
    rm -f "$work"/callgrind.out*
    under=(valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out")
    tries=1200
    set -- REDIS_RESPONSE_TIMEOUT=10s "$@"
  fi
  env HOST=127.0.0.1 PORT=$base GRPC_HOST=127.0.0.1 GRPC_PORT=$((base + 1)) \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((base + 2)) ADMIN_PORT=$((base + 4)) USE_STATSD=false \
    POLICY_ENABLED=false REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$((BASE_PORT + 50 + store)) \
    RATELIMITD_CONFIG="$work/$config" "$@" \
    "${under[@]}" "$bin" >"$work/server$n.log" 2>&1 &
  pids+=("$!")
  eval "server$n=$!"
  for _ in $(seq "$tries"); do
    curl -sf "http://127.0.0.1:$base/healthcheck" >/dev/null && return 0
    sleep 0.1
  done
  echo "instance $n did not start: $(tail -c 300 "$work/server$n.log")" >&2
  exit 1
}
stop() { local p; p=$(eval echo "\$server$1"); kill "$p"; wait "$p" 2>/dev/null || true; }
region() { echo REGION="$1" GLOBAL_REDIS_SOCKET_TYPE=tcp GLOBAL_REDIS_URL="$global"; }

if [ "$MODE" = instructions ]; then
  # A multiple of loadgen's 64 clients, so that each sends the same number.
  DECISIONS=$((DECISIONS / 64 * 64))
  out_dir=${OUT_DIR:-$target/regions-callgrind}
  mkdir -p "$out_dir" "$work/static"
  limit hour 1000000000 ', regions: {shares: {eu: 0.5, us: 0.5}}' >"$work/static/bench.yaml"
  echo "# $(date -u '+%F %H:%M UTC'), callgrind, $PROFILE build, $DECISIONS decisions over $KEYS" \
    "values after as many warm-up ones; follow_demand syncs every $SYNC"
  printf '%-8s %-44s %22s  %s\n' limit what instructions/decision load-avg
  for variant in ${VARIANTS:-plain static world}; do
    case $variant in
      plain) what="10^9 an hour, no regions"; start 0 0 plain 1 ;;
      static) what="the same, static shares (eu 0.5)"; start 0 0 static 1 REGION=eu ;;
      world)
        what="the same, follow_demand, a global store"
        rcli 9 flushall >/dev/null
        # shellcheck disable=SC2046
        start 0 0 world 1 $(region eu) REGION_SYNC_INTERVAL="$SYNC"
        ;;
      *) echo "unknown variant $variant (plain, static, world)" >&2; exit 2 ;;
    esac
    per=$(callgrind_per_decision "$server0" 127.0.0.1 "$work/callgrind.out" "$DECISIONS" \
      "$out_dir/$variant.callgrind" -- "$load" --target 127.0.0.1:$((BASE_PORT + 1)) \
      --domain bench --key k --concurrency 64 --seconds 600 --keys "$KEYS" \
      --max-requests "$DECISIONS") || { echo "$variant: a run failed" >&2; exit 1; }
    printf '%-8s %-44s %22s  %s\n' "$variant" "$what" "$per" "$(cut -d' ' -f1-3 /proc/loadavg)"
    stop 0
  done
  echo "# dumps: $out_dir (callgrind_annotate --inclusive=yes <file>)"
  exit 0
fi

if [ "${ONLY:-}" != 2 ]; then
echo "== 1. decisions per server CPU-second, a worldwide limit with regions against the same without"
echo "   ($KEYS keys, $CONC in flight, ${SECS}s a run, $ROUNDS rounds each, alternating; $PROFILE build)"
for r in $(seq "$ROUNDS"); do
  for variant in plain world; do
    if [ "$variant" = plain ]; then start 0 0 plain 1; else
      # shellcheck disable=SC2046
      start 0 0 world 1 $(region eu)
    fi
    out=$(taskset -c 1 "$load" --target 127.0.0.1:$((BASE_PORT + 1)) --domain bench --key k \
      --concurrency "$CONC" --seconds "$SECS" --keys "$KEYS" --server-pid "$server0")
    per=$(echo "$out" | awk '/per server cpu-second/ {print $(NF - 4)}')
    echo "   round $r $variant: $per decisions per server cpu-second" \
      "($(echo "$out" | awk '/^requests/ {print $5}') decisions/s)"
    echo "$variant $per" >>"$work/cpu"
    stop 0
  done
done
awk '{sum[$1] += $2; n[$1]++} END {
  p = sum["plain"] / n["plain"]; w = sum["world"] / n["world"]
  printf "   mean: without regions %.0f, with regions %.0f: ratio %.3f\n", p, w, w / p
}' "$work/cpu"
fi

# Commands the global store ran per second since the last reset, by name, over $1 seconds.
commands() {
  rcli 9 info commandstats | tr -d '\r' | awk -F'[_:=,]' -v s="$1" -v who="$2" '
    /^cmdstat_/ && $2 !~ /^(info|config|flushall|ping)/ {
      total += $4; if ($2 ~ /^(hset|hdel|pexpire)$/) writes += $4
      line = line sprintf(" %s %.0f/s", $2, $4 / s)
    }
    END { printf "   %s: %.0f commands/s (%.0f writes/s):%s\n", who, total / s, writes / s, line }'
}
loadgen() {
  taskset -c 1 "$load" --target 127.0.0.1:$((BASE_PORT + 10 * $1 + 1)) --domain bench --key k \
    --concurrency 16 --seconds $((WARM + SECS)) --keys "$KEYS" --rate "$RATE" >/dev/null
}
measure() {
  sleep "$WARM"
  rcli 9 config resetstat >/dev/null
  sleep "$SECS"
  commands "$SECS" "$1"
}

[ "${ONLY:-}" != 1 ] || exit 0
echo "== 2. global-store commands per second for $KEYS active keys (${RATE}/s per region," \
  "a limit of 2 a minute, REGION_SYNC_INTERVAL=1s; counted over ${SECS}s after ${WARM}s)"
rcli 9 flushall >/dev/null
# shellcheck disable=SC2046
start 1 0 small 1 $(region eu)
# shellcheck disable=SC2046
start 2 1 small 2 $(region us)
loadgen 1 &
measure "every key in eu only (us idle)"
wait "$!"
stop 1
stop 2
rcli 9 flushall >/dev/null
# shellcheck disable=SC2046
start 1 0 small 1 $(region eu)
# shellcheck disable=SC2046
start 2 1 small 2 $(region us)
loadgen 1 &
a=$!
loadgen 2 &
b=$!
measure "every key in eu and us (two regions, both instances)"
wait "$a" "$b"
echo "uptime: $(uptime)"
