//! The configuration's load history through the real server: every load that compiled and every
//! one that failed is listed by `GET /v1/config/history` (with a token) with its time, version or
//! errors, the SHA-256 of what it compiled and the files' names — never their contents; `/rlconfig`
//! names the hash in service, and the console shows the recent loads.

use crate::support::policy::{TOKEN, call};
use crate::support::reload::*;
use crate::support::*;
use reqwest::Method;

#[tokio::test]
async fn every_load_and_failed_reload_is_listed_with_its_hash_files_and_errors() {
    let env = [("ADMIN_TOKEN", TOKEN), ("POLICY_ENABLED", "false")];
    let ts = TestServer::start(&[("a.yaml", &cfg("a", "k", 5))], &env).await;
    let bad = "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n";
    std::fs::write(ts.dir.path().join("a.yaml"), bad).unwrap();
    eventually("the failure to be counted", || async {
        ts.running().config.load_failures() == 1
    })
    .await;
    std::fs::write(ts.dir.path().join("a.yaml"), cfg("a", "k", 8)).unwrap();
    wait_limit(&ts, "a", "k", Some(8)).await;

    let (status, body) = call(&ts, Method::GET, "/v1/config/history", Some(TOKEN), None).await;
    assert_eq!(status, 200, "{body}");
    let loads = body["loads"].as_array().unwrap();
    let outcomes: Vec<(bool, Option<u64>)> = (loads.iter())
        .map(|l| (l["ok"].as_bool().unwrap(), l["version"].as_u64()))
        .collect();
    assert_eq!(
        outcomes,
        [(true, Some(2)), (false, None), (true, Some(1))],
        "{body}"
    );
    let hash = |i: usize| loads[i]["hash"].as_str().unwrap().to_string();
    assert!(
        hash(0).starts_with("sha256:") && hash(0).len() == 7 + 64,
        "{body}"
    );
    assert!(
        hash(0) != hash(1) && hash(1) != hash(2),
        "each content its own hash"
    );
    assert_eq!(body["current"]["hash"].as_str(), Some(hash(0).as_str()));
    assert_eq!(body["current"]["version"], 2);
    assert!(
        loads[0]["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().ends_with("a.yaml"))
    );
    let errors = loads[1]["errors"].to_string();
    assert!(
        errors.contains("invalid rate limit unit 'fortnight'"),
        "{errors}"
    );
    let text = body.to_string();
    assert!(
        !text.contains("requests_per_unit: 8"),
        "no file contents: {text}"
    );

    // /rlconfig names the hash in service; the console lists the loads.
    let page = rlconfig(&ts).await;
    assert!(
        page.contains(&format!("# config_hash: {}\n", hash(0))),
        "{page}"
    );
    let console = ts
        .http
        .get(ts.admin_url("/"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let html = console.text().await.unwrap();
    assert!(html.contains("id=\"config-loads\""), "{html}");
    assert!(html.contains(&hash(0)[..19]), "the short hash is shown");

    // Without a token: refused.
    let (status, _) = call(&ts, Method::GET, "/v1/config/history", None, None).await;
    assert_eq!(status, 401);
    ts.shutdown().await;
}
