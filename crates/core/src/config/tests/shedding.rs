//! `priorities`, `priority_key` and `soft` on a limit: what compiles, what is refused (with file and
//! YAML path), and the effective limit each request is judged against.

use crate::config::shedding::{Shedding, Soft, effective_limit};
use crate::config::{CompileOptions, ConfigFile, RateLimitConfig, compile};
use crate::random::{Random, SeededRandom};

fn load(yaml: &str) -> Result<RateLimitConfig, Vec<String>> {
    let file = ConfigFile {
        name: "shed.yaml".into(),
        contents: yaml.into(),
    };
    compile(&[file], &CompileOptions::default())
        .map_err(|e| e.0.iter().map(ToString::to_string).collect())
}

fn limit_with(rate_limit: &str) -> String {
    format!("domain: d\ndescriptors:\n  - key: service\n    rate_limit: {rate_limit}\n")
}

fn shedding(rate_limit: &str) -> Shedding {
    let config = load(&limit_with(rate_limit)).expect("compiles");
    let limits = config.limits();
    (**limits[0].shedding.as_ref().expect("shedding")).clone()
}

#[test]
fn priorities_compile_with_the_default_key_and_the_lowest_class_as_default() {
    let s = shedding(
        "{unit: second, requests_per_unit: 100, priorities: {critical: 1.0, write: 0.9, read: 0.8, test: 0.7}}",
    );
    let p = s.priorities.expect("priorities");
    assert_eq!(p.key, "priority");
    assert_eq!(p.name(p.default), "test");
    assert_eq!(p.class_of(Some("write")), 1);
    assert_eq!(p.class_of(Some("nonsense")), 3);
    assert_eq!(p.class_of(None), 3);
    assert_eq!(s.soft, None);
}

#[test]
fn a_class_called_default_takes_unknown_and_missing_classes() {
    let s = shedding(
        "{unit: second, requests_per_unit: 10, priority_key: tier, priorities: {critical: 1, default: 0.9, bulk: 0.5}}",
    );
    let p = s.priorities.expect("priorities");
    assert_eq!(p.key, "tier");
    assert_eq!(p.name(p.class_of(Some("other"))), "default");
    assert_eq!(p.share(p.class_of(Some("bulk"))), 0.5);
}

#[test]
fn soft_compiles_with_and_without_a_zone() {
    let s =
        shedding("{unit: minute, requests_per_unit: 10, soft: {up_to: 1.2, breach_ratio: 0.8}}");
    assert_eq!(
        s.soft,
        Some(Soft {
            up_to: 1.2,
            breach_ratio: Some(0.8)
        })
    );
    let s = shedding("{unit: minute, requests_per_unit: 10, soft: {breach_ratio: 0.5}}");
    assert_eq!(s.soft.map(|s| s.up_to), Some(1.0));
}

#[test]
fn bad_shedding_is_refused_with_file_and_yaml_path() {
    let cases = [
        (
            "{unit: second, requests_per_unit: 10, priorities: {read: 1.5}}",
            "shed.yaml: descriptors[0].rate_limit.priorities.read: invalid share 1.5 for class 'read' (expected a number above 0, at most 1)",
        ),
        (
            "{unit: second, requests_per_unit: 10, priorities: {read: 0}}",
            "shed.yaml: descriptors[0].rate_limit.priorities.read: invalid share 0 for class 'read'",
        ),
        (
            "{unit: second, requests_per_unit: 10, priorities: {read: fast}}",
            "shed.yaml: descriptors[0].rate_limit.priorities.read: invalid share 'fast' for class 'read'",
        ),
        (
            "{unit: second, requests_per_unit: 10, priorities: {'re ad': 0.5}}",
            "shed.yaml: descriptors[0].rate_limit.priorities.re ad: invalid class name 're ad'",
        ),
        (
            "{unit: second, requests_per_unit: 10, priorities: {}}",
            "shed.yaml: descriptors[0].rate_limit.priorities: priorities must name at least one class",
        ),
        (
            "{unit: second, requests_per_unit: 10, priority_key: tier}",
            "shed.yaml: descriptors[0].rate_limit.priority_key: priority_key needs a priorities map",
        ),
        (
            "{unit: second, requests_per_unit: 10, soft: {up_to: 0.9}}",
            "shed.yaml: descriptors[0].rate_limit.soft.up_to: invalid soft up_to 0.9 (expected a multiple of the limit from 1.0 to 10)",
        ),
        (
            "{unit: second, requests_per_unit: 10, soft: {up_to: 1.2, breach_ratio: 1.5}}",
            "shed.yaml: descriptors[0].rate_limit.soft.breach_ratio: invalid soft breach_ratio 1.5",
        ),
        (
            "{unit: second, requests_per_unit: 10, soft: {upto: 1.2}}",
            "shed.yaml: descriptors[0].rate_limit.soft.upto: unknown soft limit key 'upto' (expected up_to or breach_ratio)",
        ),
        (
            "{unit: second, requests_per_unit: 10, algorithm: token_bucket, priorities: {read: 0.5}}",
            "shed.yaml: descriptors[0].rate_limit.priorities: priorities does not apply to token_bucket (priorities and soft limits need a usage count: fixed_window, sliding_window, sliding_log or concurrency)",
        ),
        (
            "{unit: second, requests_per_unit: 10, algorithm: leaky_bucket, soft: {up_to: 1.1}}",
            "shed.yaml: descriptors[0].rate_limit.soft: soft does not apply to leaky_bucket",
        ),
        (
            "{unlimited: true, soft: {up_to: 1.1}}",
            "shed.yaml: descriptors[0].rate_limit.soft: should not specify soft when unlimited",
        ),
    ];
    for (rate_limit, expected) in cases {
        let errors = load(&limit_with(rate_limit)).expect_err(rate_limit);
        assert!(
            errors.iter().any(|e| e.starts_with(expected)),
            "{rate_limit}: expected `{expected}`, got {errors:?}"
        );
    }
}

#[test]
fn every_counting_algorithm_takes_priorities() {
    for algorithm in [
        "fixed_window",
        "sliding_window",
        "sliding_log",
        "concurrency",
    ] {
        let s = shedding(&format!(
            "{{unit: second, requests_per_unit: 10, algorithm: {algorithm}, priorities: {{a: 1, b: 0.5}}, soft: {{up_to: 1.5}}}}"
        ));
        assert!(s.priorities.is_some() && s.soft.is_some(), "{algorithm}");
    }
}

#[test]
fn the_effective_limit_is_the_share_of_the_limit_rounded_down() {
    assert_eq!(effective_limit(100, 1.0, 1.0, 0.0), 100);
    assert_eq!(effective_limit(100, 0.9, 1.0, 0.7), 90);
    assert_eq!(effective_limit(100, 0.57, 1.0, 0.0), 57);
    assert_eq!(effective_limit(10, 0.75, 1.0, 0.0), 7);
    // The soft zone: u = 0 is the limit itself, u → 1 the top of the zone.
    assert_eq!(effective_limit(100, 1.0, 1.2, 0.0), 100);
    assert_eq!(effective_limit(100, 1.0, 1.2, 0.5), 110);
    assert_eq!(effective_limit(100, 1.0, 1.2, 0.999_999), 119);
}

/// Over seeded draws, the share of requests refused at usage `after` in the soft zone of a
/// limit of 100 up to 1.2 is `(after − 100) / 20`: the curve the docs promise.
#[test]
fn the_soft_denial_share_follows_the_linear_curve() {
    let random = SeededRandom::new(2026);
    for after in [90u64, 100, 101, 105, 110, 115, 119, 120, 130] {
        let denied = (0..10_000)
            .filter(|_| after > effective_limit(100, 1.0, 1.2, random.unit()))
            .count();
        let share = denied as f64 / 10_000.0;
        let curve = ((after as f64 - 100.0) / 20.0).clamp(0.0, 1.0);
        // A binomial share over 10 000 draws has an sd of at most 0.005: 0.02 is 4 sd.
        assert!(
            (share - curve).abs() <= 0.02,
            "usage {after}: {share} vs {curve}"
        );
        if after <= 100 {
            assert_eq!(denied, 0, "nothing is denied up to the limit");
        }
        if after >= 120 {
            assert_eq!(
                denied, 10_000,
                "everything is denied at the top of the zone"
            );
        }
    }
}

#[test]
fn a_plain_limit_has_no_shedding() {
    // What every Go config gets: nothing changes for limits that do not ask.
    let config = load(&limit_with("{unit: second, requests_per_unit: 1}")).unwrap();
    assert!(config.limits()[0].shedding.is_none());
}
