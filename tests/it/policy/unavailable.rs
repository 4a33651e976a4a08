//! A policy database that cannot be opened, against the real binary: a `policy.db` that is
//! corrupt, or that cannot be opened at all (a directory where the file should be), at startup.
//! The binary says so at ERROR naming the file and what it means, is not ready (`/healthcheck`
//! 500), keeps enforcing the stored override from the last good copy (2 stays 2, not the
//! file's 200) and the stored rule, and once the good database is back it opens it without a
//! restart and turns ready.

use std::path::Path;

use crate::support::policy::{TOKEN, call_url, override_body};
use crate::support::process::{Spawned, spawn};
use crate::support::reload::eventually;
use crate::support::{Code, request, st};
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use reqwest::Method;

/// Every client 200 a minute: the override below lowers one to 2 an hour.
const CFG: &str = r#"
domain: api
descriptors:
  - key: client_key
    rate_limit: {unit: minute, requests_per_unit: 200}
"#;

const FAR: &str = "2099-01-01T00:00:00Z";

/// The SQLite file and its WAL companions.
const DB_FILES: [&str; 3] = ["policy.db", "policy.db-wal", "policy.db-shm"];

fn start(config: &Path, data: &Path) -> Spawned {
    let env = [
        ("RATELIMITD_CONFIG", config.display().to_string()),
        ("POLICY_ENABLED", "true".into()),
        ("RATELIMITD_DATA_DIR", data.display().to_string()),
        ("ADMIN_TOKEN", TOKEN.into()),
        // Caps the open retry's backoff (1 s, doubling) at 1 s.
        ("POLICY_REFRESH_INTERVAL", "1s".into()),
        // One fixed instant for both processes, so the hour window cannot roll over mid-test.
        ("RATELIMITD_TEST_MANUAL_CLOCK", "1000000".into()),
    ];
    spawn(&env.map(|(k, v)| (k.to_string(), v)))
}

async fn health(http: &reqwest::Client, bin: &Spawned) -> u16 {
    let url = format!("http://{}/healthcheck", bin.http_addr);
    http.get(url).send().await.unwrap().status().as_u16()
}

/// (code, `requests_per_unit`, limit name) of one hit for `client_key=user:42` (2 an hour under
/// the override).
async fn hit(bin: &Spawned) -> (Code, u32, String) {
    let (code, limit) = hit_in(bin, "api", "user:42").await;
    let (rpu, name) = limit.expect("a current limit");
    (code, rpu, name)
}

/// The code and current limit (`requests_per_unit`, name) of one hit for `client_key=value`.
async fn hit_in(bin: &Spawned, domain: &str, value: &str) -> (Code, Option<(u32, String)>) {
    let mut c = RateLimitServiceClient::connect(format!("http://{}", bin.grpc_addr))
        .await
        .unwrap();
    let r = c
        .should_rate_limit(request(domain, &[&[("client_key", value)]]))
        .await
        .unwrap()
        .into_inner();
    let (code, limit, _) = st(&r, 0);
    (code, limit.map(|(rpu, _, name)| (rpu, name)))
}

/// Runs the scenario with `break_db` making the database unusable and `restore` undoing it
/// (given the data directory and a copy of the good database files).
async fn lost_then_back(break_db: fn(&Path), what: &str) {
    let (config, data, good) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    std::fs::write(config.path().join("api.yaml"), CFG).unwrap();
    let http = reqwest::Client::new();

    // A healthy start: the override is stored, and its last good copy written.
    let bin = start(config.path(), data.path());
    assert_eq!(health(&http, &bin).await, 200);
    let admin = |bin: &Spawned, path: &str| format!("http://{}{path}", bin.admin_addr);
    // Per hour, as a person would set it; the clock above keeps every hit in one window.
    let mut body = override_body("user:42", 2, FAR);
    body["unit"] = "hour".into();
    let url = admin(&bin, "/v1/overrides");
    let (status, created) = call_url(&http, Method::POST, &url, Some(TOKEN), Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    // And a rule: domain `tenants`, which no file has, 7 an hour for client_key=gold.
    let rule = serde_json::json!({
        "domain": "tenants",
        "descriptor": [{"key": "client_key", "value": "gold"}],
        "rate_limit": {"unit": "hour", "requests_per_unit": 7},
    });
    let url = admin(&bin, "/v1/policies/gold");
    let (status, body) = call_url(&http, Method::PUT, &url, Some(TOKEN), Some(rule)).await;
    assert_eq!(status, 201, "{body}");
    let copy = data.path().join("policy-last-good.json");
    eventually("the last good copy holds the override", || async {
        std::fs::read_to_string(&copy).is_ok_and(|t| t.contains(&id) && t.contains("tenants"))
    })
    .await;
    drop(bin);
    for f in DB_FILES {
        let from = data.path().join(f);
        if from.exists() {
            std::fs::copy(&from, good.path().join(f)).unwrap();
        }
    }

    // The database cannot be opened: loud, not ready, the copy enforced.
    break_db(data.path());
    let bin = start(config.path(), data.path());
    let db_path = data.path().join("policy.db").display().to_string();
    let error = bin.startup.iter().find(|l| {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
        v["level"] == "error" && l.contains("policy database cannot be opened")
    });
    let error = error.unwrap_or_else(|| panic!("{what}: no ERROR in {:#?}", bin.startup));
    assert!(error.contains("NOT enforced"), "{error}");
    assert!(error.contains(&db_path), "names the database: {error}");
    assert!(error.contains("reason"), "says why: {error}");
    assert_eq!(health(&http, &bin).await, 500, "{what}: not ready");
    let name = format!("override:{id}");
    assert_eq!(hit(&bin).await, (Code::Ok, 2, name.clone()), "{what}");
    assert_eq!(hit(&bin).await, (Code::Ok, 2, name.clone()));
    assert_eq!(hit(&bin).await, (Code::OverLimit, 2, name.clone()));
    let gold = hit_in(&bin, "tenants", "gold").await;
    assert_eq!(
        gold.1.map(|l| l.0),
        Some(7),
        "{what}: the rule from the copy"
    );
    let (status, body) = call_url(&http, Method::GET, &url_of(&bin), Some(TOKEN), None).await;
    assert_eq!(status, 503, "{body}");

    // The good database is back: opened by the retry, ready, its override enforced.
    restore(data.path(), good.path());
    eventually("ready once the database opens", || async {
        health(&http, &bin).await == 200
    })
    .await;
    assert_eq!(hit(&bin).await, (Code::OverLimit, 2, name));
    let (status, list) = call_url(&http, Method::GET, &url_of(&bin), Some(TOKEN), None).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["overrides"][0]["id"], id.as_str());
    assert_eq!(
        hit_in(&bin, "tenants", "gold").await.1.map(|l| l.0),
        Some(7)
    );
}

fn url_of(bin: &Spawned) -> String {
    format!("http://{}/v1/overrides", bin.admin_addr)
}

/// Removes whatever stands where the database files were and puts the good copies back.
fn restore(data: &Path, good: &Path) {
    for f in DB_FILES {
        let at = data.join(f);
        if at.is_dir() {
            std::fs::remove_dir_all(&at).unwrap();
        } else if at.exists() {
            std::fs::remove_file(&at).unwrap();
        }
        let from = good.join(f);
        if from.exists() {
            std::fs::copy(&from, &at).unwrap();
        }
    }
}

#[tokio::test]
async fn a_corrupt_policy_db_is_loud_not_ready_keeps_the_last_good_overrides_and_is_retried() {
    let corrupt = |data: &Path| {
        restore(data, Path::new("/nonexistent"));
        std::fs::write(data.join("policy.db"), vec![0x5a; 8192]).unwrap();
    };
    lost_then_back(corrupt, "corrupt").await;
}

#[tokio::test]
async fn a_policy_db_that_cannot_be_opened_is_loud_not_ready_keeps_the_last_good_overrides_and_is_retried()
 {
    let unopenable = |data: &Path| {
        restore(data, Path::new("/nonexistent"));
        std::fs::create_dir(data.join("policy.db")).unwrap();
    };
    lost_then_back(unopenable, "a directory in its place").await;
}
