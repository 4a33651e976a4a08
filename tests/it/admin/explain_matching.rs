//! Explain of expressive matching against the real binary: a descriptor's own limit (Envoy
//! Gateway's per-request limit) shown as asked and as counted under the domain's
//! `max_request_limit`, and the `when:` conditions met while matching, with their results.

use crate::support::binary_admin::start_with;
use crate::support::policy::TOKEN;
use reqwest::Method;
use serde_json::json;

const CFG: &str = r#"
domain: api
max_request_limit: {unit: minute, requests_per_unit: 3}
descriptors:
  - key: client_key
    value: vip
    when: 'descriptor.client_key.startsWith("v")'
    rate_limit: {name: vip, unit: minute, requests_per_unit: 50}
  - key: client_key
    rate_limit: {name: per_client, unit: hour, requests_per_unit: 3, failure_mode: allow, when: 'int(descriptor.client_key) >= 0'}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_the_request_limit_with_its_cap_and_the_conditions() {
    let s = start_with(CFG);
    let explain = |client: &'static str, limit: serde_json::Value| {
        let s = &s;
        async move {
            let mut d = json!({"entries": [{"key": "client_key", "value": client}]});
            if !limit.is_null() {
                d["limit"] = limit;
            }
            let body = json!({"domain": "api", "descriptors": [d]});
            let (status, v) = s
                .admin(Method::POST, "/v1/explain", Some(TOKEN), Some(body))
                .await;
            assert_eq!(status, 200, "{v}");
            v["descriptors"][0].clone()
        }
    };
    // 1000 a second asked: counted at the cap, 3 a minute.
    let d = explain("7", json!({"requestsPerUnit": 1000, "unit": "SECOND"})).await;
    assert_eq!(
        d["request_limit"],
        json!({
            "asked": {"requests_per_unit": 1000, "unit": "SECOND"},
            "applied": {"requests_per_unit": 3, "unit": "MINUTE"},
            "capped": true,
            "max_request_limit": {"requests_per_unit": 3, "unit": "MINUTE"},
        }),
        "{d}"
    );
    assert_eq!(d["limits"][0]["requests_per_unit"], 3, "{d}");
    assert_eq!(d["limits"][0]["unit"], "minute", "{d}");
    // Under the cap, its own.
    let d = explain("7", json!({"requests_per_unit": 2, "unit": "hour"})).await;
    assert_eq!(d["request_limit"]["capped"], false, "{d}");
    assert_eq!(d["limits"][0]["requests_per_unit"], 2, "{d}");
    // Without one, no request_limit; the conditions met, in order, with their results.
    let d = explain("vip", json!(null)).await;
    assert!(d.get("request_limit").is_none(), "{d}");
    assert_eq!(
        d["predicates"],
        json!([{"when": "descriptor.client_key.startsWith(\"v\")", "result": "holds", "error": null}]),
        "{d}"
    );
    assert_eq!(d["limits"][0]["name"], "vip");
    // `x` reaches the key-only node (the vip node is never a candidate); its limit's condition
    // fails (`int("x")`), and its failure_mode allow leaves the descriptor unlimited.
    let d = explain("x", json!(null)).await;
    let p = d["predicates"].as_array().unwrap();
    assert_eq!(p.len(), 1, "{d}");
    assert_eq!(p[0]["when"], "int(descriptor.client_key) >= 0");
    assert_eq!(p[0]["result"], "does_not_hold");
    assert!(p[0]["error"].as_str().unwrap().contains("int"), "{d}");
    assert_eq!(d["applies"], "no_limit", "{d}");
    // A bad unit is refused by name.
    let body = json!({"domain": "api", "descriptors": [{"entries": [{"key": "client_key", "value": "a"}], "limit": {"requestsPerUnit": 1, "unit": "fortnight"}}]});
    let error = s.explain_refused(body).await;
    assert!(
        error.starts_with("descriptors[0].limit.unit: invalid unit 'fortnight'"),
        "{error}"
    );
}
