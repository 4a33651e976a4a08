#!/usr/bin/env bash
# ratelimitd and Kuadrant limitador side by side, in one run on one machine: decisions per server
# CPU-second, p50/p99 at saturation and at half load, and the ratios, for the memory store and
# for Redis, under two load generators:
#
#   loadgen  examples/loadgen: 4 HTTP/2 connections x 64 clients, 10 000 descriptor values (one
#            thread, calls made with h2 directly: it costs less CPU per request than the server;
#            on one connection the two programs take turns and neither core saturates)
#   h2load   nghttp2's h2load (Debian: apt-get install nghttp2-client), which we did not write:
#            4 connections x 64 streams posting one pre-encoded gRPC message (so one descriptor
#            value: h2load sends the same body every time)
#
#   bench/peers.sh               # ROUNDS=3 SECONDS_PER_RUN=8; SKIP_BUILD=1 reuses the release build
#   bench/peers.sh instructions  # instructions per decision under callgrind (DECISIONS=20000);
#                                # CACHE_SIM=1 adds simulated I1 and D1 misses per decision
#   bench/peers.sh latency       # p50/p99 and server CPU at fixed rates (RATES, per server)
#   RATELIMITD_BIN=path          # measures that ratelimitd binary instead of building one
#   STORES="memory redis"        # the stores measured
#   SERVERS="floor ratelimitd"   # the servers measured (default all three; the floor only in
#                                # `instructions`); SERVERS=ratelimitd needs no limitador
#   STEAL_MAX_MS=100             # a saturated run the host took more from is run again
#
# Both servers get the same limit (domain `bench`, descriptor key `k`, 10^9 per hour, a counter per
# value; fixed window in both) and the same Redis, flushed before each run. Each server is pinned
# with taskset to core 0, the load generator to core 1, Redis is unpinned. Runs alternate between
# the servers (ratelimitd then limitador in odd rounds, the other way in even ones) so that both see
# the same background load; `uptime`'s load average is printed with every run. Server CPU is
# utime+stime from /proc/<pid>/stat over the run. Half load, for each row: examples/loadgen paced
# open loop (`--rate`, with its hand-written HTTP/2 client, `--client raw`, which keeps its
# schedule where the h2 client would fill the generator's own core) at half of what that server
# sustained under that row's generator in the same round, p50 and p99 counted from when each
# request was due (h2load's own `--rps` counts from the actual send, which hides a stall), how late
# the generator's sends left (p99; when it nears the latency, the generator, not the server, is
# behind), and `half-cpu`, the share of its core the server used meanwhile (half of the
# throughput is not half of the core: a server fed one request at a time pays its wake-up, read
# and write for each). `steal` and `half-steal`: milliseconds
# of the saturated and of the half-load run in which the hypervisor ran something else while this
# machine's cores wanted to run (/proc/stat's steal, both cores summed). On a shared virtual
# machine each such stall holds up the server and the generator alike, and a few of them are
# enough to make a p99 of milliseconds: read half-p99 with half-steal beside it. Host contention
# also slows what the server does get to run (its caches, the memory bus): decisions per
# CPU-second fell by up to a third in runs with a second of steal. A saturated run with more
# than STEAL_MAX_MS of steal is therefore set aside (the script says so, with its figures) and
# run again, at most twice, whichever server it was; of the tries, the one with the least steal
# is printed, and when even that one is over STEAL_MAX_MS the summary leaves it out (it says how
# many rounds each figure is over; with no quiet round at all it uses them all and says so).
# On Redis, every row also prints `calls/dec`: the script calls Redis ran (`INFO commandstats`,
# EVALSHA and EVAL) per decision of the saturated run (`instructions` prints it over its two runs),
# below 1 when concurrent requests share calls. Without limitador in SERVERS only ratelimitd is
# run, and with both stores the summary ends with ratelimitd's Redis / memory cost per decision.
# Every run is bounded by SECONDS_PER_RUN; nothing here asserts a time.
#
# `latency` runs the paced generator of the half-load runs at each of RATES (default 5000 10000
# 20000 30000 45000 60000 a second) against each server in turn, alternating the order by round,
# and prints the server's share of its core, p50, p99, the generator's lateness and steal per
# rate: where each server's p99 crosses a millisecond, side by side. A rate a server cannot keep
# up with prints `-` (some due requests were never sent).
#
# `instructions` measures what the load on a shared machine cannot move: each server runs under
# valgrind's callgrind, takes DECISIONS warm-up decisions from examples/loadgen (64 in flight, one
# connection, 10 000 values), then callgrind's counters are zeroed, the same DECISIONS decisions
# (the same values in the same order) are sent again and the counters dumped; the instructions the
# whole server process executed in user space (every thread; callgrind does not see the kernel,
# so system calls count for nothing), divided by DECISIONS, are printed per server and store; the
# same with h2load (one connection, 64 streams). The dumps stay in $OUT_DIR (default
# target/peers-callgrind) for callgrind_annotate. A third server, `floor` (examples/floor.rs),
# is measured the same way, once (it has no store): ratelimitd's HTTP/2 stack answering every
# `ShouldRateLimit` with one constant OK and deciding nothing, the transport's floor; each
# ratelimitd line then also prints its count as a multiple of the floor's under that generator.
#
# limitador is not part of this repository and is never built by this script: it expects the
# binary at $LIMITADOR_BIN (default ~/.cache/ratelimitd-bench/limitador-server) and says how to
# build it when it is missing (`instructions` without limitador in SERVERS does not need it). Linux only; needs redis-server, redis-cli, taskset, h2load, curl.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMITADOR_BIN=${LIMITADOR_BIN:-$HOME/.cache/ratelimitd-bench/limitador-server}
MODE=${1:-rounds}
case $MODE in rounds | instructions | latency) ;; *) echo "usage: $0 [rounds|instructions|latency]" >&2; exit 2 ;; esac
ROUNDS=${ROUNDS:-3}
STORES=${STORES:-memory redis}
DECISIONS=${DECISIONS:-20000}
SECS=${SECONDS_PER_RUN:-8}
RATES=${RATES:-5000 10000 20000 30000 45000 60000}
STEAL_MAX_MS=${STEAL_MAX_MS:-100}
BASE_PORT=${BASE_PORT:-18380}
target=${CARGO_TARGET_DIR:-target}

SERVERS=${SERVERS:-floor ratelimitd limitador}
needs_limitador=1
[[ " $SERVERS " == *" limitador "* ]] || needs_limitador=
if [ -n "$needs_limitador" ] && [ ! -x "$LIMITADOR_BIN" ]; then
  cat >&2 <<EOF
limitador-server not found at $LIMITADOR_BIN (set LIMITADOR_BIN). Build it from its source,
outside this repository, with its default features:
  git clone https://github.com/Kuadrant/limitador /tmp/limitador
  cd /tmp/limitador && PROTOC=/usr/bin/protoc cargo build --release -p limitador-server
  mkdir -p ~/.cache/ratelimitd-bench && cp target/release/limitador-server ~/.cache/ratelimitd-bench/
The build needs protoc (Debian: protobuf-compiler; PROTOC names it). Note its commit (git -C /tmp/limitador log -1 --format=%h) next to the figures. Its default
features include disk storage (RocksDB, which needs libclang and a long C++ build); neither store
measured here uses it, so where it cannot be built, give limitador-server's dependency on
limitador \`default-features = false, features = ["redis_storage"]\` and take out its "disk"
storage branch, and say so next to the figures.
EOF
  exit 1
fi
tools=(redis-server redis-cli taskset h2load curl)
[ "$MODE" != instructions ] || tools=(redis-server redis-cli h2load valgrind callgrind_control)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --locked --bin ratelimitd --example loadgen \
  --example floor
bin=${RATELIMITD_BIN:-$target/release/ratelimitd}
load=$target/release/examples/loadgen
floor=$target/release/examples/floor

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_workdir

# The same limit for both servers.
mkdir -p "$work/config"
printf '%s\n' 'domain: bench' 'descriptors:' '  - key: k' \
  '    rate_limit: {unit: hour, requests_per_unit: 1000000000}' >"$work/config/bench.yaml"
printf '%s\n' '- namespace: bench' '  max_value: 1000000000' '  seconds: 3600' '  conditions: []' \
  '  variables:' "    - descriptors[0]['k']" >"$work/limits.yaml"
# RateLimitRequest{domain "bench", descriptors [{entries [{k, "10.0.7"}]}], hits_addend 1} in
# a gRPC frame (uncompressed, 24-byte message), for h2load.
printf '\x00\x00\x00\x00\x18\x0a\x05bench\x12\x0d\x0a\x0b\x0a\x01k\x12\x0610.0.7\x18\x01' >"$work/frame"

rport=$((BASE_PORT + 9))
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  >"$work/redis.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do redis-cli -p "$rport" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done

grpc_port=$((BASE_PORT + 1))
# What each server runs under: taskset pinning it to core 0, or callgrind (unpinned: it runs the
# program's threads one at a time anyway). The dump goes to $dump.
if [ "$MODE" != instructions ]; then
  under=(taskset -c 0)
else
  out_dir=${OUT_DIR:-$target/peers-callgrind}
  mkdir -p "$out_dir"
  under=(valgrind --tool=callgrind ${CACHE_SIM:+--cache-sim=yes}
    --callgrind-out-file="$work/callgrind.out")
fi
# Starts server $1 (ratelimitd|limitador|floor) on store $2 (memory|redis; the floor has none);
# sets $server.
start() {
  local who=$1 store=$2
  redis-cli -p "$rport" flushall >/dev/null
  rm -f "$work"/callgrind.out*
  if [ "$who" = ratelimitd ]; then
    local extra=()
    [ "$store" = memory ] || extra=(REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$rport)
    # limitador has no Redis response timeout: at saturation ours (15 ms by default) would answer
    # the odd slow call by the failure mode. Under callgrind the server runs tens of times slower.
    local timeout=1s
    [ "$MODE" != instructions ] || timeout=10s
    [ "$store" = memory ] || extra+=(REDIS_RESPONSE_TIMEOUT=$timeout)
    env HOST=127.0.0.1 PORT=$BASE_PORT GRPC_HOST=127.0.0.1 GRPC_PORT=$grpc_port \
      DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((BASE_PORT + 2)) USE_STATSD=false \
      RATELIMITD_CONFIG="$work/config" "${extra[@]}" \
      "${under[@]}" "$bin" >"$work/server.log" 2>&1 &
  elif [ "$who" = floor ]; then
    # Started with a HOST as ratelimitd is, which vgdb needs to find it (see `instructions`).
    env HOST=127.0.0.1 "${under[@]}" "$floor" "127.0.0.1:$grpc_port" >"$work/server.log" 2>&1 &
  else
    local storage=(memory)
    [ "$store" = memory ] || storage=(redis "redis://127.0.0.1:$rport")
    "${under[@]}" "$LIMITADOR_BIN" -b 127.0.0.1 -p "$grpc_port" -B 127.0.0.1 -P "$BASE_PORT" \
      "$work/limits.yaml" "${storage[@]}" >"$work/server.log" 2>&1 &
  fi
  server=$!
  pids+=("$server")
  for _ in $(seq 100); do
    # Ready when it answers a decision.
    "$load" --target "127.0.0.1:$grpc_port" --domain bench --key k --concurrency 1 --seconds 1 \
      --max-requests 1 2>/dev/null | grep -q '(ok 1,' && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.2
  done
  echo "$who ($store) did not start: $(tail -c 400 "$work/server.log")" >&2
  exit 1
}
stop() { kill "$server"; wait "$server" 2>/dev/null || true; }
# Script calls Redis has run since its statistics were last reset (`INFO commandstats`: EVALSHA
# and EVAL, one round trip each), for the script calls per decision of a Redis run.
script_calls() {
  redis-cli -p "$rport" info commandstats |
    awk -F'[=,:]' '/^cmdstat_evalsha:|^cmdstat_eval:/ {n += $3} END {print n + 0}'
}
cpu() { awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)
# Time the hypervisor ran something else while this machine's cores wanted to run (the steal
# column of /proc/stat, both cores), in ticks; `steal_ms before after` in milliseconds.
steal() { awk '/^cpu / {print $9}' /proc/stat; }
steal_ms() { awk -v a="$1" -v b="$2" -v t="$tck" 'BEGIN {printf "%.0f", (b - a) * 1000 / t}'; }
per_cpu() { awk -v n="$1" -v a="$2" -v b="$3" -v t="$tck" 'BEGIN {printf "%.0f", n / ((b - a) / t)}'; }
# Script calls per decision of a run of $1 decisions that began at $2 script calls; `-` for none.
calls_per() {
  awk -v n="$1" -v a="$2" -v b="$(script_calls)" 'BEGIN {if (b > a) printf "%.3f", (b - a) / n; else print "-"}'
}
pct() { sort -n | awk -v p="$1" '{v[NR] = $1} END {i = int((NR - 1) * p + 0.5) + 1; printf "%.2f", v[i] / 1000}'; }

# One saturated run of generator $1 against the running server; prints
# "decisions/s per-cpu-second p50-ms p99-ms steal-ms script-calls-per-decision" (the last `-` on
# the memory store).
saturate() {
  local before after out steal_before stolen calls_before calls
  calls_before=$(script_calls)
  before=$(cpu "$server")
  steal_before=$(steal)
  if [ "$1" = loadgen ]; then
    out=$(taskset -c 1 "$load" --target "127.0.0.1:$grpc_port" --domain bench --key k \
      --connections 4 --concurrency 256 --seconds "$SECS" --keys 10000)
    after=$(cpu "$server")
    calls=$(calls_per "$(echo "$out" | awk '/^requests/ {print $2}')" "$calls_before")
    echo "$out" | grep -q 'errors 0)' || { echo "errors: $out" >&2; exit 1; }
    local n rate p50 p99
    n=$(echo "$out" | awk '/^requests/ {print $2}')
    rate=$(echo "$out" | awk '/^requests/ {print $5}')
    p50=$(echo "$out" | awk '/^latency/ {print $4}')
    p99=$(echo "$out" | awk '/^latency/ {print $8}')
    echo "$rate $(per_cpu "$n" "$before" "$after") $p50 $p99 $(steal_ms "$steal_before" "$(steal)") $calls"
  else
    # Two runs: the counted one writes no per-request log, the second (latency only) does. h2load
    # has one thread; writing a line per request slows it enough that it sends smaller bursts,
    # and a server fed smaller bursts spends more per decision (measured: about a fifth more for
    # ratelimitd, whose rate is near that thread's), so the log run would bias the CPU figure.
    local url="http://127.0.0.1:$grpc_port/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
    local h2=(taskset -c 1 h2load -t 1 -c 4 -m 64 -d "$work/frame" -H 'content-type: application/grpc'
      -H 'te: trailers')
    "${h2[@]}" -D "$SECS" "$url" >"$work/h2.out"
    after=$(cpu "$server")
    stolen=$(steal_ms "$steal_before" "$(steal)")
    local n ok2xx
    n=$(awk '/^requests:/ {print $8}' "$work/h2.out")
    calls=$(calls_per "$n" "$calls_before")
    ok2xx=$(awk '/^status codes:/ {print $3}' "$work/h2.out")
    [ -n "$n" ] && [ "$n" = "$ok2xx" ] && grep -q ' 0 failed, 0 errored' "$work/h2.out" ||
      { echo "h2load: failed streams: $(cat "$work/h2.out")" >&2; exit 1; }
    rm -f "$work/h2.log"
    "${h2[@]}" -D "$((SECS / 2 + 1))" --log-file="$work/h2.log" "$url" >/dev/null
    [ "$(awk '$2 != 200' "$work/h2.log" | wc -l)" -eq 0 ] || { echo "h2load: failed streams" >&2; exit 1; }
    echo "$(awk -v n="$n" -v s="$SECS" 'BEGIN {printf "%.0f", n / s}') $(per_cpu "$n" "$before" "$after")" \
      "$(cut -f3 "$work/h2.log" | pct 0.5) $(cut -f3 "$work/h2.log" | pct 0.99) $stolen $calls"
  fi
}

# examples/loadgen paced at $1 decisions/s over 4 connections with its hand-written HTTP/2 client
# (which keeps its schedule where the h2 client would fill the generator's core): prints "p50-ms
# p99-ms send-lag-p99-ms steal-ms server-cpu-%", the latencies counted from when each request was
# due; "- - - - -" when some due requests could not be sent.
paced() {
  local out steal_before
  steal_before=$(steal)
  out=$(taskset -c 1 "$load" --target "127.0.0.1:$grpc_port" --domain bench --key k --concurrency 64 \
    --connections 4 --seconds "$SECS" --keys 10000 --rate "$1" --client raw --server-pid "$server")
  echo "$out" | grep -q ' 0 due but never sent' || { echo "- - - - -"; return; }
  echo "$out" | grep -q 'errors 0)' || { echo "errors: $out" >&2; exit 1; }
  echo "$(echo "$out" | awk '/^latency/ {print $4, $8}') $(echo "$out" | awk '/^paced/ {print $10}')" \
    "$(steal_ms "$steal_before" "$(steal)")" \
    "$(echo "$out" | awk '/^server cpu/ {sub(/\(/, "", $4); sub(/%/, "", $4); print $4}')"
}

# Instructions per decision of server $1 on store $2 under generator $3 (see the header), the
# dump kept in $out_dir. `h2load-tonic` is h2load with `grpc-encoding: identity`, which the direct
# path of ratelimitd leaves to tonic's codec: the same binary's gRPC path without it.
instructions() {
  local who=$1 store=$2 gen=$3 per drive
  # vgdb finds the server by the HOST it was started with (ratelimitd's environment sets one).
  local host=${HOST:-}
  [ "$who" = limitador ] || host=127.0.0.1
  if [ "$gen" = loadgen ]; then
    drive=("$load" --target "127.0.0.1:$grpc_port" --domain bench --key k --concurrency 64
      --seconds 600 --keys 10000 --max-requests "$DECISIONS")
  else
    drive=(h2load -n "$DECISIONS" -c 1 -m 64 -d "$work/frame" -H 'content-type: application/grpc'
      -H 'te: trailers')
    [ "$gen" = h2load ] || drive+=(-H 'grpc-encoding: identity')
    drive+=("http://127.0.0.1:$grpc_port/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
  fi
  local calls_before
  calls_before=$(script_calls)
  per=$(callgrind_per_decision "$server" "$host" "$work/callgrind.out" "$DECISIONS" \
    "$out_dir/$who-$store-$gen.callgrind" -- "${drive[@]}") ||
    { echo "$who ($store, $gen): a run failed" >&2; exit 1; }
  local times= misses=
  [ -z "${CACHE_SIM:-}" ] || misses=$(cache_misses "$out_dir/$who-$store-$gen.callgrind" "$DECISIONS")
  if [ "$who" = floor ]; then
    floor_per[$gen]=$per
  elif [ "$who" = ratelimitd ] && [ -n "${floor_per[$gen]:-}" ]; then
    times=$(awk -v a="$per" -v b="${floor_per[$gen]}" 'BEGIN {printf "%.2fx floor", a / b}')
  fi
  # Script calls per decision over the warm-up and the counted run (Redis only; `-` otherwise).
  printf '%-6s %-12s %-10s %22s %9s  %-14s %s\n' "$store" "$gen" "$who" "$per" \
    "$(calls_per $((2 * DECISIONS)) "$calls_before")" "$(cut -d' ' -f1-3 /proc/loadavg)" \
    "$times${misses:+  $misses}"
}

if [ "$MODE" = instructions ]; then
  # A multiple of loadgen's 64 clients, so that each sends the same number.
  DECISIONS=$((DECISIONS / 64 * 64))
  echo "# $(date -u '+%F %H:%M UTC'), callgrind, $DECISIONS decisions after as many warm-up ones"
  [ -z "$needs_limitador" ] ||
    echo "# limitador: $LIMITADOR_BIN ($("$LIMITADOR_BIN" --version 2>/dev/null | head -1))"
  printf '%-6s %-12s %-10s %22s %9s  %-14s %s\n' store gen server instructions/decision calls/dec \
    load-avg "ratelimitd / floor${CACHE_SIM:+  cache misses/decision}"
  # The floor's figure per generator, for the ratio on ratelimitd's lines.
  declare -A floor_per=()
  if [[ " $SERVERS " == *" floor "* ]]; then
    start floor -
    for gen in loadgen h2load; do instructions floor - "$gen"; done
    stop
  fi
  for store in $STORES; do
    for who in ${SERVERS/floor/}; do
      start "$who" "$store"
      gens=(loadgen h2load)
      [ "$who" = limitador ] || gens+=(h2load-tonic)
      for gen in "${gens[@]}"; do instructions "$who" "$store" "$gen"; done
      stop
    done
  done
  echo "# dumps: $out_dir (callgrind_annotate --inclusive=yes <file>)"
  exit 0
fi

# The first lines of a run's output: when, on what, against which limitador.
banner() {
  echo "# $(date -u '+%F %H:%M UTC'), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  [ -z "$needs_limitador" ] ||
    echo "# limitador: $LIMITADOR_BIN ($("$LIMITADOR_BIN" --version 2>/dev/null | head -1))"
}
# The servers in the order round $1 runs them: ratelimitd first in odd rounds, limitador in even.
# Only the servers SERVERS names.
in_turn() {
  local order=(ratelimitd limitador) who
  [ $(($1 % 2)) -eq 1 ] || order=(limitador ratelimitd)
  for who in "${order[@]}"; do [[ " $SERVERS " != *" $who "* ]] || echo "$who"; done
}

if [ "$MODE" = latency ]; then
  banner
  echo "# examples/loadgen --client raw --connections 4 --concurrency 64 --keys 10000 --rate R," \
    "${SECS}s a run; latencies from when each request was due"
  printf '%-6s %-6s %-10s %8s %8s %8s %8s %9s %7s  %s\n' round store server rate cpu-% p50-ms \
    p99-ms late-p99 steal load-avg
  for round in $(seq "$ROUNDS"); do
    for store in $STORES; do
      for who in $(in_turn "$round"); do
        start "$who" "$store"
        for r in $RATES; do
          read -r h50 h99 hlate hstolen hcpu < <(paced "$r")
          printf '%-6s %-6s %-10s %8s %8s %8s %8s %9s %7s  %s\n' "$round" "$store" "$who" "$r" \
            "$hcpu" "$h50" "$h99" "$hlate" "$hstolen" "$(cut -d' ' -f1-3 /proc/loadavg)"
        done
        stop
      done
    done
  done
  exit 0
fi

results=$work/results
banner
printf '%-6s %-5s %-8s %-10s %10s %12s %8s %8s %6s %9s %9s %9s %10s %8s %9s  %s\n' round store \
  gen server decisions/s per-cpu-s p50-ms p99-ms steal half-p50 half-p99 half-late half-steal \
  half-cpu calls/dec load-avg
for round in $(seq "$ROUNDS"); do
  for store in $STORES; do
    for who in $(in_turn "$round"); do
      start "$who" "$store"
      for gen in loadgen h2load; do
        # A saturated run during which the host took the cores away for long is run again
        # (twice at most): such a run measures the host, and it would land on one server only.
        # Of the tries, the one the host took least from counts.
        kept=
        for try in 1 2 3; do
          read -r rate per p50 p99 stolen calls < <(saturate "$gen")
          if [ -z "$kept" ] || [ "$stolen" -lt "$(echo "$kept" | cut -d' ' -f5)" ]; then
            kept="$rate $per $p50 $p99 $stolen $calls"
          fi
          [ "$stolen" -gt "$STEAL_MAX_MS" ] && [ "$try" -lt 3 ] || break
          echo "# round $round, $store, $gen, $who: set aside and run again, the host took" \
            "$stolen ms ($rate decisions/s, $per per CPU-second)"
        done
        read -r rate per p50 p99 stolen calls <<<"$kept"
        read -r h50 h99 hlate hstolen hcpu < <(paced $((rate / 2)))
        line=$(printf '%-6s %-5s %-8s %-10s %10s %12s %8s %8s %6s %9s %9s %9s %10s %8s %9s  %s' \
          "$round" "$store" "$gen" "$who" "$rate" "$per" "$p50" "$p99" "$stolen" "$h50" "$h99" \
          "$hlate" "$hstolen" "$hcpu" "$calls" "$(cut -d' ' -f1-3 /proc/loadavg)")
        echo "$line"
        echo "$line" >>"$results"
      done
      stop
    done
  done
done

# Per store and generator: each server's best and median decisions per server CPU-second over
# its rounds the host left alone (steal at most STEAL_MAX_MS; all rounds when none was), how many
# rounds that is, and the ratios ratelimitd / limitador of the best and of the medians (without
# limitador in SERVERS, ratelimitd's figures alone). Then, with both stores measured, what a Redis
# decision costs ratelimitd in server CPU as a multiple of a memory decision (memory's decisions
# per CPU-second over Redis's, of the bests and of the medians).
echo
if [ -n "$needs_limitador" ]; then
  printf '%-6s %-8s %28s %28s %14s\n' store gen 'ratelimitd best/median (n)' \
    'limitador best/median (n)' 'ratio best/med'
else
  printf '%-6s %-8s %28s\n' store gen 'ratelimitd best/median (n)'
fi
# Server $1's per-CPU-second figures on store $3 under generator $4 of the rounds with at most $2
# ms of steal.
rounds() {
  awk -v s="$3" -v g="$4" -v w="$1" -v m="$2" \
    '$2 == s && $3 == g && $4 == w && $9 <= m {print $6}' "$results"
}
# "best median rounds" of server $1 on store $2 under generator $3.
stats() {
  local quiet
  quiet=$(rounds "$1" "$STEAL_MAX_MS" "$2" "$3")
  if [ -z "$quiet" ]; then
    echo "# $2, $3, $1: the host took more than $STEAL_MAX_MS ms of every round;" \
      "these figures count them all" >&2
    quiet=$(rounds "$1" 1000000000 "$2" "$3")
  fi
  echo "$quiet" | sort -n |
    awk '{v[NR] = $1} END {printf "%d %d %d\n", v[NR], v[int((NR + 1) / 2)], NR}'
}
for store in $STORES; do
  for gen in loadgen h2load; do
    read -r rb rm rn < <(stats ratelimitd "$store" "$gen")
    if [ -z "$needs_limitador" ]; then
      printf '%-6s %-8s %28s\n' "$store" "$gen" "$rb / $rm ($rn)"
      continue
    fi
    read -r lb lm ln < <(stats limitador "$store" "$gen")
    printf '%-6s %-8s %28s %28s %14s\n' "$store" "$gen" "$rb / $rm ($rn)" "$lb / $lm ($ln)" \
      "$(awk -v a="$rb" -v b="$lb" -v c="$rm" -v d="$lm" 'BEGIN {printf "%.2fx / %.2fx", a / b, c / d}')"
  done
done
if [[ " $STORES " == *" memory "* && " $STORES " == *" redis "* ]]; then
  echo
  printf '%-8s %34s\n' gen 'ratelimitd Redis / memory best/med'
  for gen in loadgen h2load; do
    read -r mb mm _ < <(stats ratelimitd memory "$gen")
    read -r xb xm _ < <(stats ratelimitd redis "$gen")
    printf '%-8s %34s\n' "$gen" \
      "$(awk -v a="$mb" -v b="$xb" -v c="$mm" -v d="$xm" 'BEGIN {printf "%.2fx / %.2fx", a / b, c / d}')"
  done
fi
