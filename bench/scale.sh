#!/usr/bin/env bash
# The README's scale figures: decisions per server CPU-second and per second, p50/p99, Redis
# operations per decision and RSS per key, for the memory store, Redis, and Redis with leases
# (`lease: 100`) on one hot key and on 10 000 keys; the server on one core and on two; and
# redis-benchmark running the fixed-window script (EVALSHA, pipelined) as Redis's own ceiling.
#
#   bench/scale.sh            # SECONDS_PER_RUN=8 CONCURRENCY=64 by default
#
# The server is pinned with taskset to core 0 (or cores 0,1), the load generator to core 1; Redis
# is unpinned. On a 2-core machine the "2-core" server shares core 1 with the load generator, so
# its decisions/s is bounded by what is left of that core: read decisions per server CPU-second
# for the server's efficiency, decisions/s for what the machine delivers. Every run is bounded by
# SECONDS_PER_RUN; nothing here asserts a time. Needs redis-server, redis-cli, redis-benchmark,
# taskset; Linux only.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_PORT=${BASE_PORT:-18280}
SECS=${SECONDS_PER_RUN:-8}
CONC=${CONCURRENCY:-64}
for tool in redis-server redis-cli redis-benchmark taskset; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --locked --bin ratelimitd --example loadgen --example memory_per_key --example cores
bin=target/release/ratelimitd
load=target/release/examples/loadgen

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_workdir

# Domain `scale`: key `k`, a limit no run reaches; an argument adds `lease: <it>` to the limit.
write_config() {
  mkdir -p "$work/config"
  {
    echo 'domain: scale'
    echo 'descriptors:'
    echo '  - key: k'
    echo "    rate_limit: {unit: hour, requests_per_unit: 1000000000${1:+, lease: $1}}"
  } >"$work/config/scale.yaml"
}

rport=$((BASE_PORT + 4))
redis-server --port "$rport" --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do redis-cli -p "$rport" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
# Commands Redis ran (scripts' inner commands included), and script calls (the round trips).
redis_calls() { redis-cli -p "$rport" info stats | awk -F: '/^total_commands_processed/ {print $2+0}'; }
script_calls() {
  redis-cli -p "$rport" info commandstats |
    awk -F'[=,:]' '/^cmdstat_(evalsha|eval):/ {n += $3} END {print n + 0}'
}

# Starts ratelimitd on cores $1 with the extra environment "${@:2}"; sets $server, or returns 1
# (with the server's own words) when it refuses the configuration.
start_server() {
  local cores=$1
  shift
  env HOST=127.0.0.1 PORT=$BASE_PORT GRPC_HOST=127.0.0.1 GRPC_PORT=$((BASE_PORT + 1)) \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((BASE_PORT + 2)) USE_STATSD=false \
    USE_PROMETHEUS=true PROMETHEUS_ADDR=127.0.0.1:$((BASE_PORT + 3)) \
    RATELIMITD_CONFIG="$work/config" "$@" \
    taskset -c "$cores" "$bin" >"$work/server.log" 2>&1 &
  server=$!
  pids+=("$server")
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$BASE_PORT/healthcheck" >/dev/null && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  echo "   skipped: the server refused this configuration: $(tail -c 300 "$work/server.log")"
  return 1
}
stop_server() { kill "$server"; wait "$server" 2>/dev/null || true; }

# One scenario: name, server cores, keys, extra server environment.
run() {
  local name=$1 cores=$2 keys=$3
  shift 3
  echo "== $name (server on cores $cores, $keys keys, $CONC in flight, ${SECS}s)"
  start_server "$cores" "$@" || return 0
  local before scripts0 rss0 out
  before=$(redis_calls)
  scripts0=$(script_calls)
  rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$server/status")
  out=$(taskset -c 1 "$load" --target 127.0.0.1:$((BASE_PORT + 1)) --domain scale --key k \
    --concurrency "$CONC" --seconds "$SECS" --keys "$keys" --server-pid "$server")
  echo "$out" | sed 's/^/   /'
  local decisions calls scripts
  decisions=$(echo "$out" | awk '/^requests/ {print $2}')
  if echo "$out" | grep -q ' errors [1-9]' && echo "$out" | grep -q '(ok 0, over_limit 0,'; then
    # Started but answers nothing: the configuration was not loaded (e.g. `lease` not known yet).
    echo "   skipped: every request failed; the server's log ends: $(tail -c 300 "$work/server.log")"
    stop_server
    return 0
  fi
  calls=$(($(redis_calls) - before))
  scripts=$(($(script_calls) - scripts0))
  per() { awk -v c="$1" -v d="$decisions" 'BEGIN {printf "%.4f", c / (d > 0 ? d : 1)}'; }
  echo "   redis commands per decision: $(per "$calls") (script calls: $(per "$scripts"))"
  echo "   RSS growth: $(($(awk '/^VmRSS/ {print $2}' "/proc/$server/status") - rss0)) kB over $keys keys"
  # A Redis call past REDIS_RESPONSE_TIMEOUT is counted as err_type="redis_error".
  curl -s "http://127.0.0.1:$((BASE_PORT + 3))/metrics" | grep -E 'redis_error|store_full' | grep -v '^#' | sed 's/^/   /' || true
  stop_server
}

redis_env=(REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$rport)
write_config
for cores in 0 0,1; do
  run "memory store" "$cores" 10000
  run "Redis" "$cores" 10000 "${redis_env[@]}"
done
write_config 100
run "Redis, lease: 100, one hot key" 0 1 "${redis_env[@]}"
run "Redis, lease: 100, 10 000 keys" 0 10000 "${redis_env[@]}"

echo "== memory per key (examples/memory_per_key, 1 000 000 keys each)"
for a in fixed_window token_bucket sliding_window leaky_bucket sliding_log; do
  timeout 300 target/release/examples/memory_per_key "$a" 1000000 | sed 's/^/   /'
done

echo "== every core in process (examples/cores: one limiter, 1 then 2 threads, no network)"
timeout 300 target/release/examples/cores 1000000 2 11 | sed 's/^/   /'

echo "== redis-benchmark: the fixed-window script, EVALSHA, 50 clients, -P 16, 10 000 keys"
sha=$(cat lua/deadline.lua lua/fixed_window.lua | redis-cli -p "$rport" -x script load)
timeout $((SECS * 4)) redis-benchmark -p "$rport" -c 50 -P 16 -n 1000000 -r 10000 -q \
  evalsha "$sha" 1 "{1:d|1:k=__rand_int__}:fw:3600:0" 0 1 1000000000 3600 0 0 | tr '\r' '\n' | tail -1
