//! The real `ratelimitd` binary: `validate`, `--help`, settings errors, JSON logs.

mod common;

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
}

#[test]
fn validate_accepts_the_examples() {
    let out = bin()
        .args(["validate", "examples/config"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all rate limit configs ok"));
}

#[test]
fn validate_prints_every_error_with_file_and_path_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let bad = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n  - key: \"\"\n";
    std::fs::write(dir.path().join("bad.yaml"), bad).unwrap();
    let out = bin().arg("validate").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml"), "{err}");
    assert!(err.contains("descriptors[0].rate_limit.unit"), "{err}");
    assert!(err.contains("invalid rate limit unit 'fortnight'"), "{err}");
    assert!(err.contains("descriptor has empty key"), "{err}");
}

#[test]
fn help_lists_flags_and_the_env_vars_they_override() {
    let out = bin().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for s in [
        "--grpc-port",
        "GRPC_PORT",
        "--config",
        "validate",
        "REDIS_URL",
    ] {
        assert!(help.contains(s), "--help lacks {s}:\n{help}");
    }
}

#[test]
fn an_invalid_setting_is_a_clear_error_not_a_panic() {
    let out = bin().env("GRPC_PORT", "eighty").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GRPC_PORT") && err.contains("eighty"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn spawn_examples() -> common::process::Spawned {
    common::process::spawn(&[("RATELIMITD_CONFIG".into(), "examples/config".into())])
}

#[test]
fn json_logs_have_the_go_fields() {
    let server = spawn_examples();
    let v = &server.log;
    assert_eq!(v["@message"], "ratelimitd listening", "{v}");
    assert_eq!(v["level"], "info", "{v}");
    let ts = v["@timestamp"].as_str().unwrap();
    // RFC 3339 in UTC with sub-second digits, e.g. 2026-01-02T03:04:05.000006Z.
    assert_eq!(ts.len(), 27, "{ts}");
    assert!(ts.ends_with('Z') && &ts[4..5] == "-" && &ts[10..11] == "T" && &ts[19..20] == ".");
    assert!(ts[..4].parse::<u32>().unwrap() >= 2024);
    assert!(v["grpc_addr"].as_str().unwrap().starts_with("127.0.0.1:"));
}
