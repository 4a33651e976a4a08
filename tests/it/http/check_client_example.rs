//! `examples/check_client.py` against the real binary: on 429 it waits at least the
//! `retry-after` the server sends (lower case on the wire), not a default second; `in_flight`
//! holds a concurrency slot while its work runs and gives it back afterwards. Its sleep and
//! jitter are swapped for recorders, so nothing waits; the server runs on a manual clock, so the
//! `Retry-After` it sends is known.

use std::process::Command;

use crate::support::process;

/// A fixed window of one hour, one request per client.
const CFG: &str = "domain: api\ndescriptors:\n  - {key: client_key, rate_limit: {unit: hour, requests_per_unit: 1}}\n";

/// 800 s into an hour: the window ends in 2800 s.
const T0: u64 = 1_700_000_000;
const RETRY_AFTER: u64 = 3600 - T0 % 3600;

/// Imports the example, calls `call_with_backoff` with a recording sleep and zero jitter, and
/// prints the recorded waits as JSON.
const DRIVER: &str = r#"
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("check_client", sys.argv[1])
client = importlib.util.module_from_spec(spec)
spec.loader.exec_module(client)

class NoJitter:
    def uniform(self, a, b):
        return 0.0

# Spend the one request of the window.
status, _, _ = client.check("user:42", None, url=sys.argv[2])
assert status == 200, status
waits = []
try:
    client.call_with_backoff("user:42", None, url=sys.argv[2], sleep=waits.append, rng=NoJitter())
except RuntimeError:
    pass
print(json.dumps(waits))
"#;

#[test]
fn the_example_client_waits_what_retry_after_says() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.yaml"), CFG).unwrap();
    let env: Vec<(String, String)> = [
        ("RATELIMITD_CONFIG", dir.path().display().to_string()),
        ("RATELIMITD_TEST_MANUAL_CLOCK", T0.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let s = process::spawn(&env);
    let url = format!("http://{}/check", s.http_addr);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/check_client.py");
    let out = Command::new("python3")
        .args(["-c", DRIVER, script, &url])
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let waits: Vec<f64> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(waits.len(), 5, "MAX_TRIES waits: {waits:?}\n{stderr}");
    for w in waits {
        assert_eq!(w, RETRY_AFTER as f64, "waits Retry-After, with no jitter");
    }
}

/// One slot per client; `in_flight` runs work that checks the slot is held, then the slot is free.
const SLOT_CFG: &str = "domain: api\ndescriptors:\n  - {key: client_key, rate_limit: {unit: hour, requests_per_unit: 1, algorithm: concurrency}}\n";

const SLOT_DRIVER: &str = r#"
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("check_client", sys.argv[1])
client = importlib.util.module_from_spec(spec)
spec.loader.exec_module(client)
url = sys.argv[2]

def work():
    status, headers, _ = client.check("user:42", None, url=url)
    return [status, headers.get("Retry-After")]

during = client.in_flight("user:42", None, work, url=url)
after, _, _ = client.check("user:42", None, url=url)
print(json.dumps({"during": during, "after": after}))
"#;

#[test]
fn the_example_client_holds_a_slot_while_working_and_gives_it_back() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.yaml"), SLOT_CFG).unwrap();
    let env = vec![
        (
            "RATELIMITD_CONFIG".to_string(),
            dir.path().display().to_string(),
        ),
        ("RATELIMITD_TEST_MANUAL_CLOCK".to_string(), T0.to_string()),
    ];
    let s = process::spawn(&env);
    let url = format!("http://{}/check", s.http_addr);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/check_client.py");
    let out = Command::new("python3")
        .args(["-c", SLOT_DRIVER, script, &url])
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        got,
        serde_json::json!({"during": [429, "1"], "after": 200}),
        "the slot is held during the work and free after it"
    );
}
