//! The acceptance scenarios of `docs/design/contract.md#scenarios` over real gRPC on 127.0.0.1 with
//! the manual clock, each on every store (memory, Redis, Redis Cluster: `support/stores.rs`): how
//! hits are counted and reported (windows, several descriptors, `hits_addend`, shadow and quota
//! modes, `replaces`, response headers).

use std::time::Duration;

use crate::support::*;

on_every_store!(s24_s30_s31_durations_follow_the_clock);
async fn s24_s30_s31_durations_follow_the_clock(store: StoreKind) {
    let s = TestServer::start_with_store(
        &[
            ("basic.yaml", CFG_INT_BASIC),
            ("another.yaml", CFG_INT_ANOTHER),
        ],
        &[],
        store,
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

on_every_store!(s25_counts_to_the_limit_then_over_and_a_new_window_resets);
async fn s25_counts_to_the_limit_then_over_and_a_new_window_resets(store: StoreKind) {
    let s = TestServer::start_with_store(&[("another.yaml", CFG_INT_ANOTHER)], &[], store).await;
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

on_every_store!(s26_two_descriptors_one_over_makes_the_request_over);
async fn s26_two_descriptors_one_over_makes_the_request_over(store: StoreKind) {
    let s = TestServer::start_with_store(&[("another.yaml", CFG_INT_ANOTHER)], &[], store).await;
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

on_every_store!(s32_to_s34_hits_addend);
async fn s32_to_s34_hits_addend(store: StoreKind) {
    let cfg = "domain: h\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 20}}\n  - {key: m, rate_limit: {unit: minute, requests_per_unit: 10}}\n";
    let s = TestServer::start_with_store(&[("h.yaml", cfg)], &[], store).await;
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

on_every_store!(s39_zero_requests_per_unit_blocks);
async fn s39_zero_requests_per_unit_blocks(store: StoreKind) {
    let cfg =
        "domain: z\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 0}}\n";
    let s = TestServer::start_with_store(&[("z.yaml", cfg)], &[], store).await;
    assert_eq!(
        st(&s.rl("z", &[&[("k", "v")]]).await, 0),
        (Code::OverLimit, lim(0, "SECOND"), 0)
    );
}

on_every_store!(s40_shadow_rule_reports_ok);
async fn s40_shadow_rule_reports_ok(store: StoreKind) {
    let cfg = "domain: sh\ndescriptors:\n  - {key: k, shadow_mode: true, rate_limit: {unit: minute, requests_per_unit: 3}}\n";
    let s = TestServer::start_with_store(&[("sh.yaml", cfg)], &[], store).await;
    let mut remaining = Vec::new();
    for _ in 0..5 {
        let r = s.rl("sh", &[&[("k", "v")]]).await;
        assert_eq!(overall(&r), Code::Ok);
        assert_eq!(st(&r, 0).0, Code::Ok);
        remaining.push(st(&r, 0).2);
    }
    assert_eq!(remaining, vec![2, 1, 0, 0, 0]);
}

on_every_store!(s42_global_shadow_mode_keeps_statuses);
async fn s42_global_shadow_mode_keeps_statuses(store: StoreKind) {
    let cfg =
        "domain: g\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 1}}\n";
    let s =
        TestServer::start_with_store(&[("g.yaml", cfg)], &[("SHADOW_MODE", "true")], store).await;
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

on_every_store!(s43_s44_replaces_only_within_one_request);
async fn s43_s44_replaces_only_within_one_request(store: StoreKind) {
    let s = TestServer::start_with_store(&[("e7.yaml", EXAMPLE7)], &[], store).await;
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

on_every_store!(quota_mode_fails_only_when_all_quota_descriptors_fail);
async fn quota_mode_fails_only_when_all_quota_descriptors_fail(store: StoreKind) {
    let cfg = r#"
domain: q
descriptors:
  - {key: a, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: b, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 2}}
"#;
    let s = TestServer::start_with_store(&[("q.yaml", cfg)], &[], store).await;
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

on_every_store!(s51_and_response_headers_pick_the_most_constrained_limit);
async fn s51_and_response_headers_pick_the_most_constrained_limit(store: StoreKind) {
    let s = TestServer::start_with_store(
        &[
            ("basic.yaml", CFG_INT_BASIC),
            ("another.yaml", CFG_INT_ANOTHER),
        ],
        &[("LIMIT_RESPONSE_HEADERS_ENABLED", "true")],
        store,
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
