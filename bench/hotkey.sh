#!/usr/bin/env bash
# Hot key split on a real 3-master Redis Cluster (docs/performance.md, "Hot key split"): one hot
# key driven through one release ratelimitd, without `split` (one master carries it all) and with
# `split: 3` and `split: 6`; for each, the commands every master ran (INFO stats
# total_commands_processed and the EVALSHA calls of INFO commandstats, deltas over the run) and
# the share of each master. Then the accuracy: three ratelimitd instances share a split limit of
# L an hour under skewed load (half of the requests on the first instance, a quarter on each other)
# at 2 L, 1.1 L and exactly L requests; admitted is read from the load generators' answers, and
# set against the exact limit (overage: admitted past L; under-admission: min(requests, L) not
# admitted).
#
#   bench/hotkey.sh           # SECONDS_PER_RUN=8 CONCURRENCY=64 LIMIT=30000 PROFILE=release
#
# The server is pinned with taskset to core 0, the load generator to core 1; the Redis nodes are
# unpinned. Every run is bounded by SECONDS_PER_RUN (and the accuracy runs by their request
# count); nothing here asserts a time. Needs redis-server, redis-cli, taskset; Linux only.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_PORT=${BASE_PORT:-18380}
SECS=${SECONDS_PER_RUN:-8}
CONC=${CONCURRENCY:-64}
LIMIT=${LIMIT:-30000}
for tool in redis-server redis-cli taskset; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
# PROFILE=debug measures a dev build: the commands per master and the accuracy do not depend on
# the build, the decisions per second do.
PROFILE=${PROFILE:-release}
build=(--release)
[ "$PROFILE" = release ] || build=()
[ -n "${SKIP_BUILD:-}" ] || cargo build "${build[@]}" --locked --bin ratelimitd --example loadgen
bin=${CARGO_TARGET_DIR:-target}/$PROFILE/ratelimitd
load=${CARGO_TARGET_DIR:-target}/$PROFILE/examples/loadgen

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_workdir

# Three cluster-enabled nodes on BASE_PORT+20.., bus ports BASE_PORT+30.., made one Cluster of
# three masters (equal runs of slots, as `redis-cli --cluster create` makes them).
ports=()
for i in 0 1 2; do
  p=$((BASE_PORT + 20 + i))
  mkdir -p "$work/node$i"
  redis-server --port "$p" --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-port $((BASE_PORT + 30 + i)) --save '' --appendonly no --dir "$work/node$i" \
    >"$work/node$i.log" 2>&1 &
  pids+=("$!")
  ports+=("$p")
done
for p in "${ports[@]}"; do
  for _ in $(seq 100); do redis-cli -p "$p" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
done
redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >"$work/create.log"
for _ in $(seq 100); do
  redis-cli -p "${ports[0]}" cluster info | grep -q cluster_state:ok && break
  sleep 0.1
done
urls=$(printf '127.0.0.1:%s,' "${ports[@]}")
# A generous REDIS_RESPONSE_TIMEOUT (default 15ms): on a loaded machine a late answer would be an
# error, and an error is neither admitted nor refused.
cluster_env=(BACKEND_TYPE=redis REDIS_TYPE=cluster REDIS_SOCKET_TYPE=tcp REDIS_URL=${urls%,}
  REDIS_RESPONSE_TIMEOUT=1s)

# Per master: commands run (scripts' inner commands included) and EVALSHA/EVAL calls.
commands() { redis-cli -p "$1" info stats | awk -F: '/^total_commands_processed/ {print $2+0}'; }
scripts() {
  redis-cli -p "$1" info commandstats |
    awk -F'[=,:]' '/^cmdstat_(evalsha|eval):/ {n += $3} END {print n + 0}'
}
flush() { for p in "${ports[@]}"; do redis-cli -p "$p" flushall >/dev/null; done; }

# Domain `bench`, key `k`: LIMIT_LINE's limit, with `split: $1` when given.
write_config() {
  mkdir -p "$work/config"
  {
    echo 'domain: bench'
    echo 'descriptors:'
    echo '  - key: k'
    echo "    rate_limit: {unit: hour, requests_per_unit: $2${1:+, split: $1}}"
  } >"$work/config/bench.yaml"
}

# Starts ratelimitd number $1 (ports BASE_PORT + 4 * $1 ...) on core 0; sets $server.
start_server() {
  local n=$1 base=$((BASE_PORT + 4 * $1))
  env HOST=127.0.0.1 PORT=$base GRPC_HOST=127.0.0.1 GRPC_PORT=$((base + 1)) \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((base + 2)) ADMIN_PORT=$((base + 3)) USE_STATSD=false \
    RATELIMITD_CONFIG="$work/config" "${cluster_env[@]}" \
    taskset -c 0 "$bin" >"$work/server$n.log" 2>&1 &
  server=$!
  pids+=("$server")
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$base/healthcheck" >/dev/null && return 0
    sleep 0.1
  done
  echo "ratelimitd $n did not answer: $(tail -c 300 "$work/server$n.log")" >&2
  return 1
}

# Load: one hot key through one server for SECS; per-master commands and their shares.
load_run() {
  local split=$1 name=${1:-none}
  echo "== split: $name (one hot key, $CONC in flight, ${SECS}s)"
  flush
  write_config "$split" 1000000000
  start_server 0
  local before=() sbefore=() after=() safter=() total=0 stotal=0 out i
  for p in "${ports[@]}"; do before+=("$(commands "$p")"); sbefore+=("$(scripts "$p")"); done
  out=$(taskset -c 1 "$load" --target 127.0.0.1:$((BASE_PORT + 1)) --domain bench --key k \
    --concurrency "$CONC" --connections 4 --seconds "$SECS" --keys 1 --server-pid "$server")
  echo "$out" | sed 's/^/   /'
  for i in 0 1 2; do
    after+=($(($(commands "${ports[$i]}") - before[i])))
    safter+=($(($(scripts "${ports[$i]}") - sbefore[i])))
    total=$((total + after[i]))
    stotal=$((stotal + safter[i]))
  done
  for i in 0 1 2; do
    awk -v i="$i" -v c="${after[$i]}" -v t="$total" -v s="${safter[$i]}" -v st="$stotal" -v secs="$SECS" \
      'BEGIN {printf "   master %d: %d commands (%.0f/s), %.1f%% of all; %d script calls, %.1f%%\n",
        i, c, c / secs, 100 * c / (t > 0 ? t : 1), s, 100 * s / (st > 0 ? st : 1)}'
  done
  kill "$server"
  wait "$server" 2>/dev/null || true
}

# Accuracy: three servers, split $1, limit LIMIT; $2 requests in all, half through the first.
accuracy_run() {
  local split=$1 requests=$2 i out ok=0 sent=0 lg=()
  flush
  write_config "$split" "$LIMIT"
  local servers=()
  for i in 0 1 2; do start_server "$i"; servers+=("$server"); done
  local shares=($((requests / 2)) $((requests / 4)) $((requests - requests / 2 - requests / 4)))
  for i in 0 1 2; do
    taskset -c 1 "$load" --target 127.0.0.1:$((BASE_PORT + 4 * i + 1)) --domain bench --key k \
      --concurrency 10 --seconds 120 --keys 1 --max-requests "${shares[$i]}" >"$work/acc$i.out" &
    lg+=("$!")
  done
  wait "${lg[@]}"
  for i in 0 1 2; do
    out=$(head -1 "$work/acc$i.out")
    ok=$((ok + $(echo "$out" | sed -E 's/.*\(ok ([0-9]+),.*/\1/')))
    sent=$((sent + $(echo "$out" | awk '{print $2}')))
  done
  awk -v n="$split" -v l="$LIMIT" -v r="$sent" -v a="$ok" 'BEGIN {
    exact = (r < l ? r : l); over = (a > l ? a - l : 0); under = exact - a
    printf "   split %d, limit %d, %d requests (50/25/25 over 3 instances): admitted %d; overage %d; under-admission %d (%.2f%% of %d)\n",
      n, l, r, a, over, under, 100 * under / exact, exact}'
  for s in "${servers[@]}"; do kill "$s"; wait "$s" 2>/dev/null || true; done
}

date -u +"%Y-%m-%dT%H:%MZ"
load_run ""
load_run 3
load_run 6
echo "== accuracy (three instances, limit $LIMIT an hour)"
for split in 3 6; do
  for requests in $((LIMIT * 2)) $((LIMIT * 11 / 10)) "$LIMIT"; do
    accuracy_run "$split" "$requests"
  done
done
