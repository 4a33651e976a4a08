//! The real `ratelimitd` binary: `validate` (on every example config), `--help`, settings errors,
//! JSON logs; and the `client` example run against it.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
}

#[test]
fn validate_accepts_every_example_config() {
    // Every rate limit config directory under examples/ (the README's, `/check`'s, the one behind
    // envoy/envoy.yaml, one file per feature), found by listing so that a new one is not missed.
    // examples/k8s and examples/envoy-gateway hold Kubernetes manifests, not configs:
    // tests/it/ops/k8s_recipes.rs checks the config inside the ConfigMap, and
    // tests/it/envoy/gateway_recipe.rs the Envoy Gateway recipe; examples/grafana holds a dashboard
    // (tests/it/observability/grafana_dashboard.rs) and examples/prometheus alert rules (tests/it/observability/promtool.rs);
    // examples/accuracy is Rust, a module of the accuracy example, and examples/loadgen the load
    // generator's modules.
    let mut dirs: Vec<String> = std::fs::read_dir("examples")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_dir()
                && ![
                    "k8s",
                    "envoy-gateway",
                    "grafana",
                    "prometheus",
                    "accuracy",
                    "loadgen",
                ]
                .iter()
                .any(|d| p.ends_with(d))
        })
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    assert_eq!(
        dirs,
        [
            "examples/check",
            "examples/config",
            "examples/envoy",
            "examples/features"
        ]
    );
    for dir in &dirs {
        let out = bin().args(["validate", dir]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("all rate limit configs ok"),
            "{dir}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // One file per feature, each with its comment header.
    let features = bin()
        .args(["validate", "examples/features"])
        .output()
        .unwrap();
    let files = std::fs::read_dir("examples/features").unwrap().count();
    assert!(files >= 6, "{files} feature examples");
    let summary = format!("all rate limit configs ok ({files} file(s))");
    assert!(String::from_utf8_lossy(&features.stdout).contains(&summary));
    for e in std::fs::read_dir("examples/features").unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("# "),
            "{} lacks its header",
            path.display()
        );
    }
}

#[test]
fn validate_prints_every_error_with_file_and_path_and_fails() {
    let bad = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n  - key: \"\"\n";
    let err = crate::support::process::validate_refuses(bad);
    assert!(err.contains("bad.yaml"), "{err}");
    assert!(err.contains("descriptors[0].rate_limit.unit"), "{err}");
    assert!(err.contains("invalid rate limit unit 'fortnight'"), "{err}");
    assert!(err.contains("descriptor has empty key"), "{err}");
}

#[test]
fn validate_refuses_a_file_over_config_max_file_bytes_as_the_server_would() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n# {}\n",
        "x".repeat(2000)
    );
    std::fs::write(dir.path().join("big.yaml"), yaml).unwrap();
    let ok = bin().arg("validate").arg(dir.path()).output().unwrap();
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    let capped = (bin().arg("validate").arg(dir.path()))
        .env("CONFIG_MAX_FILE_BYTES", "1024")
        .output()
        .unwrap();
    assert_eq!(capped.status.code(), Some(1), "{capped:?}");
    let err = String::from_utf8_lossy(&capped.stderr);
    assert!(
        err.contains("big.yaml") && err.contains("CONFIG_MAX_FILE_BYTES"),
        "{err}"
    );
    let bad = (bin().arg("validate").arg(dir.path()))
        .env("CONFIG_MAX_FILE_BYTES", "lots")
        .output()
        .unwrap();
    assert_ne!(bad.status.code(), Some(0), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("CONFIG_MAX_FILE_BYTES"),
        "{bad:?}"
    );
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

#[test]
fn an_unknown_config_type_refuses_to_start_with_the_go_message() {
    let out = bin().env("CONFIG_TYPE", "BOGUS").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Invalid setting for ConfigType: BOGUS"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

fn spawn_examples() -> crate::support::process::Spawned {
    crate::support::process::spawn(&[("RATELIMITD_CONFIG".into(), "examples/config".into())])
}

#[test]
fn json_logs_have_the_go_fields() {
    let server = spawn_examples();
    let v = &server.log;
    assert_eq!(v["@message"], "ratelimitd listening", "{v}");
    assert_eq!(v["level"], "warning", "{v}");
    let ts = v["@timestamp"].as_str().unwrap();
    // RFC 3339 in UTC with sub-second digits, e.g. 2026-01-02T03:04:05.000006Z.
    assert_eq!(ts.len(), 27, "{ts}");
    assert!(ts.ends_with('Z') && &ts[4..5] == "-" && &ts[10..11] == "T" && &ts[19..20] == ".");
    assert!(ts[..4].parse::<u32>().unwrap() >= 2024);
    assert!(v["grpc_addr"].as_str().unwrap().starts_with("127.0.0.1:"));
}

/// The `client` example's binary, built from the current source.
fn client_example() -> Command {
    crate::support::examples::example("client")
}

/// Runs the client example; returns (exit code, stdout, stderr).
fn client(args: &[&str]) -> (Option<i32>, String, String) {
    let out = client_example().args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn client_example_prints_each_status_and_exits_by_the_overall_code() {
    let server = spawn_examples();
    let addr = server.grpc_addr.as_str();
    // Three descriptors: a limited one charged 3 hits, a nested one of two entries, an unlimited.
    // Fresh values and one call each, so no window boundary can change the numbers.
    let (code, out, err) = client(&[
        "--addr",
        addr,
        "example",
        "remote_address=10.0.0.1",
        "plan=free,user=bob",
        "api_key=internal",
        "--hits",
        "3",
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(lines[0], "overall: OK");
    assert!(
        lines[1].starts_with("[remote_address=10.0.0.1]: OK, limit 10/SECOND, remaining 7"),
        "{out}"
    );
    assert!(
        lines[2].starts_with("[plan=free,user=bob]: OK, limit 100/HOUR, remaining 97"),
        "{out}"
    );
    assert!(
        lines[3].starts_with("[api_key=internal]: OK, no limit, remaining 4294967295"),
        "{out}"
    );
    // More hits than the limit in one request: OVER_LIMIT, exit code 2 (`--target` is an alias).
    let (code, out, err) = client(&[
        "--target",
        addr,
        "example",
        "remote_address=10.0.0.2",
        "--hits",
        "11",
    ]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(out.starts_with("overall: OVER_LIMIT\n"), "{out}");
    assert!(out.contains("[remote_address=10.0.0.2]: OVER_LIMIT, limit 10/SECOND, remaining 0"));
}

#[test]
fn client_example_usage_and_connection_errors_exit_with_1() {
    let (code, _, err) = client(&["example", "remote_address"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("'remote_address' is not key=value"), "{err}");
    let (code, _, err) = client(&["example"]);
    assert_eq!(code, Some(1), "a descriptor is required: {err}");
    // Nothing listens on port 1 of loopback: refused at once, reported, not a hang.
    let (code, _, err) = client(&["--addr", "127.0.0.1:1", "example", "a=b"]);
    assert_eq!(code, Some(1));
    assert!(err.starts_with("error: "), "{err}");
}
