//! Matching beyond the Go service's exact values and `*`, through the real server on every store:
//! `value_regex` entries (per value and `regex_key: shared`) over gRPC and `POST /check`, and
//! Go's per-limit statistics for them.

use serde_json::json;

use crate::support::*;

/// Per client: order paths 2 a minute each, every report path 3 a minute together, any other
/// v1 path 5 a minute (a wildcard written after the patterns and still tried after them).
const CFG: &str = r#"
domain: api
descriptors:
  - key: client_key
    descriptors:
      - key: endpoint
        value: "/api/v1/*"
        rate_limit: {name: v1, unit: minute, requests_per_unit: 5}
      - key: endpoint
        value_regex: "/api/v1/users/[^/]+/orders"
        rate_limit: {name: orders, unit: minute, requests_per_unit: 2}
      - key: endpoint
        value_regex: "/api/v1/reports/.*"
        regex_key: shared
        rate_limit: {name: reports, unit: minute, requests_per_unit: 3}
"#;

fn named(rpu: u32, name: &str) -> Option<(u32, String, String)> {
    Some((rpu, "MINUTE".into(), name.into()))
}

on_every_store!(regex_entries_over_grpc);
async fn regex_entries_over_grpc(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    s.set_time(T0);
    let call = |path: &'static str| {
        let s = &s;
        async move {
            st(
                &s.rl("api", &[&[("client_key", "c"), ("endpoint", path)]])
                    .await,
                0,
            )
        }
    };
    // Each order path has its own counter.
    let orders = |code, remaining| (code, named(2, "orders"), remaining);
    assert_eq!(call("/api/v1/users/1/orders").await, orders(Code::Ok, 1));
    assert_eq!(call("/api/v1/users/1/orders").await, orders(Code::Ok, 0));
    assert_eq!(
        call("/api/v1/users/1/orders").await,
        orders(Code::OverLimit, 0)
    );
    assert_eq!(call("/api/v1/users/2/orders").await, orders(Code::Ok, 1));
    // Every report path shares one.
    let reports = |code, remaining| (code, named(3, "reports"), remaining);
    assert_eq!(call("/api/v1/reports/a").await, reports(Code::Ok, 2));
    assert_eq!(call("/api/v1/reports/b").await, reports(Code::Ok, 1));
    assert_eq!(call("/api/v1/reports/c/d").await, reports(Code::Ok, 0));
    assert_eq!(call("/api/v1/reports/e").await, reports(Code::OverLimit, 0));
    // What no pattern matches (anchored: a longer order path) falls to the wildcard.
    let v1 = (Code::Ok, named(5, "v1"), 4);
    assert_eq!(call("/api/v1/users/1/orders/9").await, v1);
    // Another client has counters of its own, the shared one included.
    let r = s.rl(
        "api",
        &[&[("client_key", "d"), ("endpoint", "/api/v1/reports/a")]],
    );
    assert_eq!(st(&r.await, 0), reports(Code::Ok, 2));
}

on_every_store!(regex_entries_over_check);
async fn regex_entries_over_check(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    s.set_time(T0);
    let call = |endpoint: &'static str| {
        let s = &s;
        async move {
            let c = s
                .check(&json!({"client_key": "c", "endpoint": endpoint}))
                .await;
            (
                c.status,
                c.body["limit"].clone(),
                c.body["remaining"].clone(),
            )
        }
    };
    assert_eq!(
        call("/api/v1/users/7/orders").await,
        (200, json!(2), json!(1))
    );
    assert_eq!(
        call("/api/v1/users/8/orders").await,
        (200, json!(2), json!(1))
    );
    assert_eq!(
        call("/api/v1/users/7/orders").await,
        (200, json!(2), json!(0))
    );
    assert_eq!(call("/api/v1/users/7/orders").await.0, 429);
    for remaining in [2, 1, 0] {
        let path = [
            "/api/v1/reports/x",
            "/api/v1/reports/y",
            "/api/v1/reports/z",
        ][2 - remaining];
        assert_eq!(call(path).await, (200, json!(3), json!(remaining)));
    }
    assert_eq!(call("/api/v1/reports/x").await.0, 429);
}

/// Go's per-limit statistics of a regex limit are exact and named by its config path
/// (`endpoint=~pattern`), summed over the values it matched, as a wildcard's are.
#[tokio::test]
async fn regex_limits_keep_go_statistics_exact() {
    let cfg = "domain: api
descriptors:
  - key: user
    value_regex: 'u-[0-9]+'
    rate_limit: {unit: minute, requests_per_unit: 3}
";
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("api.yaml", cfg)], &env).await;
    s.set_time(T0);
    for value in ["u-1", "u-2"] {
        for _ in 0..3 {
            assert_eq!(
                s.rl("api", &[&[("user", value)]]).await.overall_code,
                Code::Ok as i32
            );
        }
    }
    let over = s.rl("api", &[&[("user", "u-1")]]).await;
    assert_eq!(over.overall_code, Code::OverLimit as i32);
    let m = s.scrape().await;
    let v = |stat: &str| {
        m.count(&format!(
            "ratelimit_service_rate_limit_{stat}{{domain=\"api\",key1=\"user=~u-[0-9]+\",key2=\"\"}}"
        ))
    };
    assert_eq!(v("total_hits"), Some(7), "{m}");
    assert_eq!(v("within_limit"), Some(6));
    // The third hit of each value is past 80 % of 3.
    assert_eq!(v("near_limit"), Some(2));
    assert_eq!(v("over_limit"), Some(1));
}

/// `ratelimitd validate` refuses a bad pattern as the server's load does: file, YAML path, the
/// regex error with its position in the pattern as written, exit code 1.
#[test]
fn validate_reports_a_bad_pattern_with_its_position() {
    let bad = "domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - key: path\n        value_regex: '/users/([0-9]+'\n        rate_limit: {unit: second, requests_per_unit: 1}\n";
    let err = crate::support::process::validate_refuses(bad);
    assert!(
        err.contains("bad.yaml: descriptors[0].descriptors[0].value_regex: invalid value_regex '/users/([0-9]+': unclosed group at character 8"),
        "{err}"
    );
}

/// Unknown tenants get 2 a minute each; a request may ask for its own limit up to 3 a minute.
const RULES: &str = r#"
domain: gw
default_limit: {unit: minute, requests_per_unit: 2}
max_request_limit: {unit: minute, requests_per_unit: 3}
descriptors:
  - key: tenant
    value: vip
    rate_limit: {unit: minute, requests_per_unit: 10}
"#;

/// A domain without `default_limit`: what matches nothing is let through, as in Go.
const OPEN: &str = "domain: open\ndescriptors:\n  - {key: tenant, value: vip, rate_limit: {unit: minute, requests_per_unit: 1}}\n";

fn minute(rpu: u32) -> Option<(u32, String, String)> {
    Some((rpu, "MINUTE".into(), String::new()))
}

on_every_store!(default_limit_over_grpc);
async fn default_limit_over_grpc(store: StoreKind) {
    let files = [("gw.yaml", RULES), ("open.yaml", OPEN)];
    let s = TestServer::start_with_store(&files, &[], store).await;
    s.set_time(T0);
    let tenant = |domain: &'static str, t: &'static str| {
        let s = &s;
        async move { st(&s.rl(domain, &[&[("tenant", t)]]).await, 0) }
    };
    assert_eq!(tenant("gw", "acme").await, (Code::Ok, minute(2), 1));
    assert_eq!(tenant("gw", "acme").await, (Code::Ok, minute(2), 0));
    assert_eq!(tenant("gw", "acme").await, (Code::OverLimit, minute(2), 0));
    // Each unmatched descriptor has its own counter; a rule still wins.
    assert_eq!(tenant("gw", "globex").await, (Code::Ok, minute(2), 1));
    let vip = Some((10, "MINUTE".into(), String::new()));
    assert_eq!(tenant("gw", "vip").await, (Code::Ok, vip, 9));
    // Without default_limit, nothing limits what matched nothing.
    for _ in 0..3 {
        assert_eq!(tenant("open", "acme").await, (Code::Ok, None, 0));
    }
}

on_every_store!(default_limit_over_check);
async fn default_limit_over_check(store: StoreKind) {
    let s = TestServer::start_with_store(&[("gw.yaml", RULES)], &[], store).await;
    s.set_time(T0);
    let call = |client: &'static str| {
        let s = &s;
        async move {
            let c = s
                .check(&json!({"domain": "gw", "client_key": client}))
                .await;
            (
                c.status,
                c.body["limit"].clone(),
                c.body["remaining"].clone(),
            )
        }
    };
    assert_eq!(call("acme").await, (200, json!(2), json!(1)));
    assert_eq!(call("acme").await, (200, json!(2), json!(0)));
    assert_eq!(call("acme").await.0, 429);
    assert_eq!(call("globex").await, (200, json!(2), json!(1)));
}

on_every_store!(request_limit_is_capped);
async fn request_limit_is_capped(store: StoreKind) {
    use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
    let s = TestServer::start_with_store(&[("gw.yaml", RULES)], &[], store).await;
    s.set_time(T0);
    // 1000 a second asked (unit 1 = SECOND): counted at the cap, 3 a minute.
    let mut req = request("gw", &[&[("tenant", "acme")]]);
    req.descriptors[0].limit = Some(RateLimitOverride {
        requests_per_unit: 1000,
        unit: 1,
    });
    for remaining in [2, 1, 0] {
        let r = s.call(req.clone()).await.unwrap();
        assert_eq!(st(&r, 0), (Code::Ok, minute(3), remaining));
    }
    let r = s.call(req.clone()).await.unwrap();
    assert_eq!(st(&r, 0), (Code::OverLimit, minute(3), 0));
    // Under the cap the request's own limit applies (here 1 a minute, another tenant).
    let mut own = request("gw", &[&[("tenant", "initech")]]);
    own.descriptors[0].limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: 2,
    });
    assert_eq!(st(&s.call(own).await.unwrap(), 0), (Code::Ok, minute(1), 0));
    // The same cap over `POST /check`'s descriptors.
    let body = json!({"domain": "gw", "client_key": "k", "descriptors": [
        {"entries": [{"key": "tenant", "value": "hooli"}], "limit": {"requestsPerUnit": 500, "unit": "HOUR"}}
    ]});
    let c = s.check(&body).await;
    assert_eq!(
        (c.status, &c.body["limit"]),
        (200, &json!(2)),
        "the client's default is tighter"
    );
    let c = s.check(&json!({"domain": "gw", "client_key": "k2", "details": true, "descriptors": [
        {"entries": [{"key": "tenant", "value": "hooli"}], "limit": {"requestsPerUnit": 500, "unit": "HOUR"}}
    ]}))
    .await;
    let limits = c.body["limits"].as_array().cloned().unwrap_or_default();
    assert!(
        limits
            .iter()
            .any(|l| l["limit"] == json!(3) && l["window"] == json!(60)),
        "500 an hour is over 3 a minute: {}",
        c.body
    );
}

/// The per-domain counters, Go's statistics of the default limit and `/rlconfig`.
#[tokio::test]
async fn unmatched_and_capped_are_counted_and_listed() {
    use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("gw.yaml", RULES), ("open.yaml", OPEN)], &env).await;
    s.set_time(T0);
    for _ in 0..3 {
        s.rl("gw", &[&[("tenant", "acme")], &[("tenant", "vip")]])
            .await;
    }
    s.rl("open", &[&[("tenant", "acme")]]).await;
    let mut req = request("gw", &[&[("tenant", "capped")]]);
    req.descriptors[0].limit = Some(RateLimitOverride {
        requests_per_unit: 100,
        unit: 2,
    });
    s.call(req).await.unwrap();
    let m = s.scrape().await;
    let unmatched = |d: &str| {
        m.count(&format!(
            "ratelimitd_unmatched_descriptors_total{{domain=\"{d}\"}}"
        ))
    };
    assert_eq!(unmatched("gw"), Some(3), "{m}");
    assert_eq!(unmatched("open"), Some(1));
    assert_eq!(
        m.count("ratelimitd_request_limit_capped_total{domain=\"gw\"}"),
        Some(1),
        "an override is not 'unmatched'"
    );
    let go = |stat: &str| {
        m.count(&format!(
            "ratelimit_service_rate_limit_{stat}{{domain=\"gw\",key1=\"default_limit\",key2=\"\"}}"
        ))
    };
    assert_eq!(go("total_hits"), Some(3));
    assert_eq!(go("within_limit"), Some(2));
    assert_eq!(
        go("near_limit"),
        Some(1),
        "the second hit is past 80 % of 2"
    );
    assert_eq!(go("over_limit"), Some(1));
    let listing = s.get_text(&s.debug_url("/rlconfig"), None).await;
    assert!(
        listing.contains("gw.default_limit: unit=MINUTE requests_per_unit=2"),
        "{listing}"
    );
    assert!(
        listing.contains("# max_request_limit: gw: unit=MINUTE requests_per_unit=3"),
        "{listing}"
    );
}
