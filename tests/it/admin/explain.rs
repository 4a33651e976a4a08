//! Explain against the real binary: `POST /v1/explain` on the admin listener shows a key's limit,
//! its live counter, its stored override and its violations while counting no hit (a following
//! `/check` sees the same remaining), needs the token; `ratelimitd explain` prints the same for a
//! person. A rule without a name is explained under its id.

use std::time::Duration;

use crate::support::binary_admin::{Service, start};
use crate::support::policy::TOKEN;
use ratelimitd_core::clock::Stopwatch;
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_counts_no_hit_and_shows_the_limit_override_and_violation() {
    let s = start();
    assert_eq!(s.check("alice").await, (200, json!(2)));
    assert_eq!(s.check("alice").await, (200, json!(1)));
    for _ in 0..5 {
        let v = s.explain("alice").await;
        let d = &v["descriptors"][0];
        assert_eq!(d["applies"], "limited");
        let l = &d["limits"][0];
        assert_eq!(
            (
                &l["name"],
                &l["unit"],
                &l["requests_per_unit"],
                &l["algorithm"],
                &l["shadow"]
            ),
            (
                &json!("per_client"),
                &json!("hour"),
                &json!(3),
                &json!("fixed_window"),
                &json!(false)
            ),
            "{v}"
        );
        assert_eq!(
            (&l["counter"]["used"], &l["counter"]["remaining"]),
            (&json!(2), &json!(1)),
            "{v}"
        );
    }
    // Five explains later the third hit still fits: none of them counted.
    assert_eq!(s.check("alice").await, (200, json!(0)));
    assert_eq!(s.check("alice").await.0, 429);
    let v = s.explain("alice").await;
    assert_eq!(v["descriptors"][0]["limits"][0]["counter"]["remaining"], 0);
    assert_eq!(
        v["descriptors"][0]["limits"][0]["counter"]["over_limit"],
        true
    );

    // The denied hit reaches the violation log once the (manual) clock passes its batch delay.
    s.advance(1_500).await;
    let watch = Stopwatch::start();
    let recent = loop {
        let v = s.explain("alice").await;
        let rows = v["descriptors"][0]["violations"]["recent"].clone();
        if rows.as_array().is_some_and(|r| !r.is_empty())
            || watch.elapsed() > Duration::from_secs(10)
        {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(recent[0]["limit"], "per_client", "{recent}");
    assert!(recent[0]["requests"].as_u64().unwrap() >= 1, "{recent}");

    // A stored override made with a relative valid_for shows with its id and end, and applies.
    let body = json!({"domain": "api", "descriptor": [{"key": "client_key", "value": "bob"}],
        "requests_per_unit": 50, "unit": "minute", "valid_for": "24h", "reason": "launch"});
    let (status, made) = s
        .admin(Method::POST, "/v1/overrides", Some(TOKEN), Some(body))
        .await;
    assert_eq!(status, 201, "{made}");
    let id = made["id"].as_str().unwrap().to_string();
    let v = s.explain("bob").await;
    let d = &v["descriptors"][0];
    assert_eq!(d["overrides"][0]["id"], id.as_str(), "{v}");
    assert_eq!(d["overrides"][0]["active"], true);
    // Created at T0 + 1.5 s: a day later.
    assert_eq!(
        d["overrides"][0]["valid_until"], "1970-01-02T00:20:35.500000Z",
        "{v}"
    );
    assert_eq!(d["limits"][0]["name"], format!("override:{id}"));
    assert_eq!(d["limits"][0]["requests_per_unit"], 50);
    assert_eq!(
        d["limits"][0]["counter"]["remaining"], 50,
        "nothing counted for bob: {v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_needs_the_token_and_refuses_bad_bodies_by_name() {
    let s = start();
    let body = json!({"domain": "api", "descriptors": [{"entries": [{"key": "client_key", "value": "x"}]}]});
    let (status, _) = s
        .admin(Method::POST, "/v1/explain", None, Some(body.clone()))
        .await;
    assert_eq!(status, 401);
    let (status, _) = s
        .admin(Method::POST, "/v1/explain", Some("wrong"), Some(body))
        .await;
    assert_eq!(status, 401);
    let empty = json!({"domain": "api", "descriptors": []});
    let error = s.explain_refused(empty).await;
    assert_eq!(error, "descriptors: expected 1 to 16 descriptors");
    let error = s.explain_refused(json!({"domain": "api"})).await;
    assert!(error.contains("missing field `descriptors`"), "{error}");
    // An unknown domain is explained, not refused: every descriptor is allowed, as on /check.
    let unknown = json!({"domain": "apj", "descriptors": [{"entries": [{"key": "client_key", "value": "x"}]}]});
    let (status, v) = s
        .admin(Method::POST, "/v1/explain", Some(TOKEN), Some(unknown))
        .await;
    assert_eq!(
        (status, &v["domain_known"], &v["descriptors"][0]["applies"]),
        (200, &json!(false), &json!("no_limit"))
    );
}

/// `ratelimitd explain` against the running binary, with the token from the environment.
fn cli(s: &Service, token: Option<&str>, extra: &[&str]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ratelimitd"));
    cmd.args(["explain", "--admin", &s.bin.admin_addr, "--domain", "api"])
        .args(extra);
    cmd.env_remove("ADMIN_TOKEN");
    if let Some(t) = token {
        cmd.env("ADMIN_TOKEN", t);
    }
    let out = cmd.output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_explain_command_prints_the_limit_and_counter_of_a_running_instance() {
    let s = start();
    s.check("dave").await;
    let (code, out, err) = cli(&s, Some(TOKEN), &["--descriptor", "client_key=dave"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("descriptor 1: client_key=dave"), "{out}");
    assert!(
        out.contains("limit per_client [api.client_key]: 3 per hour, fixed_window"),
        "{out}"
    );
    assert!(
        out.contains("counter: 1 used, 2 remaining, within the limit"),
        "{out}"
    );
    // Counted nothing: the next /check still has 1 of 3 used before it.
    assert_eq!(s.check("dave").await, (200, json!(1)));
    let (code, _, err) = cli(&s, None, &["--descriptor", "client_key=dave"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("401") && err.contains("missing or unknown bearer token"),
        "{err}"
    );
    let (code, _, err) = cli(&s, Some(TOKEN), &["--descriptor", "dave"]);
    assert_eq!(code, 2);
    assert!(err.contains("expected key=value pairs"), "{err}");
    let (code, out, _) = cli(
        &s,
        Some(TOKEN),
        &["--descriptor", "client_key=dave", "--json"],
    );
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["descriptors"][0]["limits"][0]["counter"]["used"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_without_a_name_is_explained_under_its_id() {
    let s = start();
    let rule = json!({"domain": "tenants", "descriptor": [{"key": "client_key", "value": "user:42"}],
        "rate_limit": {"unit": "minute", "requests_per_unit": 100}});
    let (status, v) = s
        .admin(Method::PUT, "/v1/policies/gold-u1", Some(TOKEN), Some(rule))
        .await;
    assert_eq!(status, 201, "{v}");
    let body = json!({"domain": "tenants", "descriptors": [{"entries": [{"key": "client_key", "value": "user:42"}]}]});
    let (status, v) = s
        .admin(Method::POST, "/v1/explain", Some(TOKEN), Some(body))
        .await;
    assert_eq!(status, 200, "{v}");
    let l = &v["descriptors"][0]["limits"][0];
    assert_eq!(
        (&l["name"], &l["source"], &l["requests_per_unit"]),
        (&json!("gold-u1"), &json!("policy-db/tenants"), &json!(100)),
        "{v}"
    );
}

/// A concurrency limit whose slots are all held: explain shows the holders there are, not one
/// more (a check is refused once every slot is held, and the refusal's own count is not usage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_the_slots_held_when_every_slot_is_taken() {
    let s = crate::support::binary_admin::start_with(
        "domain: api
descriptors:
  - key: pool
    rate_limit: {name: pool_slots, unit: minute, requests_per_unit: 3, algorithm: concurrency}
",
    );
    let acquire = |holder: &str| {
        let body = json!({"domain": "api", "descriptors": [{"entries": [
            {"key": "pool", "value": "p"}, {"key": "ratelimitd.holder", "value": holder}]}]});
        let url = format!("http://{}/json", s.bin.http_addr);
        let req = s.http.post(url).body(body.to_string());
        async move { req.send().await.unwrap().status().as_u16() }
    };
    for holder in ["h1", "h2", "h3"] {
        assert_eq!(acquire(holder).await, 200);
    }
    assert_eq!(acquire("h4").await, 429, "every slot is held");
    let body =
        json!({"domain": "api", "descriptors": [{"entries": [{"key": "pool", "value": "p"}]}]});
    let (status, v) = s
        .admin(Method::POST, "/v1/explain", Some(TOKEN), Some(body))
        .await;
    assert_eq!(status, 200, "{v}");
    let counter = &v["descriptors"][0]["limits"][0]["counter"];
    assert_eq!(
        (
            &counter["used"],
            &counter["remaining"],
            &counter["over_limit"]
        ),
        (&json!(3), &json!(0), &json!(true)),
        "{v}"
    );
}

/// Explain shows the domain's `default_limit` for a descriptor no rule matches, and a rule where
/// one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_the_default_limit_of_what_no_rule_matches() {
    let cfg = "domain: api\ndefault_limit: {unit: minute, requests_per_unit: 7}\ndescriptors:\n  - {key: known, rate_limit: {unit: hour, requests_per_unit: 3}}\n";
    let s = crate::support::binary_admin::start_with(cfg);
    let body = json!({"domain": "api", "descriptors": [
        {"entries": [{"key": "tenant", "value": "t3"}]},
        {"entries": [{"key": "known", "value": "x"}]}
    ]});
    let (status, v) = s
        .admin(Method::POST, "/v1/explain", Some(TOKEN), Some(body))
        .await;
    assert_eq!(status, 200, "{v}");
    let rate = |i: usize| {
        let l = &v["descriptors"][i]["limits"][0];
        (l["requests_per_unit"].clone(), l["unit"].clone())
    };
    assert_eq!(rate(0), (json!(7), json!("minute")), "the default: {v}");
    assert_eq!(rate(1), (json!(3), json!("hour")), "the rule: {v}");
    assert_eq!(v["descriptors"][0]["applies"], "limited", "{v}");
}
