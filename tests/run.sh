#!/usr/bin/env bash
# Runs the whole ratelimitd test suite on this machine, installing what the tests need when it is
# missing: redis-server and redis-cli (Debian package redis-server).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "installing redis-server (apt)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi

cargo test --all-targets --locked "$@"
