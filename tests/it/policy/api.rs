//! The policy database's management API over real HTTP on the admin listener (not the debug port):
//! one override by id, overrides by domain, bearer tokens, 422 with every
//! field error, 404, concurrent writers, and a service whose data directory is unusable (it
//! starts, serves its files, and answers the API with 503).

use crate::support::policy::{CFG_API, TOKEN, call, override_body};
use crate::support::{Code, TestServer, st};
use reqwest::Method;
use serde_json::json;

const UNTIL: &str = "1970-01-01T00:30:00Z";

#[tokio::test]
async fn overrides_are_read_by_id_and_by_domain_on_the_admin_listener_only() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    let id = crate::support::policy::create(&s, "user:1", 5, UNTIL).await;
    let mut other = override_body("user:2", 6, UNTIL);
    other["domain"] = json!("other");
    let (status, created) = s.admin(Method::POST, "/v1/overrides", Some(other)).await;
    assert_eq!(status, 201, "{created}");

    let (status, one) = s
        .admin(Method::GET, &format!("/v1/overrides/{id}"), None)
        .await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(
        (one["id"].as_str(), one["requests_per_unit"].as_u64()),
        (Some(id.as_str()), Some(5))
    );
    assert_eq!(
        one["descriptor"],
        json!([{"key": "client_key", "value": "user:1"}])
    );
    let (status, _) = s.admin(Method::GET, "/v1/overrides/ov_nope", None).await;
    assert_eq!(status, 404);
    assert_eq!(
        call(&s, Method::GET, &format!("/v1/overrides/{id}"), None, None)
            .await
            .0,
        401
    );

    let (_, api) = s.admin(Method::GET, "/v1/overrides?domain=api", None).await;
    let ids: Vec<_> = api["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!(id)]);
    let (_, all) = s.admin(Method::GET, "/v1/overrides", None).await;
    assert_eq!(all["overrides"].as_array().unwrap().len(), 2);
    let (_, none) = s
        .admin(Method::GET, "/v1/overrides?domain=nope", None)
        .await;
    assert_eq!(none, json!({"overrides": [], "next_cursor": null}));

    // The debug port (0.0.0.0 by default, as in Go) does not serve the API.
    let debug = s
        .http
        .get(s.debug_url("/v1/overrides"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let text = debug.text().await.unwrap();
    assert!(
        !text.contains("user:1") && text.contains("/rlconfig"),
        "{text}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn requests_without_the_right_token_are_refused() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    let body = Some(override_body("user:1", 5, UNTIL));
    for token in [None, Some("wrong"), Some("")] {
        let (status, json) = call(&s, Method::POST, "/v1/overrides", token, body.clone()).await;
        assert_eq!(status, 401, "{token:?}: {json}");
        assert_eq!(
            call(&s, Method::GET, "/v1/overrides", token, None).await.0,
            401
        );
    }
    let (status, list) = s.admin(Method::GET, "/v1/overrides", None).await;
    assert_eq!(
        (status, list),
        (200, json!({"overrides": [], "next_cursor": null})),
        "nothing was written"
    );
    s.shutdown().await;
    // No token configured: the API is closed, never open.
    let s = TestServer::start(
        &[("api.yaml", CFG_API)],
        &[
            ("POLICY_ENABLED", "true"),
            ("RATELIMITD_DATA_DIR", &data.path().display().to_string()),
        ],
    )
    .await;
    let (status, json) = s.admin(Method::POST, "/v1/overrides", body).await;
    assert_eq!(status, 403);
    assert!(
        json["error"].as_str().unwrap().contains("ADMIN_TOKEN"),
        "{json}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn invalid_input_gets_422_with_every_error_and_changes_nothing() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    let body = json!({
        "domain": "",
        "descriptor": [{"key": ""}],
        "requests_per_unit": "many",
        "unit": "fortnight",
        "valid_until": "next friday",
    });
    let (status, json) = s.admin(Method::POST, "/v1/overrides", Some(body)).await;
    assert_eq!(status, 422);
    assert_eq!(
        json,
        json!({"errors": [
            {"field": "domain", "message": "config file cannot have empty domain"},
            {"field": "descriptor[0].key", "message": "descriptor has empty key"},
            {"field": "requests_per_unit", "message": "expected an integer from 0 to 4294967295, got \"many\""},
            {"field": "unit", "message": "invalid rate limit unit 'fortnight'"},
            {"field": "valid_until", "message": "'next friday' is not an RFC 3339 time such as 2026-12-01T00:00:00Z"},
        ]})
    );
    let past = override_body("user:1", 5, "1970-01-01T00:00:01Z");
    let (status, json) = s.admin(Method::POST, "/v1/overrides", Some(past)).await;
    assert_eq!(status, 422);
    assert_eq!(json["errors"][0]["field"], "valid_until");
    let (_, list) = s.admin(Method::GET, "/v1/overrides", None).await;
    assert_eq!(list, json!({"overrides": [], "next_cursor": null}));
    let missing = s.admin(Method::DELETE, "/v1/overrides/ov_nope", None).await;
    assert_eq!(missing.0, 404);
    s.shutdown().await;
}

#[tokio::test]
async fn concurrent_writers_all_land_and_the_cap_holds() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[("POLICY_MAX_OVERRIDES", "12")]).await;
    let writers = (0..16).map(|i| {
        let body = override_body(&format!("user:{i}"), 5, UNTIL);
        s.admin(Method::POST, "/v1/overrides", Some(body))
    });
    let results = futures_util::future::join_all(writers).await;
    let created = results.iter().filter(|(status, _)| *status == 201).count();
    let refused: Vec<_> = results
        .iter()
        .filter(|(status, _)| *status == 422)
        .collect();
    assert_eq!((created, refused.len()), (12, 4), "{results:?}");
    assert!(
        refused[0].1["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("POLICY_MAX_OVERRIDES")
    );
    let (_, list) = s.admin(Method::GET, "/v1/overrides", None).await;
    let mut ids: Vec<&str> = list["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 12);
    s.shutdown().await;
}

#[tokio::test]
async fn an_unusable_data_directory_makes_the_service_not_ready_and_files_still_serve() {
    let parent = tempfile::tempdir().unwrap();
    // A regular file where the directory should be: no user, root included, can create it.
    let blocker = parent.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let data = blocker.join("data");
    let s = crate::support::policy::start(&data, &[]).await;
    let r = s.rl("api", &[&[("client_key", "user:1")]]).await;
    assert_eq!(st(&r, 0).0, Code::Ok);
    assert!(
        !s.running().health.is_healthy(),
        "not ready without its database"
    );
    let (status, json) = s.admin(Method::GET, "/v1/overrides", None).await;
    assert_eq!(status, 503);
    let error = json["error"].as_str().unwrap();
    let db = data.join("policy.db").display().to_string();
    assert!(
        error.contains(&db) && error.contains("is not open"),
        "{json}"
    );
    let (status, _) = s
        .admin(
            Method::POST,
            "/v1/overrides",
            Some(override_body("u", 1, UNTIL)),
        )
        .await;
    assert_eq!(status, 503);
    s.shutdown().await;
}
