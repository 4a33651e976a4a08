//! Matching scenarios of `docs/design/contract.md#scenarios` (CFG-BASIC, CFG-WILD) and the quirks
//! of `docs/design/contract.md#matching-quirks`, built from the YAML fixtures in
//! `tests/fixtures/config/`.

use crate::config::*;
use crate::test_support::{E, config};

const BASIC: &str = include_str!("../../../../../tests/fixtures/config/cfg-basic.yaml");
const WILD: &str = include_str!("../../../../../tests/fixtures/config/cfg-wild.yaml");
const FEATURES: &str = include_str!("../../../../../tests/fixtures/config/features.yaml");

/// `(full_key, requests_per_unit, unit)` of the limit matched, or `None`.
fn hit(cfg: &RateLimitConfig, domain: &str, entries: &[E]) -> Option<(String, u32, Option<Unit>)> {
    let m = cfg.domain(domain)?.get_limit(entries)?;
    assert_eq!(m.path.len(), entries.len(), "one matched level per entry");
    Some((
        m.limit.full_key.clone(),
        m.limit.requests_per_unit,
        m.limit.unit,
    ))
}

fn lim(key: &str, n: u32, unit: Unit) -> Option<(String, u32, Option<Unit>)> {
    Some((key.to_owned(), n, Some(unit)))
}

#[test]
fn basic_scenarios_2_to_9() {
    let c = config(BASIC);
    let d = "test-domain";
    // 2: the node has no limit.
    assert_eq!(hit(&c, d, &[E("key1", "value1")]), None);
    // 3, 4: default vs exact child.
    assert_eq!(
        hit(&c, d, &[E("key1", "value1"), E("subkey1", "something")]),
        lim("test-domain.key1_value1.subkey1", 5, Unit::Second)
    );
    assert_eq!(
        hit(&c, d, &[E("key1", "value1"), E("subkey1", "subvalue1")]),
        lim(
            "test-domain.key1_value1.subkey1_subvalue1",
            10,
            Unit::Second
        )
    );
    // 5, 6: default shared by any value; exact beats default.
    for v in ["something", "other"] {
        assert_eq!(
            hit(&c, d, &[E("key2", v)]),
            lim("test-domain.key2", 20, Unit::Minute)
        );
    }
    assert_eq!(
        hit(&c, d, &[E("key2", "value2")]),
        lim("test-domain.key2_value2", 30, Unit::Minute)
    );
    // 7: exact node without limit or children whitelists, even though `key2` has a default.
    assert_eq!(hit(&c, d, &[E("key2", "value3")]), None);
    // 8: request deeper than the config.
    assert_eq!(
        hit(&c, d, &[E("key2", "value2"), E("subkey", "subvalue")]),
        None
    );
    // 9: no backtracking to the level-1 limit.
    assert_eq!(
        hit(&c, d, &[E("key5", "value5"), E("subkey5", "subvalue")]),
        None
    );
    assert_eq!(
        hit(&c, d, &[E("key5", "value5")]),
        lim("test-domain.key5_value5", 15, Unit::Day)
    );
}

#[test]
fn no_entries_and_unknown_keys_match_nothing() {
    let c = config(BASIC);
    let domain = c.domain("test-domain").expect("domain");
    assert!(domain.get_limit::<E>(&[]).is_none());
    assert!(domain.get_limit(&[E("nope", "x")]).is_none());
    assert!(c.domain("nope").is_none());
}

#[test]
fn match_kinds_and_path_are_reported() {
    let c = config(BASIC);
    let domain = c.domain("test-domain").expect("domain");
    let m = domain
        .get_limit(&[E("key1", "value1"), E("subkey1", "x")])
        .expect("limit");
    let kinds: Vec<MatchKind> = m.path.iter().map(|l| l.kind).collect();
    assert_eq!(kinds, [MatchKind::Exact, MatchKind::Default]);
    assert_eq!(m.path[0].node.key, "key1");
    assert_eq!(m.path[0].node.value, "value1");
}

#[test]
fn unlimited_and_named_limits_are_returned_as_configured() {
    let c = config(BASIC);
    let domain = c.domain("test-domain").expect("domain");
    let m = domain.get_limit(&[E("key6", "foo")]).expect("limit");
    assert!(m.limit.unlimited);
    assert_eq!(m.limit.unit, None);
    let m = domain.get_limit(&[E("key4", "foo")]).expect("limit");
    assert_eq!(m.limit.name, "key4_rate_limit");
    let m = domain.get_limit(&[E("key7", "v")]).expect("limit");
    assert!(m.limit.detailed_metric);
}

#[test]
fn wildcard_scenarios_15_16_19() {
    let c = config(WILD);
    let d = "test-domain";
    for v in ["foo1", "foo2", "foo"] {
        assert_eq!(
            hit(&c, d, &[E("wild", v)]),
            lim("test-domain.wild_foo*", 20, Unit::Minute)
        );
    }
    assert_eq!(hit(&c, d, &[E("wild", "bar")]), None);
    assert_eq!(hit(&c, d, &[E("noWild", "foo1")]), None);
    assert_eq!(
        hit(&c, d, &[E("nestedWild", "val1"), E("wild", "goo2")]),
        lim("test-domain.nestedWild_val1.wild_goo*", 20, Unit::Minute)
    );
    assert_eq!(
        hit(&c, d, &[E("noVal", "anything")]),
        lim("test-domain.noVal", 20, Unit::Minute)
    );
}

#[test]
fn middle_and_multiple_stars() {
    let c = config(WILD);
    let d = "test-domain";
    let mid = lim("test-domain.midWild_bar*b", 20, Unit::Minute);
    assert_eq!(hit(&c, d, &[E("midWild", "barb")]), mid);
    assert_eq!(hit(&c, d, &[E("midWild", "bar-anything-b")]), mid);
    assert_eq!(hit(&c, d, &[E("midWild", "barbx")]), None);
    let multi = lim("test-domain.multiWild_foo*bar*baz", 10, Unit::Minute);
    assert_eq!(hit(&c, d, &[E("multiWild", "foobarbaz")]), multi);
    assert_eq!(hit(&c, d, &[E("multiWild", "foo1bar2baz")]), multi);
    assert_eq!(hit(&c, d, &[E("multiWild", "foo1baz2bar")]), None);
}

#[test]
fn literal_pattern_value_hits_the_exact_branch() {
    let c = config(WILD);
    let domain = c.domain("test-domain").expect("domain");
    let exact = domain.get_limit(&[E("wild", "foo*")]).expect("limit");
    assert_eq!(exact.path[0].kind, MatchKind::Exact);
    let wild = domain.get_limit(&[E("wild", "foo1")]).expect("limit");
    assert_eq!(wild.path[0].kind, MatchKind::Wildcard);
    assert!(std::ptr::eq(exact.limit.as_ref(), wild.limit.as_ref()));
}

#[test]
fn wildcards_match_the_combined_key_value_string() {
    let c = config(FEATURES);
    let d = "features";
    // `a`/`b*` is the pattern `a_b*`: request key `a_b` with any value matches it too.
    assert_eq!(
        hit(&c, d, &[E("a", "bcd")]),
        lim("features.a_b*", 1, Unit::Minute)
    );
    assert_eq!(
        hit(&c, d, &[E("a_b", "zzz")]),
        lim("features.a_b*", 1, Unit::Minute)
    );
    // A `*` in a key without value is a key-level wildcard.
    assert_eq!(
        hit(&c, d, &[E("prefix", "v")]),
        lim("features.pre*", 2, Unit::Minute)
    );
    assert_eq!(
        hit(&c, d, &[E("pre", "")]),
        lim("features.pre*", 2, Unit::Minute)
    );
    // The first wildcard in config order wins, even when a later one is more specific.
    assert_eq!(
        hit(&c, d, &[E("first", "xyz")]),
        lim("features.first_x*", 3, Unit::Minute)
    );
}

#[test]
fn names_replaces_flags_and_metadata_are_carried() {
    let c = config(FEATURES);
    let domain = c.domain("features").expect("domain");
    let m = domain
        .get_limit(&[E("key_1", "value_1"), E("user", "bk")])
        .expect("limit");
    assert_eq!(m.limit.name, "specific_limit");
    let m = domain
        .get_limit(&[E("key_2", "value_2"), E("user", "bk")])
        .expect("limit");
    assert_eq!(m.limit.replaces, ["specific_limit"]);

    let m = domain.get_limit(&[E("flagged", "v")]).expect("limit");
    assert!(m.limit.shadow_mode && m.limit.quota_mode);
    assert_eq!(
        (m.limit.requests_per_unit, m.limit.unit),
        (0, Some(Unit::Hour))
    );
    let metadata = serde_json::Value::Object(m.limit.metadata.clone().expect("metadata"));
    assert_eq!(
        metadata,
        serde_json::json!({"team": "payments", "weight": 1.5, "tags": ["a", "b"], "nested": {"deep": true}})
    );

    let m = domain
        .get_limit(&[E("files", "files/a.pdf")])
        .expect("limit");
    assert!(m.path[0].node.share_threshold && m.path[0].node.value_to_metric);
    assert_eq!(m.path[0].kind, MatchKind::Wildcard);

    let m = domain.get_limit(&[E("unlimited", "x")]).expect("limit");
    assert!(m.limit.unlimited && m.limit.unit.is_none());
    assert_eq!(m.limit.name, "free");
}

#[test]
fn listings_are_sorted_and_in_config_order() {
    let other = ConfigFile {
        name: "a.yaml".into(),
        contents: "domain: another\ndescriptors: [{key: k, rate_limit: {unit: day, requests_per_unit: 1}}]".into(),
    };
    let basic = ConfigFile {
        name: "b.yaml".into(),
        contents: BASIC.into(),
    };
    let c = compile(&[basic, other], &CompileOptions::default()).expect("compiles");
    assert_eq!(c.domain_count(), 2);
    let names: Vec<&str> = c.domains().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["another", "test-domain"]);
    let keys: Vec<&str> = c.limits().iter().map(|l| l.full_key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "another.k",
            "test-domain.key1_value1.subkey1",
            "test-domain.key1_value1.subkey1_subvalue1",
            "test-domain.key2",
            "test-domain.key2_value2",
            "test-domain.key3",
            "test-domain.key4",
            "test-domain.key5_value5",
            "test-domain.key5_value5.subkey5_subvalue5",
            "test-domain.key6",
            "test-domain.key7",
        ]
    );
}
