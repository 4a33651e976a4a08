//! Fuzz targets for every decoder a client or an operator feeds, as property tests on stable
//! Rust: domain YAML (loader, validation, compilation), `POST /check` and `/json` bodies (through
//! the real axum router, in process), gRPC `ShouldRateLimit` and RLQS messages (protobuf bytes
//! decoded by prost, then converted and decided), admin API bodies (overrides and rules), and
//! settings (environment variables and flags).
//!
//! Inputs are structured so that they reach deep: valid-looking documents with one field mutated,
//! numbers at every boundary, hostile strings, deep nesting, and byte-level mutations of encoded
//! messages, not only random bytes. Every input is bounded in size, so a case cannot run away.
//! The properties: nothing panics; bad input is an error naming what is wrong (on HTTP a 4xx,
//! never a 5xx); a valid input round-trips or agrees with a simple model.
//!
//! `bash tests/run.sh` runs a short campaign (a few dozen cases per target). A longer one:
//! `FUZZ_CASES=100000 cargo test --release --test it fuzz::` (the count is per target). Failures
//! proptest shrinks are kept in `tests/proptest-regressions/fuzz/<module>.txt` (proptest's path for
//! a module of the `it` binary) and replayed first on every run.

mod admin;
mod grpc;
mod harness;
mod http;
mod http_bodies;
mod inputs;
mod rlqs;
mod settings;
mod yaml;
mod yaml_docs;

use proptest::test_runner::Config;

/// The proptest configuration of every target: `FUZZ_CASES` cases (else `default` — each
/// target's share of the short CI run), failures persisted beside the module's source.
pub(crate) fn cases(default: u32) -> Config {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        // A long campaign shrinks a failure as far as it can; the short run stays short.
        max_shrink_iters: 2048,
        ..Config::default()
    }
}
