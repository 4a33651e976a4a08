//! The example programs (`examples/*.rs`, `examples/*/main.rs`) as binaries the tests run, each
//! built once per test run with `cargo build --example NAME`: `cargo test --all-targets` builds
//! examples as test harnesses only, so `target/debug/examples/NAME` may be missing or stale, and
//! building it here is what keeps a test honest about the current source.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// A command running example `name`, built on first use (cargo's JSON messages name the
/// executable).
pub(crate) fn example(name: &str) -> Command {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let path = built.entry(name.to_owned()).or_insert_with(|| build(name));
    Command::new(path)
}

fn build(name: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    // Cargo gives this test process the package's CARGO_PKG_*, CARGO_MANIFEST_* etc.; build
    // scripts (ring's) watch some of them, so an inner cargo that inherited them would rebuild
    // those crates, and the outer cargo test rebuild them back on its next run.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        let set_for_tests = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
        ]
        .iter()
        .any(|p| k.starts_with(p))
            || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"].contains(&&*k);
        if set_for_tests {
            cmd.env_remove(&*k);
        }
    }
    let out = cmd
        .args([
            "build",
            "--quiet",
            "--locked",
            "--example",
            name,
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo build --example {name} failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo names the {name} executable"))
}
