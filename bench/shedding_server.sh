#!/usr/bin/env bash
# What priority shedding and soft limits cost through the real server: decisions per server
# CPU-second of POST /check (wrk, HTTP/1.1 keep-alive) on three limits of one server process — a
# plain fixed window, the same limit with priority classes (the requests cycle through the four
# classes with /check's `priority` field) and the same limit with a soft zone (every decision
# draws) — in alternating rounds of one run (plain, priorities, soft; then priorities, soft,
# plain; ...), so all three see the same background load. KEYS distinct client_key values, each
# its own counter of 10^6 a second, so nothing is denied and the three do the same store work:
# wrk's "Non-2xx" line must not appear. The server is pinned to core 0 and wrk to core 1; the
# server's CPU time is read from /proc before and after each run, and `uptime` is printed with
# every run (the machine may be shared: compare figures of one run only). Each run is bounded by
# RUN_SECONDS; nothing here asserts a time. At the end: the median of each limit over the rounds
# and the ratios to the plain limit.
#
#   bench/shedding_server.sh            # ROUNDS=3 RUN_SECONDS=8 CONCURRENCY=32 KEYS=10000
#
# Needs wrk (Debian: apt-get install -y wrk), taskset and curl; Linux only. SKIP_BUILD=1 reuses
# the release build under CARGO_TARGET_DIR (default target).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
RUN_SECONDS=${RUN_SECONDS:-8}
CONCURRENCY=${CONCURRENCY:-32}
KEYS=${KEYS:-10000}
BASE_PORT=${BASE_PORT:-18190}
for tool in wrk taskset curl; do
  command -v "$tool" >/dev/null || { echo "bench/shedding_server.sh needs $tool" >&2; exit 1; }
done
[ -n "${SKIP_BUILD:-}" ] || cargo build --release --locked --bin ratelimitd

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_workdir
cfg=$work/config
scripts=$work/scripts
results=$work/results
mkdir "$cfg" "$scripts"
limit='unit: second, requests_per_unit: 1000000'
printf 'domain: plain\ndescriptors:\n  - {key: client_key, rate_limit: {%s}}\n' "$limit" >"$cfg/plain.yaml"
printf 'domain: priorities\ndescriptors:\n  - {key: client_key, rate_limit: {%s, priorities: {critical: 1.0, write: 0.9, read: 0.8, test: 0.7}}}\n' \
  "$limit" >"$cfg/priorities.yaml"
printf 'domain: soft\ndescriptors:\n  - {key: client_key, rate_limit: {%s, soft: {up_to: 1.2, breach_ratio: 0.8}}}\n' \
  "$limit" >"$cfg/soft.yaml"
# One wrk script per limit: client_key cycles through KEYS values; the priority limit's requests
# name their class (critical, write, read, test in turn).
for domain in plain priorities soft; do
  class=''
  [ "$domain" = priorities ] && class=',"priority":"%s"'
  cat >"$scripts/$domain.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local classes = {"critical", "write", "read", "test"}
local n = 0
request = function()
  n = n + 1
  local body = string.format('{"domain":"$domain","client_key":"10.0.%d"$class}', n % $KEYS, classes[n % 4 + 1])
  return wrk.format(nil, "/check", nil, body)
end
LUA
done

bench_serve "$cfg"

# run DOMAIN: one wrk run on that limit; prints the run and appends "DOMAIN per-cpu-second".
run() {
  local before after out requests
  echo "-- $1 · $(uptime)"
  before=$(cpu_ticks)
  out=$(taskset -c 1 wrk -t1 -c"$CONCURRENCY" -d"${RUN_SECONDS}s" -s "$scripts/$1.lua" \
    "http://127.0.0.1:$BASE_PORT")
  after=$(cpu_ticks)
  if echo "$out" | grep -q 'Non-2xx'; then
    echo "$out" >&2
    echo "$1: some answers were not 200: a limit denied or refused the bench requests" >&2
    exit 1
  fi
  requests=$(echo "$out" | awk '/requests in/ {print $1}')
  awk -v r="$requests" -v name="$1" -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v t="$RUN_SECONDS" \
    'BEGIN { cpu = ticks / hz; if (cpu < 0.01) cpu = 0.01;
             printf "%s: %d decisions, %.0f/s, server cpu %.2fs (%.0f%% of one core): %.0f per server cpu-second\n",
                    name, r, r / t, cpu, 100 * cpu / t, r / cpu }' | tee -a "$results"
}

order=(plain priorities soft)
for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  for i in 0 1 2; do
    run "${order[$(((i + round - 1) % 3))]}"
  done
done

echo "== medians over $ROUNDS rounds (decisions per server cpu-second)"
for domain in plain priorities soft; do
  awk -v d="$domain:" '$1 == d {print $(NF-3)}' "$results" | sort -n |
    awk -v d="$domain" '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print d, m}'
done | tee "$results.medians"
awk '$1 == "plain" {p = $2} $1 != "plain" {o[$1] = $2}
     END {for (d in o) printf "%s / plain: %.3f (cost %.1f%%)\n", d, o[d] / p, 100 * (1 - o[d] / p)}' "$results.medians"
rm -f "$results.medians"
echo "$(uptime)"
