# Helpers the bench scripts source (bash): a scratch directory with cleanup, and instructions per
# decision under callgrind. Nothing here runs on its own.
#
# Instructions per decision under valgrind's callgrind: what the load of a shared machine cannot
# move. The server runs under `valgrind --tool=callgrind --callgrind-out-file=<base>`; the driver
# sends the same decisions twice (a warm-up, then the counted run), callgrind's counters are zeroed
# between the two and dumped after the second; the instructions the whole server process executed
# in user space (every thread; callgrind does not see the kernel) divided by the decisions is the
# figure. The dump stays for callgrind_annotate.

# callgrind_ctl ACTION PID HOST: `callgrind_control ACTION PID` (-z zero, -d dump) for a server
# started with HOST=HOST in its environment: vgdb names its pipes after HOST, and an empty HOST is
# not the same as none (`???`), so pass the server's HOST exactly ("" when it had none).
callgrind_ctl() {
  if [ -n "$3" ]; then
    HOST=$3 callgrind_control "$1" "$2" >/dev/null 2>&1
  else
    env -u HOST callgrind_control "$1" "$2" >/dev/null 2>&1
  fi
}

# callgrind_per_decision PID HOST BASE DECISIONS OUT -- DRIVE...: runs DRIVE (which must print
# "errors 0)" or "<DECISIONS> succeeded") once to warm up, zeroes the counters of the callgrind
# process PID (started with HOST, dumping to BASE.<n>), runs DRIVE again, dumps, copies the dump
# to OUT and prints the instructions per decision. Returns 1 when a run fails.
callgrind_per_decision() {
  local pid=$1 host=$2 base=$3 decisions=$4 out=$5 dump
  shift 6
  # grep -c reads all the output (-q could close the pipe early under pipefail).
  "$@" | grep -Ec "errors 0\)|$decisions succeeded" >/dev/null || return 1
  callgrind_ctl -z "$pid" "$host"
  "$@" | grep -Ec "errors 0\)|$decisions succeeded" >/dev/null || return 1
  rm -f "$base".*
  callgrind_ctl -d "$pid" "$host"
  for _ in $(seq 100); do
    dump=$(ls "$base".* 2>/dev/null | head -1)
    [ -n "$dump" ] && grep -q '^summary:\|^totals:' "$dump" 2>/dev/null && break
    sleep 0.1
  done
  [ -n "$dump" ] || return 1
  cp "$dump" "$out"
  awk -v n="$decisions" '/^summary:/ {printf "%.0f\n", $2 / n}' "$out"
}

# cache_misses DUMP DECISIONS: the first-level cache misses per decision of a callgrind dump run
# with --cache-sim=yes (peers.sh's CACHE_SIM=1), as "I1 <instruction misses> D1 <data misses>"
# (reads and writes). Simulated caches of this host's sizes, without other processes.
cache_misses() {
  awk -v n="$2" '/^events:/ {for (i = 2; i <= NF; i++) col[$i] = i}
    /^summary:/ {printf "I1 %.0f D1 %.0f", $col["I1mr"] / n, ($col["D1mr"] + $col["D1mw"]) / n}' "$1"
}

# bench_workdir: a scratch directory in $work and a list $pids of the processes the script starts;
# on exit, every process in the list is killed and the directory removed, however the script ends.
bench_workdir() {
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
}
bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}

# bench_serve CONFIG_DIR: starts the release ratelimitd ($CARGO_TARGET_DIR, default target) on
# core 0 with configuration CONFIG_DIR, its HTTP port on 127.0.0.1:$BASE_PORT and the next three
# for gRPC, debug and admin, and the caller's environment otherwise (a store, say); sets $pid, adds
# it to $pids (bench_workdir) and returns once /healthcheck answers.
bench_serve() {
  HOST=127.0.0.1 PORT=$BASE_PORT GRPC_HOST=127.0.0.1 GRPC_PORT=$((BASE_PORT + 1)) \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((BASE_PORT + 2)) ADMIN_PORT=$((BASE_PORT + 3)) \
    USE_STATSD=false RATELIMITD_CONFIG="$1" \
    taskset -c 0 "${CARGO_TARGET_DIR:-target}/release/ratelimitd" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$BASE_PORT/healthcheck" >/dev/null && return 0
    sleep 0.1
  done
  echo "ratelimitd did not answer /healthcheck on 127.0.0.1:$BASE_PORT within 10 s" >&2
  return 1
}

# cpu_ticks: the CPU time (user + system, in clock ticks) of the server bench_serve started.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
