//! SPEC §G acceptance scenarios over real gRPC on 127.0.0.1, embedded store, manual clock.

mod common;

use std::time::Duration;

use common::*;
use ratelimitd::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;

#[tokio::test]
async fn s01_unknown_domain_is_ok_without_limit() {
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &[]).await;
    let r = s.rl("nope", &[&[("a", "b")]]).await;
    assert_eq!(overall(&r), Code::Ok);
    assert_eq!(st(&r, 0), (Code::Ok, None, 0));
    assert_eq!(dur(&r, 0), None);
}

#[tokio::test]
async fn s02_to_s09_matching_through_the_service() {
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &[]).await;
    // 2: node without a limit.
    assert_eq!(
        st(&s.rl("test-domain", &[&[("key1", "value1")]]).await, 0),
        (Code::Ok, None, 0)
    );
    // 3: default child of an exact parent.
    let r = s
        .rl(
            "test-domain",
            &[&[("key1", "value1"), ("subkey1", "something")]],
        )
        .await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(5, "SECOND"), 4));
    // 4: exact child.
    let r = s
        .rl(
            "test-domain",
            &[&[("key1", "value1"), ("subkey1", "subvalue1")]],
        )
        .await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(10, "SECOND"), 9));
    // 5: separate counters per value under one default.
    let r = s.rl("test-domain", &[&[("key2", "something")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(20, "MINUTE"), 19));
    let r = s.rl("test-domain", &[&[("key2", "other")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(20, "MINUTE"), 19));
    // 6: exact beats default.
    let r = s.rl("test-domain", &[&[("key2", "value2")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(30, "MINUTE"), 29));
    // 7: an exact node without limit whitelists.
    assert_eq!(
        st(&s.rl("test-domain", &[&[("key2", "value3")]]).await, 0),
        (Code::Ok, None, 0)
    );
    // 8: request deeper than the config.
    let r = s
        .rl(
            "test-domain",
            &[&[("key2", "value2"), ("subkey", "subvalue")]],
        )
        .await;
    assert_eq!(st(&r, 0), (Code::Ok, None, 0));
    // 9: no backtracking to the parent's limit.
    let r = s
        .rl(
            "test-domain",
            &[&[("key5", "value5"), ("subkey5", "subvalue")]],
        )
        .await;
    assert_eq!(st(&r, 0), (Code::Ok, None, 0));
}

#[tokio::test]
async fn s10_named_limit_goes_over_and_reports_its_name() {
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &[]).await;
    let named = Some((1, "DAY".to_string(), "key4_rate_limit".to_string()));
    let r = s.rl("test-domain", &[&[("key4", "foo")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, named.clone(), 0));
    assert_eq!(overall(&r), Code::Ok);
    let r = s.rl("test-domain", &[&[("key4", "foo")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, named, 0));
    assert_eq!(overall(&r), Code::OverLimit);
}

#[tokio::test]
async fn s11_unlimited_is_always_ok_with_max_remaining() {
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &[]).await;
    for _ in 0..100 {
        let r = s.rl("test-domain", &[&[("key6", "foo")]]).await;
        assert_eq!(st(&r, 0), (Code::Ok, None, u32::MAX));
        assert_eq!(dur(&r, 0), None);
    }
}

fn with_override(
    entries: &[(&str, &str)],
    rpu: u32,
    unit: i32,
) -> ratelimitd::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor {
    let mut d = descriptor(entries);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: rpu,
        unit,
    });
    d
}

#[tokio::test]
async fn s13_s14_overrides_replace_config_but_not_unknown_domains() {
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &[]).await;
    let mut req = request("test-domain", &[]);
    req.descriptors = vec![with_override(
        &[("key1", "value1"), ("subkey1", "something")],
        10,
        4,
    )];
    let r = s.call(req.clone()).await.unwrap();
    assert_eq!(st(&r, 0), (Code::Ok, lim(10, "DAY"), 9));
    req.domain = "foo_domain".into();
    assert_eq!(st(&s.call(req).await.unwrap(), 0), (Code::Ok, None, 0));
}

#[tokio::test]
async fn override_with_unknown_unit_is_an_invalid_argument_not_a_crash() {
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &[]).await;
    let mut req = request("test-domain", &[]);
    req.descriptors = vec![with_override(&[("key1", "value1")], 10, 0)];
    let e = s.call(req).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("invalid unit"), "{}", e.message());
    // The service is still up.
    assert_eq!(
        st(&s.rl("test-domain", &[&[("key3", "x")]]).await, 0).0,
        Code::Ok
    );
}

#[tokio::test]
async fn s15_s16_s19_wildcards() {
    let s = TestServer::start(&[("wild.yaml", CFG_WILD)], &[]).await;
    for v in ["foo1", "foo2"] {
        let r = s.rl("test-domain", &[&[("wild", v)]]).await;
        assert_eq!(
            st(&r, 0),
            (Code::Ok, lim(20, "MINUTE"), 19),
            "separate counter for {v}"
        );
    }
    assert_eq!(
        st(&s.rl("test-domain", &[&[("wild", "bar")]]).await, 0),
        (Code::Ok, None, 0)
    );
    assert_eq!(
        st(&s.rl("test-domain", &[&[("noWild", "foo1")]]).await, 0),
        (Code::Ok, None, 0)
    );
    let r = s
        .rl(
            "test-domain",
            &[&[("nestedWild", "val1"), ("wild", "goo2")]],
        )
        .await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(20, "MINUTE"), 19));
    let r = s
        .rl("test-domain", &[&[("multiWild", "foo-x-bar-y-baz")]])
        .await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(10, "MINUTE"), 9));
    let r = s.rl("test-domain", &[&[("midWild", "barxyzb")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(20, "MINUTE"), 19));
}

const SHARE: &str = r#"
domain: share
descriptors:
  - {key: files, value: "files/*", share_threshold: true, rate_limit: {unit: hour, requests_per_unit: 10}}
  - {key: files_no_share, value: "files_no_share/*", rate_limit: {unit: hour, requests_per_unit: 10}}
"#;

#[tokio::test]
async fn s20_s21_share_threshold_shares_one_counter() {
    let s = TestServer::start(&[("share.yaml", SHARE)], &[]).await;
    for _ in 0..10 {
        s.rl("share", &[&[("files", "files/a.pdf")]]).await;
    }
    let r = s.rl("share", &[&[("files", "files/b.csv")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, lim(10, "HOUR"), 0));
    for i in 0..10 {
        let v = format!("files_no_share/{i}");
        let r = s.rl("share", &[&[("files_no_share", &v)]]).await;
        assert_eq!(st(&r, 0), (Code::Ok, lim(10, "HOUR"), 9));
    }
}

#[tokio::test]
async fn s24_s30_s31_durations_follow_the_clock() {
    let s = TestServer::start(
        &[
            ("basic.yaml", CFG_INT_BASIC),
            ("another.yaml", CFG_INT_ANOTHER),
        ],
        &[],
    )
    .await;
    let r = s.rl("basic", &[&[("key1", "foo")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(50, "SECOND"), 49));
    assert_eq!(dur(&r, 0), Some(1));
    let r = s.rl("basic", &[&[("one_per_minute", "foo")]]).await;
    assert_eq!(dur(&r, 0), Some(26));
    s.set_time(1_000_000);
    let r = s.rl("another", &[&[("key3", "a")], &[("key4", "a")]]).await;
    assert_eq!((dur(&r, 0), dur(&r, 1)), (Some(800), Some(36_800)));
}

#[tokio::test]
async fn s25_counts_to_the_limit_then_over_and_a_new_window_resets() {
    let s = TestServer::start(&[("another.yaml", CFG_INT_ANOTHER)], &[]).await;
    s.set_time(1200);
    for i in 1..=25u32 {
        let r = s.rl("another", &[&[("key2", "R")]]).await;
        if i <= 20 {
            assert_eq!(st(&r, 0), (Code::Ok, lim(20, "MINUTE"), 20 - i), "call {i}");
            assert_eq!(overall(&r), Code::Ok);
        } else {
            assert_eq!(
                st(&r, 0),
                (Code::OverLimit, lim(20, "MINUTE"), 0),
                "call {i}"
            );
            assert_eq!(overall(&r), Code::OverLimit);
        }
    }
    s.advance(Duration::from_secs(59));
    assert_eq!(
        st(&s.rl("another", &[&[("key2", "R")]]).await, 0).0,
        Code::OverLimit
    );
    s.advance(Duration::from_secs(1));
    let r = s.rl("another", &[&[("key2", "R")]]).await;
    assert_eq!(
        st(&r, 0),
        (Code::Ok, lim(20, "MINUTE"), 19),
        "the next minute starts fresh"
    );
}

#[tokio::test]
async fn s26_two_descriptors_one_over_makes_the_request_over() {
    let s = TestServer::start(&[("another.yaml", CFG_INT_ANOTHER)], &[]).await;
    for i in 1..=15u32 {
        let r = s
            .rl("another", &[&[("key2", "R2")], &[("key3", "R2")]])
            .await;
        assert_eq!(st(&r, 0), (Code::Ok, lim(20, "MINUTE"), 20 - i));
        if i <= 10 {
            assert_eq!(overall(&r), Code::Ok);
            assert_eq!(st(&r, 1), (Code::Ok, lim(10, "HOUR"), 10 - i));
        } else {
            assert_eq!(overall(&r), Code::OverLimit);
            assert_eq!(st(&r, 1), (Code::OverLimit, lim(10, "HOUR"), 0));
        }
    }
}

#[tokio::test]
async fn s32_to_s34_hits_addend() {
    let cfg = "domain: h\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 20}}\n  - {key: m, rate_limit: {unit: minute, requests_per_unit: 10}}\n";
    let s = TestServer::start(&[("h.yaml", cfg)], &[]).await;
    let mut req = request("h", &[&[("k", "a")]]);
    req.hits_addend = 3;
    assert_eq!(
        st(&s.call(req).await.unwrap(), 0),
        (Code::Ok, lim(20, "SECOND"), 17)
    );
    let mut req = request("h", &[&[("k", "b")]]);
    req.hits_addend = 0;
    assert_eq!(
        st(&s.call(req).await.unwrap(), 0).2,
        19,
        "hits_addend 0 counts as 1"
    );
    // Per-descriptor hits_addend 0 checks without consuming.
    let mut req = request("h", &[&[("m", "x")]]);
    req.hits_addend = 10;
    s.call(req).await.unwrap();
    let mut check = request("h", &[&[("m", "x")]]);
    check.descriptors[0].hits_addend = Some(0);
    for _ in 0..3 {
        let r = s.call(check.clone()).await.unwrap();
        assert_eq!(
            st(&r, 0),
            (Code::Ok, lim(10, "MINUTE"), 0),
            "a check does not consume"
        );
    }
    s.rl("h", &[&[("m", "x")]]).await;
    assert_eq!(st(&s.call(check).await.unwrap(), 0).0, Code::OverLimit);
}

#[tokio::test]
async fn s39_zero_requests_per_unit_blocks() {
    let cfg =
        "domain: z\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 0}}\n";
    let s = TestServer::start(&[("z.yaml", cfg)], &[]).await;
    assert_eq!(
        st(&s.rl("z", &[&[("k", "v")]]).await, 0),
        (Code::OverLimit, lim(0, "SECOND"), 0)
    );
}

#[tokio::test]
async fn s40_shadow_rule_reports_ok() {
    let cfg = "domain: sh\ndescriptors:\n  - {key: k, shadow_mode: true, rate_limit: {unit: minute, requests_per_unit: 3}}\n";
    let s = TestServer::start(&[("sh.yaml", cfg)], &[]).await;
    let mut remaining = Vec::new();
    for _ in 0..5 {
        let r = s.rl("sh", &[&[("k", "v")]]).await;
        assert_eq!(overall(&r), Code::Ok);
        assert_eq!(st(&r, 0).0, Code::Ok);
        remaining.push(st(&r, 0).2);
    }
    assert_eq!(remaining, vec![2, 1, 0, 0, 0]);
}

#[tokio::test]
async fn s42_global_shadow_mode_keeps_statuses() {
    let cfg =
        "domain: g\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 1}}\n";
    let s = TestServer::start(&[("g.yaml", cfg)], &[("SHADOW_MODE", "true")]).await;
    s.rl("g", &[&[("k", "v")]]).await;
    let r = s.rl("g", &[&[("k", "v")]]).await;
    assert_eq!(overall(&r), Code::Ok);
    assert_eq!(st(&r, 0), (Code::OverLimit, lim(1, "MINUTE"), 0));
}

const EXAMPLE7: &str = r#"
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 5, name: specific_limit}
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        rate_limit:
          unit: second
          requests_per_unit: 10
          replaces: [{name: specific_limit}]
"#;

#[tokio::test]
async fn s43_s44_replaces_only_within_one_request() {
    let s = TestServer::start(&[("e7.yaml", EXAMPLE7)], &[]).await;
    let r = s
        .rl(
            "example7",
            &[
                &[("key_1", "value_1"), ("user", "bkthomps")],
                &[("key_2", "value_2"), ("user", "bkthomps")],
            ],
        )
        .await;
    assert_eq!(st(&r, 0), (Code::Ok, None, 0));
    assert_eq!(st(&r, 1), (Code::Ok, lim(10, "SECOND"), 9));
    for i in 1..=6 {
        let r = s
            .rl("example7", &[&[("key_1", "value_1"), ("user", "bkthomps")]])
            .await;
        let expected = if i <= 5 { Code::Ok } else { Code::OverLimit };
        assert_eq!(
            st(&r, 0).0,
            expected,
            "call {i}: the replaced limit was untouched before"
        );
    }
}

#[tokio::test]
async fn quota_mode_fails_only_when_all_quota_descriptors_fail() {
    let cfg = r#"
domain: q
descriptors:
  - {key: a, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: b, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 2}}
"#;
    let s = TestServer::start(&[("q.yaml", cfg)], &[]).await;
    let d: &[&[(&str, &str)]] = &[&[("a", "x")], &[("b", "x")]];
    assert_eq!(overall(&s.rl("q", d).await), Code::Ok);
    let r = s.rl("q", d).await;
    assert_eq!(st(&r, 0).0, Code::OverLimit);
    assert_eq!(overall(&r), Code::Ok, "b still has quota");
    let r = s.rl("q", d).await;
    assert_eq!(
        overall(&r),
        Code::OverLimit,
        "every quota descriptor is over"
    );
}

#[tokio::test]
async fn s51_and_response_headers_pick_the_most_constrained_limit() {
    let s = TestServer::start(
        &[
            ("basic.yaml", CFG_INT_BASIC),
            ("another.yaml", CFG_INT_ANOTHER),
        ],
        &[("LIMIT_RESPONSE_HEADERS_ENABLED", "true")],
    )
    .await;
    let r = s.rl("another", &[&[("nolimit", "x")]]).await;
    assert!(r.response_headers_to_add.is_empty());
    let r = s.rl("another", &[&[("key2", "a")], &[("key3", "a")]]).await;
    let h: Vec<(String, String)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    let want = |k: &str, v: &str| (k.to_string(), v.to_string());
    // key3 (10/hour, 9 left) is tighter than key2 (20/minute, 19 left); now=1234 → 3600-1234%3600.
    assert_eq!(
        h,
        vec![
            want("RateLimit-Limit", "10"),
            want("RateLimit-Remaining", "9"),
            want("RateLimit-Reset", "2366")
        ]
    );
}

#[tokio::test]
async fn s52_s53_bad_requests_are_invalid_arguments_with_go_messages() {
    let s = TestServer::start(&[("basic.yaml", CFG_BASIC)], &[]).await;
    let e = s.call(request("", &[&[("a", "b")]])).await.unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            tonic::Code::InvalidArgument,
            "rate limit domain must not be empty"
        )
    );
    let e = s.call(request("test-domain", &[])).await.unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            tonic::Code::InvalidArgument,
            "rate limit descriptor list must not be empty"
        )
    );
}

#[tokio::test]
async fn s54_invalid_config_at_startup_serves_errors_without_crashing() {
    let s = TestServer::start(&[("bad.yaml", "domain: \"\"\n")], &[]).await;
    let e = s.call(request("x", &[&[("a", "b")]])).await.unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            tonic::Code::FailedPrecondition,
            "no rate limit configuration loaded"
        )
    );
    assert_eq!(s.running().config.load_failures(), 1);
}

#[tokio::test]
async fn dynamic_metadata_carries_request_and_passed_metadata() {
    let cfg = r#"
domain: md
descriptors:
  - {key: a, metadata: {team: x, nested: {one: 1}}, rate_limit: {unit: minute, requests_per_unit: 5}}
  - {key: b, metadata: {team: y, nested: {two: 2}}, rate_limit: {unit: minute, requests_per_unit: 5}}
"#;
    let s = TestServer::start(
        &[("md.yaml", cfg)],
        &[("RESPONSE_DYNAMIC_METADATA", "true")],
    )
    .await;
    let mut req = request("md", &[&[("a", "1")], &[("b", "2")]]);
    req.hits_addend = 2;
    let r = s.call(req).await.unwrap();
    let md = r.dynamic_metadata.expect("metadata present");
    let json = format!("{md:?}");
    assert!(json.contains("\"md\""), "{json}");
    assert!(json.contains("a=1") && json.contains("b=2"), "{json}");
    let merged = &md.fields["metadata"];
    let text = format!("{merged:?}");
    assert!(
        text.contains("\"x\"") && !text.contains("\"y\""),
        "first value wins: {text}"
    );
    assert!(
        text.contains("\"one\"") && text.contains("\"two\""),
        "nested maps merge: {text}"
    );
}
