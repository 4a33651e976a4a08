//! Stats through the real service: gRPC traffic on 127.0.0.1, then a scrape of the Prometheus
//! endpoint, with exact counter values for the scenarios of `docs/design/contract.md#scenarios`
//! that name stats.

use crate::support::*;
use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;

const PROM: &[(&str, &str)] = &[
    ("USE_PROMETHEUS", "true"),
    ("PROMETHEUS_ADDR", "127.0.0.1:0"),
];

async fn start(files: &[(&str, &str)], extra: &[(&str, &str)]) -> TestServer {
    let env: Vec<(&str, &str)> = PROM.iter().chain(extra).copied().collect();
    TestServer::start(files, &env).await
}

fn limit(stat: &str, domain: &str, key1: &str, key2: &str) -> String {
    format!(
        "ratelimit_service_rate_limit_{stat}{{domain=\"{domain}\",key1=\"{key1}\",key2=\"{key2}\"}}"
    )
}

#[tokio::test]
async fn s25_limit_20_after_25_calls() {
    let s = start(&[("another.yaml", CFG_INT_ANOTHER)], &[]).await;
    for _ in 0..25 {
        s.rl("another", &[&[("key2", "R")]]).await;
    }
    let m = s.scrape().await;
    let v = |stat| m.count(&limit(stat, "another", "key2", ""));
    assert_eq!(v("total_hits"), Some(25), "{m}");
    assert_eq!(v("over_limit"), Some(5));
    assert_eq!(v("near_limit"), Some(4));
    assert_eq!(v("within_limit"), Some(20));
    assert_eq!(v("shadow_mode"), None, "zero series are not invented");
    let decisions =
        |code| format!("ratelimitd_decisions_total{{code=\"{code}\",source=\"store\"}}");
    assert_eq!(m.count(&decisions("ok")), Some(20));
    assert_eq!(m.count(&decisions("over_limit")), Some(5));
    assert_eq!(m.count("ratelimit_service_config_load_success"), Some(1));
    assert_eq!(
        m.count("ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"}"),
        Some(25)
    );
    assert_eq!(
        m.count("ratelimit_service_response_time_seconds_count{grpc_method=\"ShouldRateLimit\"}"),
        Some(25)
    );
    assert_eq!(m.count("ratelimitd_store_latency_seconds_count"), Some(25));
    assert_eq!(m.count("ratelimitd_memory_store_keys"), Some(1));
    s.shutdown().await;
}

#[tokio::test]
async fn basic_config_stat_keys_and_unknown_domain() {
    let s = start(&[("basic.yaml", CFG_BASIC)], &[]).await;
    // 1: unknown domain, counted per descriptor.
    s.rl("nope", &[&[("a", "b")], &[("c", "d")]]).await;
    // 3 and 5: default children share one stat key.
    s.rl("test-domain", &[&[("key1", "value1"), ("subkey1", "x")]])
        .await;
    s.rl("test-domain", &[&[("key2", "something")]]).await;
    s.rl("test-domain", &[&[("key2", "other")]]).await;
    // 11: unlimited counts nothing.
    for _ in 0..3 {
        s.rl("test-domain", &[&[("key6", "foo")]]).await;
    }
    // detailed_metric: the runtime value is in the key.
    s.rl("test-domain", &[&[("key7", "unspecified_value")]])
        .await;
    // 13: overrides key on the values, shared across override limits.
    let mut req = request(
        "test-domain",
        &[&[("key1", "value1"), ("subkey1", "something")]],
    );
    req.descriptors[0].limit = Some(RateLimitOverride {
        requests_per_unit: 10,
        unit: 4,
    });
    s.call(req.clone()).await.unwrap();
    req.descriptors[0].limit = Some(RateLimitOverride {
        requests_per_unit: 42,
        unit: 3,
    });
    s.call(req).await.unwrap();
    let m = s.scrape().await;
    assert_eq!(
        m.count("ratelimit_service_rate_limit_domain_not_found{domain=\"nope\"}"),
        Some(2),
        "{m}"
    );
    let hits = |k1, k2| m.count(&limit("total_hits", "test-domain", k1, k2));
    assert_eq!(hits("key1_value1", "subkey1"), Some(1));
    assert_eq!(hits("key2", ""), Some(2));
    assert_eq!(hits("key6", ""), None);
    assert_eq!(hits("key7_unspecified_value", ""), Some(1));
    assert_eq!(hits("key1_value1", "subkey1_something"), Some(2));
    s.shutdown().await;
}

#[tokio::test]
async fn shadow_rules_global_shadow_and_errors() {
    let cfg = r#"
domain: d
descriptors:
  - {key: shadow, shadow_mode: true, rate_limit: {unit: minute, requests_per_unit: 3}}
  - {key: one, rate_limit: {unit: minute, requests_per_unit: 1}}
"#;
    let s = start(&[("d.yaml", cfg)], &[("SHADOW_MODE", "true")]).await;
    // 40: 5 hits on a 3/min shadow rule.
    for _ in 0..5 {
        let r = s.rl("d", &[&[("shadow", "x")]]).await;
        assert_eq!(overall(&r), Code::Ok);
    }
    // 42: global shadow turns the second hit's OVER_LIMIT into OK.
    s.rl("d", &[&[("one", "x")]]).await;
    assert_eq!(overall(&s.rl("d", &[&[("one", "x")]]).await), Code::Ok);
    // 52: a bad request is a service error.
    assert!(s.call(request("", &[&[("a", "b")]])).await.is_err());
    let m = s.scrape().await;
    assert_eq!(
        m.count(&limit("over_limit", "d", "shadow", "")),
        Some(2),
        "{m}"
    );
    assert_eq!(m.count(&limit("shadow_mode", "d", "shadow", "")), Some(2));
    assert_eq!(m.count("ratelimit_service_global_shadow_mode"), Some(1));
    assert_eq!(
        m.count("ratelimit_service_should_rate_limit_error{err_type=\"service_error\"}"),
        Some(1)
    );
    s.shutdown().await;
}

#[tokio::test]
async fn request_values_cannot_grow_stats_past_the_bound() {
    let cfg = "domain: d\ndescriptors:\n  - {key: user, detailed_metric: true, rate_limit: {unit: minute, requests_per_unit: 5}}\n";
    let s = start(&[("d.yaml", cfg)], &[("STATS_MAX_KEYS", "3")]).await;
    for i in 0..10 {
        let v = format!("u{i}");
        s.rl("d", &[&[("user", v.as_str())]]).await;
    }
    let m = s.scrape().await;
    assert_eq!(
        m.count(&limit("total_hits", "d", "user_u0", "")),
        Some(1),
        "{m}"
    );
    assert_eq!(m.count(&limit("total_hits", "d", "user_u3", "")), None);
    assert_eq!(
        m.count(&limit("total_hits", "ratelimitd_overflow", "", "")),
        Some(7)
    );
    assert_eq!(m.count("ratelimitd_stats_keys_folded_total"), Some(7));
    s.shutdown().await;
}

#[tokio::test]
async fn s15_s19_wildcards_share_their_pattern_key() {
    let s = start(&[("wild.yaml", CFG_WILD)], &[]).await;
    s.rl("test-domain", &[&[("wild", "foo1")]]).await;
    s.rl("test-domain", &[&[("wild", "foo2")]]).await;
    s.rl(
        "test-domain",
        &[&[("nestedWild", "val1"), ("wild", "goo2")]],
    )
    .await;
    let m = s.scrape().await;
    let hits = |k1, k2| m.count(&limit("total_hits", "test-domain", k1, k2));
    assert_eq!(hits("wild_foo*", ""), Some(2), "{m}");
    assert_eq!(hits("nestedWild_val1", "wild_goo*"), Some(1));
    s.shutdown().await;
}

#[tokio::test]
async fn a_full_store_is_counted_as_store_full_and_still_counts_total_hits() {
    // A memory store bounded to one key refuses the second key: the store fails that call, and
    // the failure is counted under its own name (`store_full`), not as a Redis error.
    let s = start(
        &[("another.yaml", CFG_INT_ANOTHER)],
        &[("MEMORY_MAX_KEYS", "1")],
    )
    .await;
    s.rl("another", &[&[("key2", "a")]]).await;
    assert!(
        s.call(request("another", &[&[("key2", "b")]]))
            .await
            .is_err()
    );
    let m = s.scrape().await;
    assert_eq!(
        m.count("ratelimit_service_should_rate_limit_error{err_type=\"store_full\"}"),
        Some(1),
        "{m}"
    );
    assert_eq!(
        m.count("ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"}"),
        Some(0),
        "{m}"
    );
    assert_eq!(
        m.count(&limit("total_hits", "another", "key2", "")),
        Some(2)
    );
    assert_eq!(
        m.count(&limit("within_limit", "another", "key2", "")),
        Some(1)
    );
    assert_eq!(m.count("ratelimitd_store_errors_total"), Some(1));
    s.shutdown().await;
}

/// `POST /check` has its own request counter (by HTTP status) and response time histogram; its
/// decisions count in `ratelimitd_decisions_total` like any other, and not as gRPC requests.
#[tokio::test]
async fn check_requests_are_counted_by_status_with_their_response_time() {
    let config = include_str!("../../../examples/check/api.yaml");
    let s = start(&[("api.yaml", config)], &[]).await;
    // The search limit is 10 a minute: 10 answers 200, then 2 answers 429.
    let search = r#"{"client_key": "u1", "endpoint": "/api/v1/search"}"#;
    for i in 0..12 {
        let want = if i < 10 { 200 } else { 429 };
        assert_eq!(s.post("/check", search).await.status(), want);
    }
    // Bad input is answered before any decision, and counted too.
    assert_eq!(s.post("/check", "{not json").await.status(), 400);
    let m = s.scrape().await;
    let code = |c: &str| m.count(&format!("ratelimitd_check_requests_total{{code=\"{c}\"}}"));
    assert_eq!(code("200"), Some(10), "{m}");
    assert_eq!(code("429"), Some(2));
    assert_eq!(code("400"), Some(1));
    assert_eq!(code("503"), None, "zero series are not invented");
    let seconds = "ratelimitd_check_response_time_seconds";
    assert_eq!(m.count(&format!("{seconds}_count")), Some(13));
    assert_eq!(
        m.count(&format!("{seconds}_bucket{{le=\"+Inf\"}}")),
        Some(13)
    );
    let decisions =
        |code| format!("ratelimitd_decisions_total{{code=\"{code}\",source=\"store\"}}");
    assert_eq!(m.count(&decisions("ok")), Some(10));
    assert_eq!(m.count(&decisions("over_limit")), Some(2));
    let grpc = "ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"}";
    assert_eq!(m.count(grpc), None, "/check is not a gRPC call");
    s.shutdown().await;
}
