//! `STRICT_DOMAINS` on the real binary: a misspelt domain on `POST /check` and `/json` is refused
//! with 400 naming it and the domains loaded, and nothing is counted; off (the default, as Go) the
//! same request is allowed with no limit.

use crate::support::process::{self, Spawned};

const CFG: &str = "domain: api\ndescriptors:\n  - {key: client_key, rate_limit: {unit: hour, requests_per_unit: 1}}\n";

fn spawn(strict: &str) -> (Spawned, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.yaml"), CFG).unwrap();
    let env = [
        ("RATELIMITD_CONFIG", dir.path().display().to_string()),
        ("STRICT_DOMAINS", strict.to_string()),
    ];
    let env: Vec<_> = env.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    (process::spawn(&env), dir)
}

async fn post(s: &Spawned, path: &str, body: &str) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(format!("http://{}{path}", s.http_addr))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

const CHECK_TYPO: &str = r#"{"domain": "apl", "client_key": "user:1"}"#;
const JSON_TYPO: &str = r#"{"domain": "apl", "descriptors": [{"entries": [{"key": "client_key", "value": "user:1"}]}]}"#;

#[tokio::test]
async fn a_misspelt_domain_is_refused_with_its_name_in_strict_mode() {
    let (s, _dir) = spawn("true");
    let (status, body) = post(&s, "/check", CHECK_TYPO).await;
    assert_eq!(status, 400, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"], "unknown_domain");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("'apl'") && message.contains("loaded: api"),
        "{message}"
    );
    let (status, body) = post(&s, "/json", JSON_TYPO).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("unknown domain 'apl'") && body.contains("STRICT_DOMAINS"),
        "{body}"
    );
    // The configured domain is decided as usual, and nothing was counted for the refusals.
    let ok = r#"{"domain": "api", "client_key": "user:1"}"#;
    assert_eq!(post(&s, "/check", ok).await.0, 200);
    assert_eq!(post(&s, "/check", ok).await.0, 429);
}

#[tokio::test]
async fn by_default_a_misspelt_domain_is_allowed_as_in_go() {
    let (s, _dir) = spawn("false");
    let (status, body) = post(&s, "/check", CHECK_TYPO).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(post(&s, "/json", JSON_TYPO).await.0, 200);
}
