//! The real `ratelimitd` binary: `validate`, `--help`, settings errors, and a signal-driven shutdown.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// Starts the binary on ephemeral loopback ports and reads the bound addresses from its log.
fn spawn_server() -> (std::process::Child, String) {
    let (child, line) = spawn_until_listening();
    let http = line["http_addr"].as_str().unwrap().to_string();
    (child, http)
}

/// Starts the binary (JSON logs at info) and returns it with its parsed "listening" log line.
fn spawn_until_listening() -> (std::process::Child, serde_json::Value) {
    let mut child = bin()
        .env("RATELIMITD_CONFIG", "examples/config")
        .env("LOG_LEVEL", "info")
        .env("LOG_FORMAT", "json")
        .env("HOST", "127.0.0.1")
        .env("PORT", "0")
        .env("GRPC_HOST", "127.0.0.1")
        .env("GRPC_PORT", "0")
        .env("DEBUG_HOST", "127.0.0.1")
        .env("DEBUG_PORT", "0")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        if line.contains("ratelimitd listening") {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            std::thread::spawn(move || for _ in lines {});
            return (child, v);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("server did not report its addresses");
}

#[test]
fn json_logs_have_the_go_fields() {
    let (mut child, v) = spawn_until_listening();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(v["@message"], "ratelimitd listening", "{v}");
    assert_eq!(v["level"], "info", "{v}");
    let ts = v["@timestamp"].as_str().unwrap();
    // RFC 3339 in UTC with sub-second digits, e.g. 2026-01-02T03:04:05.000006Z.
    assert_eq!(ts.len(), 27, "{ts}");
    assert!(ts.ends_with('Z') && &ts[4..5] == "-" && &ts[10..11] == "T" && &ts[19..20] == ".");
    assert!(ts[..4].parse::<u32>().unwrap() >= 2024);
    assert!(v["grpc_addr"].as_str().unwrap().starts_with("127.0.0.1:"));
}

#[test]
fn sigterm_drains_and_exits_zero() {
    let (mut child, http) = spawn_server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let body = r#"{"domain":"example","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}"#;
    let status = rt.block_on(async {
        reqwest::Client::new()
            .post(format!("http://{http}/json"))
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 200);
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(code) = child.try_wait().unwrap() {
            assert_eq!(code.code(), Some(0));
            break;
        }
        assert!(Instant::now() < deadline, "did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}
