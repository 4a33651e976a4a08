//! The acceptance scenarios of `docs/design/contract.md#scenarios` over real gRPC on 127.0.0.1 with
//! the manual clock, each on every store (memory, Redis, Redis Cluster: `support/stores.rs`): which
//! limit a request matches (domains, nested keys, wildcards, shared counters, overrides), bad
//! requests and configs, and response metadata. Counting and modes are in `counting.rs`.

use crate::support::*;
use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;

on_every_store!(s01_unknown_domain_is_ok_without_limit);
async fn s01_unknown_domain_is_ok_without_limit(store: StoreKind) {
    let s = TestServer::start_with_store(&[("basic.yaml", CFG_BASIC)], &[], store).await;
    let r = s.rl("nope", &[&[("a", "b")]]).await;
    assert_eq!(overall(&r), Code::Ok);
    assert_eq!(st(&r, 0), (Code::Ok, None, 0));
    assert_eq!(dur(&r, 0), None);
}

on_every_store!(s02_to_s09_matching_through_the_service);
async fn s02_to_s09_matching_through_the_service(store: StoreKind) {
    let s = TestServer::start_with_store(&[("basic.yaml", CFG_BASIC)], &[], store).await;
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

on_every_store!(s10_named_limit_goes_over_and_reports_its_name);
async fn s10_named_limit_goes_over_and_reports_its_name(store: StoreKind) {
    let s = TestServer::start_with_store(&[("basic.yaml", CFG_BASIC)], &[], store).await;
    let named = Some((1, "DAY".to_string(), "key4_rate_limit".to_string()));
    let r = s.rl("test-domain", &[&[("key4", "foo")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, named.clone(), 0));
    assert_eq!(overall(&r), Code::Ok);
    let r = s.rl("test-domain", &[&[("key4", "foo")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, named, 0));
    assert_eq!(overall(&r), Code::OverLimit);
}

on_every_store!(s11_unlimited_is_always_ok_with_max_remaining);
async fn s11_unlimited_is_always_ok_with_max_remaining(store: StoreKind) {
    let s = TestServer::start_with_store(&[("basic.yaml", CFG_BASIC)], &[], store).await;
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
) -> ratelimitd::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor {
    let mut d = descriptor(entries);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: rpu,
        unit,
    });
    d
}

on_every_store!(s13_s14_overrides_replace_config_but_not_unknown_domains);
async fn s13_s14_overrides_replace_config_but_not_unknown_domains(store: StoreKind) {
    let s = TestServer::start_with_store(&[("basic.yaml", CFG_BASIC)], &[], store).await;
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

on_every_store!(override_with_unknown_unit_is_an_invalid_argument_not_a_crash);
async fn override_with_unknown_unit_is_an_invalid_argument_not_a_crash(store: StoreKind) {
    let s = TestServer::start_with_store(&[("basic.yaml", CFG_BASIC)], &[], store).await;
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

on_every_store!(s15_s16_s19_wildcards);
async fn s15_s16_s19_wildcards(store: StoreKind) {
    let s = TestServer::start_with_store(&[("wild.yaml", CFG_WILD)], &[], store).await;
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

on_every_store!(s20_s21_share_threshold_shares_one_counter);
async fn s20_s21_share_threshold_shares_one_counter(store: StoreKind) {
    let s = TestServer::start_with_store(&[("share.yaml", SHARE)], &[], store).await;
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

on_every_store!(s52_s53_bad_requests_are_invalid_arguments_with_go_messages);
async fn s52_s53_bad_requests_are_invalid_arguments_with_go_messages(store: StoreKind) {
    let s = TestServer::start_with_store(&[("basic.yaml", CFG_BASIC)], &[], store).await;
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

on_every_store!(s54_invalid_config_at_startup_serves_errors_without_crashing);
async fn s54_invalid_config_at_startup_serves_errors_without_crashing(store: StoreKind) {
    let s = TestServer::start_with_store(&[("bad.yaml", "domain: \"\"\n")], &[], store).await;
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

on_every_store!(dynamic_metadata_carries_request_and_passed_metadata);
async fn dynamic_metadata_carries_request_and_passed_metadata(store: StoreKind) {
    let cfg = r#"
domain: md
descriptors:
  - {key: a, metadata: {team: x, nested: {one: 1}}, rate_limit: {unit: minute, requests_per_unit: 5}}
  - {key: b, metadata: {team: y, nested: {two: 2}}, rate_limit: {unit: minute, requests_per_unit: 5}}
"#;
    let s = TestServer::start_with_store(
        &[("md.yaml", cfg)],
        &[("RESPONSE_DYNAMIC_METADATA", "true")],
        store,
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
