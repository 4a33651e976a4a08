//! The core stays the server's bottom floor: its dependency tree (normal dependencies, all of
//! them, not only the direct ones) holds no gRPC, HTTP, Redis, SQL, protobuf or telemetry crate,
//! and no async runtime (an embedder brings its own).
//! Cargo already stops the core from naming the server; this stops a server-side crate from
//! creeping into the core through its own `Cargo.toml`.

use std::process::Command;

/// Crates of the server's edges, named by prefix (`tonic` covers `tonic-health`, ...).
const SERVER_ONLY: &[&str] = &[
    "tonic",
    "axum",
    "hyper",
    "prost",
    "redis",
    "sqlx",
    "opentelemetry",
    "tracing-opentelemetry",
    "tokio",
    "rustls",
    "prometheus",
];

#[test]
fn the_core_depends_on_no_server_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "ratelimitd-core",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["--offline", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && tree.contains("ratelimitd-core"),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let offending: Vec<&str> = tree
        .lines()
        .filter(|line| {
            let name = line.split(' ').next().unwrap_or("");
            SERVER_ONLY.iter().any(|p| name.starts_with(p))
        })
        .collect();
    assert!(
        offending.is_empty(),
        "the core crate must not depend on these server crates: {offending:?}"
    );
}
