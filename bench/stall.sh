#!/usr/bin/env bash
# One slow moment of a healthy Redis under load (README "Failure behaviour", "Bounded cost"): a
# release ratelimitd on its own redis-server over TCP (defaults: REDIS_RESPONSE_TIMEOUT 15ms,
# REDIS_BREAKER_FAILURES 3), CONCURRENCY gRPC calls in flight over KEYS keys for RUN_SECONDS
# (examples/loadgen/), and after 2 s one `DEBUG SLEEP $STALL` — what an expire cycle, a fork for a
# snapshot or a network blip does to Redis. Prints how many decisions each source answered (the
# Prometheus `ratelimitd_decisions_total`), how many of them the failure mode answered (after a
# failed call: `failure_policy`; by the open breaker: `breaker`), and the breaker's transitions.
#
#   bench/stall.sh
#   STALL=0.012 CONCURRENCY=64 bench/stall.sh
#   RATELIMITD_BIN=/path/to/older/ratelimitd bench/stall.sh    # the same load on another build
#   BUILD=0 bench/stall.sh                                      # use the binaries already built
#
# Needs redis-server, redis-cli and curl on PATH; Linux only. Everything binds 127.0.0.1 and stops
# by itself after RUN_SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_PORT=${BASE_PORT:-18280}
STALL=${STALL:-0.02}
CONCURRENCY=${CONCURRENCY:-8}
KEYS=${KEYS:-10000}
RUN_SECONDS=${RUN_SECONDS:-6}
command -v redis-server >/dev/null || { echo "needs redis-server" >&2; exit 1; }
if [ "${BUILD:-1}" != 0 ]; then
  cargo build --release --locked --bin ratelimitd --example loadgen
fi
target=${CARGO_TARGET_DIR:-target}
bin=${RATELIMITD_BIN:-$target/release/ratelimitd}
loadgen=$target/release/examples/loadgen

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_workdir
mkdir "$work/config"
printf 'domain: stall\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1000000, failure_mode: allow}}\n' \
  >"$work/config/stall.yaml"

redis_port=$((BASE_PORT + 4))
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --enable-debug-command yes >"$work/redis.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done

metrics=127.0.0.1:$((BASE_PORT + 3))
env HOST=127.0.0.1 PORT=$BASE_PORT GRPC_HOST=127.0.0.1 GRPC_PORT=$((BASE_PORT + 1)) \
  DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((BASE_PORT + 2)) ADMIN_PORT=$((BASE_PORT + 5)) USE_STATSD=false \
  USE_PROMETHEUS=true PROMETHEUS_ADDR=$metrics POLICY_ENABLED=false RATELIMITD_CONFIG="$work/config" \
  REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$redis_port \
  "$bin" >"$work/server.log" 2>&1 &
server=$!
pids+=("$server")
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$BASE_PORT/healthcheck" >/dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$BASE_PORT/healthcheck" >/dev/null || {
  echo "ratelimitd did not start:" >&2; cat "$work/server.log" >&2; exit 1
}

echo "== $CONCURRENCY calls in flight over $KEYS keys for ${RUN_SECONDS}s; DEBUG SLEEP $STALL after 2 s"
"$loadgen" --target "127.0.0.1:$((BASE_PORT + 1))" --concurrency "$CONCURRENCY" \
  --seconds "$RUN_SECONDS" --keys "$KEYS" --domain stall --key k &
load=$!
pids+=("$load")
sleep 2
redis-cli -p "$redis_port" DEBUG SLEEP "$STALL" >/dev/null
wait "$load"

scrape=$(curl -s "http://$metrics/metrics")
echo "$scrape" | grep -E '^ratelimitd_decisions_total|^ratelimitd_redis_breaker_transitions_total' || true
echo "$scrape" | awk '
  /^ratelimitd_decisions_total/ {
    total += $2
    if ($1 ~ /source="(failure_policy|breaker)"/) failed += $2
  }
  END {
    if (total == 0) { print "no decisions counted"; exit 1 }
    printf "answered by the failure mode: %d of %d decisions (%.3f%%)\n", failed, total, 100 * failed / total
  }'
grep -c 'Redis breaker opened' "$work/server.log" | sed 's/^/breaker openings logged: /' || true
