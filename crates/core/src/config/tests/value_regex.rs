//! `value_regex` and `regex_key`: precedence against exact values, wildcards and defaults, the
//! whole-value anchoring, and every way a pattern is refused at load, each at its YAML path.

use crate::config::*;
use crate::test_support::{E, config, errors};

/// `(full_key, how the last entry matched)` of the limit for `entries`, or `None`.
fn hit(cfg: &RateLimitConfig, entries: &[E]) -> Option<(String, MatchKind)> {
    let m = cfg.domain("api")?.get_limit(entries)?;
    let kind = m.path.last()?.kind;
    Some((m.limit.full_key.clone(), kind))
}

const PRECEDENCE: &str = r#"
domain: api
descriptors:
  - key: path
    value: "/api/v1/*"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value_regex: "/api/v1/users/[^/]+/orders"
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value_regex: "/api/v1/users/.*"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value: "/api/v1/users/me/orders"
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: agent
    value_regex: "curl/.*"
    rate_limit: {unit: second, requests_per_unit: 6}
"#;

#[test]
fn exact_then_regex_in_file_order_then_wildcard_then_default() {
    let c = config(PRECEDENCE);
    let p = |v| hit(&c, &[E("path", v)]);
    // Exact beats the regex entries written before it.
    assert_eq!(
        p("/api/v1/users/me/orders"),
        Some(("api.path_/api/v1/users/me/orders".into(), MatchKind::Exact))
    );
    // The first regex in file order that matches, even though the second matches too.
    assert_eq!(
        p("/api/v1/users/42/orders"),
        Some((
            "api.path=~/api/v1/users/[^/]+/orders".into(),
            MatchKind::Regex
        ))
    );
    assert_eq!(
        p("/api/v1/users/42/orders/7"),
        Some(("api.path=~/api/v1/users/.*".into(), MatchKind::Regex))
    );
    // A regex beats the wildcard written before it; what no regex matches falls to `*`.
    assert_eq!(
        p("/api/v1/items"),
        Some(("api.path_/api/v1/*".into(), MatchKind::Wildcard))
    );
    assert_eq!(p("/other"), Some(("api.path".into(), MatchKind::Default)));
}

#[test]
fn a_pattern_matches_the_whole_value_of_its_own_key_only() {
    let c = config(PRECEDENCE);
    // Unanchored, `curl/.*` would match inside these; anchored, it does not.
    assert_eq!(hit(&c, &[E("agent", "my curl/8.0")]), None);
    assert_eq!(
        hit(&c, &[E("agent", "curl/8.0")]),
        Some(("api.agent=~curl/.*".into(), MatchKind::Regex))
    );
    // `$` in the pattern is harmless, and a partial prefix is not a match.
    let c = config(
        "domain: api\ndescriptors:\n  - {key: id, value_regex: '[0-9]+$', rate_limit: {unit: second, requests_per_unit: 1}}\n",
    );
    assert!(hit(&c, &[E("id", "123")]).is_some());
    assert_eq!(hit(&c, &[E("id", "123a")]), None);
    assert_eq!(hit(&c, &[E("id", "a123")]), None);
    // A pattern on `path` never selects an entry of another key with the same value.
    let c = config(PRECEDENCE);
    assert_eq!(hit(&c, &[E("agent", "/api/v1/users/1/orders")]), None);
}

#[test]
fn regex_levels_nest_and_the_limit_sits_on_the_last_entry() {
    let c = config(
        r#"
domain: api
descriptors:
  - key: tenant
    value_regex: "t-[0-9]{3}"
    regex_key: shared
    descriptors:
      - key: method
        value_regex: "GET|HEAD"
        rate_limit: {unit: minute, requests_per_unit: 10}
"#,
    );
    assert_eq!(
        hit(&c, &[E("tenant", "t-123"), E("method", "HEAD")]),
        Some((
            "api.tenant=~t-[0-9]{3}.method=~GET|HEAD".into(),
            MatchKind::Regex
        ))
    );
    assert_eq!(hit(&c, &[E("tenant", "t-123")]), None);
    assert_eq!(hit(&c, &[E("tenant", "t-1234"), E("method", "GET")]), None);
    let m = c
        .domain("api")
        .and_then(|d| d.get_limit(&[E("tenant", "t-1"), E("x", "")]));
    assert!(m.is_none());
    let top = c.domain("api").and_then(|d| d.descriptors().next());
    let regex = top
        .and_then(|n| n.value_regex.as_ref())
        .expect("a regex node");
    assert!(regex.shared);
    assert_eq!(regex.pattern, "t-[0-9]{3}");
    // Listings see regex nodes in file order with the others.
    let limits: Vec<String> = c.limits().iter().map(|l| l.full_key.clone()).collect();
    assert_eq!(limits, ["api.tenant=~t-[0-9]{3}.method=~GET|HEAD"]);
}

#[test]
fn bad_patterns_are_refused_with_their_path_and_position() {
    let e = errors(
        r#"
domain: api
descriptors:
  - key: ok
    value_regex: "fine"
    descriptors:
      - key: path
        value_regex: "/users/([0-9]+"
        rate_limit: {unit: second, requests_per_unit: 1}
"#,
    );
    assert_eq!(
        e,
        [(
            "descriptors[0].descriptors[0].value_regex".to_owned(),
            "invalid value_regex '/users/([0-9]+': unclosed group at character 8".to_owned()
        )]
    );
    // A backreference (not RE2) and a pattern too big to compile are refused too.
    let e = errors(
        "domain: api\ndescriptors:\n  - {key: a, value_regex: '(a)\\1'}\n  - {key: b, value_regex: '(\\w{100}){100}'}\n",
    );
    assert_eq!(e.len(), 2, "{e:?}");
    assert_eq!(e[0].0, "descriptors[0].value_regex");
    assert_eq!(
        e[0].1,
        "invalid value_regex '(a)\\1': backreferences are not supported at character 4"
    );
    assert_eq!(e[1].0, "descriptors[1].value_regex");
    assert!(e[1].1.contains("exceeds size limit"), "{e:?}");
}

#[test]
fn misuse_of_the_regex_fields_is_refused() {
    let e = errors(
        r#"
domain: api
descriptors:
  - {key: a, value: x, value_regex: "x+"}
  - {key: b, value_regex: ""}
  - {key: c, value_regex: "c+", regex_key: each}
  - {key: d, value: y, regex_key: shared}
  - {key: e, value_regex: "e*", share_threshold: true}
  - {key: f, value_regex: "f+", rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: f, value_regex: "f+", rate_limit: {unit: second, requests_per_unit: 2}}
"#,
    );
    let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "descriptors[0].value_regex",
            "descriptors[1].value_regex",
            "descriptors[2].regex_key",
            "descriptors[3].regex_key",
            "descriptors[4].share_threshold",
            "descriptors[6]",
        ]
    );
    assert!(
        e[0].1
            .starts_with("value and value_regex cannot both be set")
    );
    assert!(e[1].1.starts_with("value_regex must not be empty"));
    assert_eq!(
        e[2].1,
        "invalid regex_key 'each' (expected per_value or shared)"
    );
    assert_eq!(
        e[3].1,
        "regex_key only applies to a descriptor with value_regex"
    );
    assert!(e[4].1.contains("regex_key: shared"));
    assert_eq!(e[5].1, "duplicate descriptor composite key 'api.f=~f+'");
}

#[test]
fn a_regex_node_cannot_be_reached_by_spelling_its_name() {
    let c = config(
        "domain: api\ndescriptors:\n  - {key: k, value_regex: 'a_b', rate_limit: {unit: second, requests_per_unit: 1}}\n",
    );
    // `k=~a` + `_` + `b` spells the node's name; it is not an exact key, so nothing matches.
    assert_eq!(hit(&c, &[E("k=~a", "b")]), None);
    assert_eq!(hit(&c, &[E("k=~a_b", "")]), None);
    assert!(hit(&c, &[E("k", "a_b")]).is_some());
}
