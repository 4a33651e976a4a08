//! Stats key rules of `docs/design/contract.md#stats-keys`, on the Go reference's own examples.

use std::borrow::Cow;

use super::{for_match, sanitize};
use crate::config::RateLimitConfig;
use crate::limiter::request::Entry;
use crate::test_support::config;

const BASIC: &str = include_str!("../../../../../tests/fixtures/config/cfg-basic.yaml");
const WILD: &str = include_str!("../../../../../tests/fixtures/config/cfg-wild.yaml");

/// Stats-key flavours from the Go reference's tests (detailed, `value_to_metric`, `share_threshold`).
const FLAGS: &str = r#"
domain: test-domain
descriptors:
  - key: key7
    rate_limit: {unit: minute, requests_per_unit: 70}
    detailed_metric: true
  - key: service
    value: "svc/*"
    share_threshold: true
    descriptors:
      - key: endpoint
        value: get
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: route
    value: "api/*"
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: "read*"
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 5}
  - key: empty
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: exact
    value: x
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
"#;

fn key(cfg: &RateLimitConfig, entries: &[(&str, &str)]) -> String {
    let entries: Vec<Entry> = entries.iter().map(|(k, v)| Entry::new(*k, *v)).collect();
    let m = cfg
        .domain("test-domain")
        .and_then(|d| d.get_limit(&entries))
        .expect("a limit matches");
    for_match("test-domain", m.limit, &entries, &m.path).into_owned()
}

#[test]
fn default_keys_are_the_config_path() {
    let b = config(BASIC);
    let w = config(WILD);
    assert_eq!(
        key(&b, &[("key1", "value1"), ("subkey1", "x")]),
        "test-domain.key1_value1.subkey1"
    );
    assert_eq!(key(&b, &[("key2", "something")]), "test-domain.key2");
    assert_eq!(key(&w, &[("wild", "foo1")]), "test-domain.wild_foo*");
    assert_eq!(
        key(&w, &[("nestedWild", "val1"), ("wild", "goo2")]),
        "test-domain.nestedWild_val1.wild_goo*"
    );
}

#[test]
fn detailed_metric_uses_runtime_values_and_shared_patterns() {
    let f = config(FLAGS);
    assert_eq!(
        key(&f, &[("key7", "unspecified_value")]),
        "test-domain.key7_unspecified_value"
    );
    assert_eq!(key(&f, &[("key7", "")]), "test-domain.key7_");
    assert_eq!(
        key(&f, &[("service", "svc/a"), ("endpoint", "get")]),
        "test-domain.service_svc/*.endpoint_get"
    );
}

#[test]
fn value_to_metric_follows_the_match_kind() {
    let f = config(FLAGS);
    assert_eq!(
        key(
            &f,
            &[("user", "alice"), ("action", "readfile"), ("resource", "r")]
        ),
        "test-domain.user_alice.action_readfile.resource"
    );
    assert_eq!(
        key(&f, &[("route", "api/v1"), ("method", "GET")]),
        "test-domain.route_api/*.method"
    );
    assert_eq!(key(&f, &[("empty", "")]), "test-domain.empty");
    assert_eq!(key(&f, &[("exact", "x")]), "test-domain.exact_x");
}

#[test]
fn sanitizer_matches_go() {
    assert!(matches!(sanitize(Cow::Borrowed("d.k_v")), Cow::Borrowed(_)));
    assert_eq!(sanitize("d.a:b|c".into()), "d.a_b_c");
    assert_eq!(
        sanitize("d.remote_address_10.0.0.1".into()),
        "d.remote_address_10_0_0_1"
    );
    // Leftmost-longest, as the unanchored regex: the first digit is left out of the quad.
    assert_eq!(sanitize("1234.5.6.7".into()), "1234_5_6_7");
    assert_eq!(sanitize("v1.2.3".into()), "v1.2.3");
    assert_eq!(sanitize("1.2.3.4.5".into()), "1_2_3_4.5");
}

#[test]
fn regex_levels_are_named_by_their_pattern_unless_the_value_is_asked_for() {
    let c = config(
        r#"
domain: test-domain
descriptors:
  - key: path
    value_regex: "/a/[0-9]+"
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: user
    value_regex: "u[0-9]+"
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: team
    value_regex: "t[0-9]+"
    regex_key: shared
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: org
    value_regex: "o[0-9]+"
    regex_key: shared
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: app
    value_regex: "a[0-9]+"
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
"#,
    );
    assert_eq!(key(&c, &[("path", "/a/1")]), "test-domain.path=~/a/[0-9]+");
    assert_eq!(key(&c, &[("user", "u7")]), "test-domain.user_u7");
    assert_eq!(key(&c, &[("team", "t7")]), "test-domain.team=~t[0-9]+");
    assert_eq!(key(&c, &[("org", "o7")]), "test-domain.org=~o[0-9]+");
    assert_eq!(key(&c, &[("app", "a7")]), "test-domain.app_a7");
}
