#!/usr/bin/env bash
# Instructions per decision of expressive matching (crates/core/examples/matching_cost.rs; its docs
# say what the two domains hold): the limiter on the memory store under valgrind's callgrind, run
# for N and for 2N decisions, the difference divided by N, so start-up and config compilation
# cancel out. Counts, unlike times, do not move with the load of a shared machine.
#
#   bench/matching.sh              # N=20000; MODES="exact regex rules"
#   BIN=path bench/matching.sh     # another build of the example (e.g. one of an older commit)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
MODES=${MODES:-exact regex rules}
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p ratelimitd-core --example matching_cost
  BIN=${CARGO_TARGET_DIR:-target}/release/examples/matching_cost
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The instructions (Ir) of one run of $1 decisions in mode $2.
total() {
  valgrind --tool=callgrind --callgrind-out-file="$work/out" "$BIN" "$2" "$1" >/dev/null 2>"$work/log" ||
    { cat "$work/log" >&2; exit 1; }
  awk '/^(summary|totals):/ {print $2; exit}' "$work/out"
}
echo "# $(date -u '+%F %H:%M UTC'), callgrind, $BIN"
for mode in $MODES; do
  one=$(total "$N" "$mode")
  two=$(total "$((2 * N))" "$mode")
  printf '%-6s %10d instructions/decision\n' "$mode" "$(((two - one) / N))"
done
