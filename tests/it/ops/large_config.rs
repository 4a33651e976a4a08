//! One config file with tens of thousands of per-client descriptors loads under the default
//! `CONFIG_MAX_FILE_BYTES` (the former fixed 1 MiB cap refused it and the service ran with no
//! configuration), and a lower setting refuses it at startup, naming the file and the setting.

use std::process::Command;

use crate::support::process;

/// `n` per-client descriptors of one domain, one line each (about 90 bytes per descriptor).
fn config(n: usize) -> String {
    let mut out = String::from("domain: users\ndescriptors:\n");
    for i in 0..n {
        out.push_str(&format!(
            "  - {{key: user, value: \"user-{i:06}\", rate_limit: {{unit: minute, requests_per_unit: 1}}}}\n"
        ));
    }
    out
}

#[tokio::test]
async fn twenty_thousand_descriptors_in_one_file_load_and_a_lower_cap_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let text = config(20_000);
    assert!(
        text.len() > 1 << 20,
        "over the former 1 MiB cap: {}",
        text.len()
    );
    std::fs::write(dir.path().join("users.yaml"), &text).unwrap();
    let path = dir.path().display().to_string();

    let s = process::spawn(&[("RATELIMITD_CONFIG".to_string(), path.clone())]);
    assert_eq!(s.log["domains"], 1, "{}", s.log);
    // The last descriptor of the file is enforced.
    let url = format!("http://{}/json", s.http_addr);
    let body = r#"{"domain": "users", "descriptors": [{"entries": [{"key": "user", "value": "user-019999"}]}]}"#;
    let http = reqwest::Client::new();
    let mut codes = Vec::new();
    for _ in 0..2 {
        let r = http.post(&url).body(body).send().await.unwrap();
        codes.push(r.status().as_u16());
    }
    assert_eq!(codes, [200, 429]);
    drop(s);

    let out = Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
        .envs(crate::support::LOOPBACK)
        .envs([
            ("RATELIMITD_CONFIG", path.as_str()),
            ("CONFIG_MAX_FILE_BYTES", "1048576"),
            ("USE_STATSD", "false"),
            ("POLICY_ENABLED", "false"),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a refused config must not start");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("users.yaml")
            && err.contains("1048576-byte limit")
            && err.contains("CONFIG_MAX_FILE_BYTES"),
        "{err}"
    );
}
