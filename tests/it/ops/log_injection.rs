//! Client input cannot forge a text log line: the real binary with `LOG_FORMAT=text` and the
//! decision log on gets a `/json` request whose domain and descriptor carry a newline, a carriage
//! return and a terminal escape; every line it writes for it stays one line, escaped.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::redis::free_port;
use ratelimitd_core::clock::Stopwatch;
use serde_json::json;

const CFG: &str = "domain: api\ndescriptors:\n  - {key: user, rate_limit: {unit: minute, requests_per_unit: 5}}\n";

/// What the attacker wants an operator (or a log parser) to read as a line of its own.
const FORGED: &str = "ERROR ratelimitd: admin token accepted";

#[tokio::test]
async fn a_newline_or_escape_in_client_input_is_escaped_in_text_logs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.yaml"), CFG).unwrap();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
        .envs(crate::support::LOOPBACK)
        .envs([
            ("PORT", port.to_string()),
            ("LOG_FORMAT", "text".into()),
            ("LOG_LEVEL", "info".into()),
            ("DECISION_LOG_SAMPLE_RATE", "1".into()),
            ("USE_STATSD", "false".into()),
            ("POLICY_ENABLED", "false".into()),
            ("RATELIMITD_CONFIG", dir.path().display().to_string()),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = crate::support::process::stderr_lines(&mut child);
    let next = |until: &str| {
        let watch = Stopwatch::start();
        let mut seen = Vec::new();
        while let Some(left) = Duration::from_secs(30).checked_sub(watch.elapsed()) {
            let Ok(line) = lines.recv_timeout(left) else {
                break;
            };
            let done = line.contains(until);
            seen.push(line);
            if done {
                return seen;
            }
        }
        panic!("no line with {until:?} in {seen:#?}");
    };
    next("ratelimitd listening");
    let domain = format!("api\n{FORGED}\r\u{1b}[2K");
    let body = json!({
        "domain": domain,
        "descriptors": [{"entries": [{"key": "user", "value": format!("v\n{FORGED}\u{1b}]0;x\u{7}")}]}],
    });
    let r = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/json"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The decision line for the request, and everything before it.
    let seen = next("decision");
    let _ = child.kill();
    let _ = child.wait();
    for line in &seen {
        assert!(!line.starts_with(FORGED), "forged line: {seen:#?}");
        assert!(
            !line.contains(['\r', '\u{1b}', '\u{7}']),
            "raw control: {line:?}"
        );
    }
    let decision = seen.last().unwrap();
    assert!(
        decision.contains(&format!("domain=api\\n{FORGED}\\r\\u{{1b}}[2K")),
        "{decision}"
    );
}
