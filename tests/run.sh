#!/usr/bin/env bash
# Runs the whole ratelimitd test suite on this machine, installing what the tests need when it is
# missing (nothing beyond the Rust toolchain yet: the embedded store needs no Redis).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --all-targets --locked "$@"
