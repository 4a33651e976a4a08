//! Overrides with a relative `valid_for` against the real binary: `30m`, `7d` and `1d12h` end that
//! long after the service clock's now; a malformed or zero duration, or both `valid_for` and
//! `valid_until`, or neither, is refused (422) naming the field and the valid forms.

use crate::support::binary_admin::start;
use crate::support::policy::TOKEN;
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_for_is_accepted_and_bad_durations_are_refused_naming_the_forms() {
    let s = start();
    let body = |extra: Value| {
        let mut b = json!({"domain": "api", "descriptor": [{"key": "client_key", "value": "carol"}],
            "requests_per_unit": 5, "unit": "minute"});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    for (valid_for, ends) in [
        ("30m", "1970-01-01T00:50:34.000000Z"),
        ("7d", "1970-01-08T00:20:34.000000Z"),
        ("1d12h", "1970-01-02T12:20:34.000000Z"),
    ] {
        let (status, made) = s
            .admin(
                Method::POST,
                "/v1/overrides",
                Some(TOKEN),
                Some(body(json!({"valid_for": valid_for}))),
            )
            .await;
        assert_eq!(status, 201, "{valid_for}: {made}");
        let path = format!("/v1/overrides/{}", made["id"].as_str().unwrap());
        let (_, o) = s.admin(Method::GET, &path, Some(TOKEN), None).await;
        assert_eq!(o["valid_until"], ends, "{valid_for}: {o}");
    }
    for bad in ["24", "1.5h", "1w", "24 h", "-1h"] {
        let (status, v) = s
            .admin(
                Method::POST,
                "/v1/overrides",
                Some(TOKEN),
                Some(body(json!({"valid_for": bad}))),
            )
            .await;
        assert_eq!(status, 422, "{bad}: {v}");
        assert_eq!(v["errors"][0]["field"], "valid_for");
        let msg = v["errors"][0]["message"].as_str().unwrap();
        assert!(
            msg.contains(&format!("'{bad}'")) && msg.contains("such as 30m, 24h or 7d"),
            "{msg}"
        );
    }
    let (status, v) = s
        .admin(
            Method::POST,
            "/v1/overrides",
            Some(TOKEN),
            Some(body(json!({"valid_for": "0s"}))),
        )
        .await;
    assert_eq!(
        (status, v["errors"][0]["message"].as_str().unwrap()),
        (422, "'0s' is zero: an override must last at least 1s")
    );
    let both = json!({"valid_for": "1h", "valid_until": "1970-01-02T00:00:00Z"});
    let (status, v) = s
        .admin(Method::POST, "/v1/overrides", Some(TOKEN), Some(body(both)))
        .await;
    assert_eq!(status, 422);
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not both"),
        "{v}"
    );
    let (status, v) = s
        .admin(
            Method::POST,
            "/v1/overrides",
            Some(TOKEN),
            Some(body(json!({}))),
        )
        .await;
    assert_eq!(
        (status, &v["errors"][0]["field"]),
        (422, &json!("valid_until")),
        "{v}"
    );
}
