#!/usr/bin/env bash
# Acquire + release pairs of a concurrency limit per server CPU-second, through POST /check (wrk,
# HTTP/1.1 keep-alive, each pair pipelined on one connection so the release follows its acquire),
# next to plain decisions of a fixed window on the same server process. KEYS distinct client_key
# values, each its own limit of 1000 slots, so no acquisition is refused: wrk's "Non-2xx" line
# must not appear (a 429 would mean a slot leaked). The server is pinned to core 0 and wrk to
# core 1; the server's CPU time is read from /proc before and after each run.
#
#   bench/concurrency.sh                # memory store
#   BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:6379 bench/concurrency.sh   # Redis
#
# Needs wrk (Debian: apt-get install -y wrk), taskset and curl; Linux only.
set -euo pipefail
cd "$(dirname "$0")/.."

RUN_SECONDS=${RUN_SECONDS:-8}
CONCURRENCY=${CONCURRENCY:-32}
KEYS=${KEYS:-10000}
BASE_PORT=${BASE_PORT:-18090}
command -v wrk >/dev/null || { echo "bench/concurrency.sh needs wrk (apt-get install -y wrk)" >&2; exit 1; }

cargo build --release --locked --bin ratelimitd

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_workdir
cfg=$work/config
mkdir "$cfg"
printf 'domain: api\ndescriptors:\n  - {key: client_key, rate_limit: {unit: minute, requests_per_unit: 1000, algorithm: concurrency}}\n' \
  >"$cfg/api.yaml"
printf 'domain: plain\ndescriptors:\n  - {key: client_key, rate_limit: {unit: second, requests_per_unit: 10}}\n' \
  >"$cfg/plain.yaml"
plain=$work/plain.lua
printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nlocal n = 0\nrequest = function()\n  n = n + 1\n  return wrk.format(nil, "/check", nil, string.format([[{"domain":"plain","client_key":"10.0.%%d"}]], n %% %d))\nend\n' \
  "$KEYS" >"$plain"

bench_serve "$cfg"

# run NAME PER_REQUEST SCRIPT: one wrk run; PER_REQUEST answers make one unit of NAME.
run() {
  local before after out requests
  before=$(cpu_ticks)
  out=$(KEYS=$KEYS taskset -c 1 wrk -t1 -c"$CONCURRENCY" -d"${RUN_SECONDS}s" -s "$3" \
    "http://127.0.0.1:$BASE_PORT")
  after=$(cpu_ticks)
  echo "$out"
  requests=$(echo "$out" | awk '/requests in/ {print $1}')
  awk -v r="$requests" -v per="$2" -v name="$1" -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v t="$RUN_SECONDS" \
    'BEGIN { cpu = ticks / hz; if (cpu < 0.01) cpu = 0.01; n = r / per;
             printf "%s: %d, %.0f/s, server cpu %.2fs (%.0f%% of one core): %.0f per server cpu-second\n",
                    name, n, n / t, cpu, 100 * cpu / t, n / cpu }'
}

run "plain decisions (fixed window)" 1 "$plain"
run "acquire+release pairs (concurrency)" 2 bench/concurrency.lua
