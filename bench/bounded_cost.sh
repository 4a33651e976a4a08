#!/usr/bin/env bash
# The bounded-cost figures of the README: what hostile or unlucky clients cost a release
# build of ratelimitd. Starts its own redis-server and ratelimitd processes on loopback ports and
# runs the probes of examples/bounded_cost.rs against them:
#   - 150 concurrent gRPC requests with 4 MB values (refused by MAX_DESCRIPTOR_VALUE_BYTES): RSS after;
#   - one request with 100 000 descriptors (refused by MAX_DESCRIPTORS_PER_REQUEST): its time, and
#     other clients' p99 before and during it;
#   - 370 silent connections (closed by CONNECTION_FIRST_BYTE_TIMEOUT): new clients still served;
#   - a full memory store (MEMORY_MAX_BYTES=1MiB): counted as store_full and logged;
#   - Redis hung (SIGSTOP) for 8 s under 64 clients, breaker off so every call reaches Redis:
#     the errors, and how many of them Redis applied when it resumed (the deadline makes it none);
#   - the YAML alias bombs: peak RSS and time of `ratelimitd validate`;
#   - with examples/bounded_bodies.rs, each against a fresh server (peak and final RSS, 8 other gRPC
#     clients' p99 before and during): 8 loops of 2 MB `/json` bodies of 699 050 empty descriptors
#     for 14 s; 32 concurrent 1 MiB gRPC messages of 520 000 empty descriptors for 14 s; 20 HTTP
#     clients trickling a request head (a byte every 4 s, reconnecting) against
#     HTTP_MAX_CONNECTIONS=20 while `/check` is called once a second; 40 health watchers against
#     GRPC_MAX_CONNECTIONS=20, then 20 new unary clients.
#
#   bench/bounded_cost.sh            (or NO_BUILD=1 CARGO_TARGET_DIR=dir bench/bounded_cost.sh)
#
# Needs redis-server and redis-cli on PATH and /usr/bin/time (GNU time); Linux only.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_PORT=${BASE_PORT:-18180}
target=${CARGO_TARGET_DIR:-target}
command -v redis-server >/dev/null || { echo "needs redis-server" >&2; exit 1; }
# NO_BUILD=1 runs the binaries already in $target/release (a shared target dir may be rebuilt meanwhile).
[ -n "${NO_BUILD:-}" ] || cargo build --release --locked --bin ratelimitd --example bounded_cost --example bounded_bodies
probe=$target/release/examples/bounded_cost
bodies="$target/release/examples/bounded_bodies --grpc 127.0.0.1:$((BASE_PORT + 1)) --http 127.0.0.1:$BASE_PORT"

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/config"
printf 'domain: bc\ndescriptors:\n  - {key: k, rate_limit: {unit: hour, requests_per_unit: 1000000000}}\n' \
  >"$work/config/bc.yaml"

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
peak_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }

# Starts ratelimitd with the extra environment "$@" on ports BASE_PORT+0..2 (+5 admin); sets $server.
start_server() {
  env HOST=127.0.0.1 PORT=$BASE_PORT GRPC_HOST=127.0.0.1 GRPC_PORT=$((BASE_PORT + 1)) \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((BASE_PORT + 2)) ADMIN_PORT=$((BASE_PORT + 5)) USE_STATSD=false \
    RATELIMITD_CONFIG="$work/config" "$@" \
    $target/release/ratelimitd >"$work/server.log" 2>&1 &
  server=$!
  pids+=("$server")
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$BASE_PORT/healthcheck" >/dev/null && return
    sleep 0.1
  done
  echo "ratelimitd did not start:" >&2; cat "$work/server.log" >&2; exit 1
}
stop_server() { kill "$server"; wait "$server" 2>/dev/null || true; }
grpc=127.0.0.1:$((BASE_PORT + 1))

echo "== memory store"
start_server
echo "RSS at start: $(rss_kb "$server") kB"
$probe --target "$grpc" big-values 150 4000000
echo "RSS right after: $(rss_kb "$server") kB"
sleep 2
echo "RSS 2 s later: $(rss_kb "$server") kB"
$probe --target "$grpc" many-descriptors 100000
$probe --target "$grpc" silent 370 10
echo "RSS after: $(rss_kb "$server") kB"
stop_server

echo "== full memory store (MEMORY_MAX_BYTES=1MiB)"
start_server MEMORY_MAX_BYTES=1048576 USE_PROMETHEUS=true PROMETHEUS_ADDR=127.0.0.1:$((BASE_PORT + 3))
$probe --target "$grpc" fill 200
curl -s "http://127.0.0.1:$((BASE_PORT + 3))/metrics" | grep -E 'store_full' | grep -v '^#' || true
{ grep -ci 'full' "$work/server.log" || true; } | sed 's/^/log lines naming the full store: /'
grep -i 'full' "$work/server.log" | head -1 || true
stop_server

echo "== Redis hung for 8 s under 64 clients"
redis-server --port $((BASE_PORT + 4)) --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
redis=$!
pids+=("$redis")
for _ in $(seq 100); do redis-cli -p $((BASE_PORT + 4)) ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
start_server REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$((BASE_PORT + 4)) REDIS_BREAKER_FAILURES=0
$probe --target "$grpc" hang 64 8 "$redis"
stop_server

for attack in "json-huge 8 14" "grpc-huge 32 14"; do
  echo "== $attack"
  start_server
  echo "RSS at start: $(rss_kb "$server") kB"
  $bodies $attack
  echo "peak RSS: $(peak_kb "$server") kB; RSS right after: $(rss_kb "$server") kB"
  sleep 2
  echo "RSS 2 s later: $(rss_kb "$server") kB"
  stop_server
done

echo "== slow clients (HTTP_MAX_CONNECTIONS=20, GRPC_MAX_CONNECTIONS=20)"
start_server HTTP_MAX_CONNECTIONS=20 GRPC_MAX_CONNECTIONS=20
$bodies trickle 20 14
$bodies watchers 40
stop_server

echo "== YAML alias bombs (ratelimitd validate)"
for levels in 9 10; do
  {
    echo 'domain: bomb'
    echo 'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'
    for i in $(seq 1 "$levels"); do
      prev=$((i - 1))
      printf 'a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n' \
        "$i" "$i" $prev $prev $prev $prev $prev $prev $prev $prev $prev $prev
    done
    echo 'descriptors: []'
  } >"$work/config/bomb.yaml"
  /usr/bin/time -o "$work/time.txt" -f "peak RSS %M kB, %e s" \
    $target/release/ratelimitd validate "$work/config/bomb.yaml" >/dev/null 2>"$work/validate.txt" || true
  echo "alias bomb $(wc -c <"$work/config/bomb.yaml") B, $levels levels: $(tail -1 "$work/time.txt"); $(head -c 160 "$work/validate.txt")"
done
