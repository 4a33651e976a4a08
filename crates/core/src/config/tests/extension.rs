//! The algorithm extensions of `rate_limit`: accepted values reach the compiled limit, and every
//! misuse is reported at its path (all of them in one load).

use super::validate::{errors, rate_limit_errors, run};
use crate::algorithm::Algorithm;

fn one(rate_limit: &str) -> String {
    format!("domain: d\ndescriptors:\n  - {{key: a, rate_limit: {{{rate_limit}}}}}\n")
}

fn errs(rate_limit: &str) -> Vec<(String, String)> {
    rate_limit_errors(&one(rate_limit))
}

#[test]
fn a_go_config_is_a_fixed_window_of_one_unit() {
    let cfg = run(
        &[("f.yaml", &one("unit: minute, requests_per_unit: 5"))],
        false,
    )
    .unwrap();
    let l = &cfg.limits()[0];
    assert_eq!(
        (l.algorithm, l.burst, l.unit_multiplier),
        (Algorithm::FixedWindow, None, 1)
    );
}

#[test]
fn failure_mode_is_an_extension_with_checked_values() {
    let cfg = run(
        &[(
            "f.yaml",
            &one("unit: second, requests_per_unit: 1, failure_mode: deny"),
        )],
        false,
    )
    .unwrap();
    assert_eq!(
        cfg.limits()[0].failure_mode,
        Some(crate::config::FailureMode::Deny)
    );
    assert_eq!(
        errors(
            &[(
                "f.yaml",
                &one("unit: second, requests_per_unit: 1, failure_mode: maybe")
            )],
            false
        ),
        [(
            "f.yaml".into(),
            "descriptors[0].rate_limit.failure_mode".into(),
            "invalid failure_mode 'maybe' (expected error, allow, deny or local)".into()
        )]
    );
}

#[test]
fn local_failure_mode_takes_a_checked_share() {
    let cfg = run(
        &[(
            "f.yaml",
            &one("unit: second, requests_per_unit: 9, failure_mode: local, local_share: 0.25"),
        )],
        false,
    )
    .unwrap();
    let l = &cfg.limits()[0];
    assert_eq!(
        (l.failure_mode, l.local_share),
        (Some(crate::config::FailureMode::Local), Some(0.25))
    );
    for (share, message) in [
        (
            "0",
            "invalid local_share 0 (expected a number above 0, at most 1)",
        ),
        (
            "1.5",
            "invalid local_share 1.5 (expected a number above 0, at most 1)",
        ),
        ("half", "cannot unmarshal !!str `half` into float64"),
    ] {
        let got = errs(&format!(
            "unit: second, requests_per_unit: 1, failure_mode: local, local_share: {share}"
        ));
        assert_eq!(got.len(), 1, "{share}: {got:?}");
        assert_eq!(got[0].0, "local_share");
        assert!(got[0].1.contains(message), "{share}: {}", got[0].1);
    }
}

#[test]
fn token_bucket_with_burst_and_multiplier_compiles() {
    let yaml = one(
        "unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20, unit_multiplier: 5",
    );
    let cfg = run(&[("f.yaml", &yaml)], false).unwrap();
    let l = &cfg.limits()[0];
    assert_eq!(
        (l.algorithm, l.burst, l.unit_multiplier),
        (Algorithm::TokenBucket, Some(20), 5)
    );
    let spec = l.spec().unwrap();
    assert_eq!((spec.window.secs(), spec.burst, spec.limit), (5, 20, 10));
}

#[test]
fn leaky_bucket_compiles_with_burst_defaulting_to_requests_per_unit() {
    let yaml = one("unit: minute, requests_per_unit: 30, algorithm: leaky_bucket");
    let cfg = run(&[("f.yaml", &yaml)], false).unwrap();
    let spec = cfg.limits()[0].spec().unwrap();
    assert_eq!(spec.algorithm, Algorithm::LeakyBucket);
    assert_eq!((spec.window.secs(), spec.burst, spec.limit), (60, 30, 30));
    let yaml = one("unit: second, requests_per_unit: 2, algorithm: leaky_bucket, burst: 7");
    let cfg = run(&[("f.yaml", &yaml)], false).unwrap();
    assert_eq!(cfg.limits()[0].burst, Some(7));
}

#[test]
fn leaky_bucket_burst_misuse_is_reported() {
    assert_eq!(
        errs("unit: second, requests_per_unit: 1, algorithm: leaky_bucket, burst: 0"),
        [("burst".into(), "burst must be at least 1".into())]
    );
    let huge = errs("unit: year, requests_per_unit: 1, algorithm: leaky_bucket, burst: 4000000000");
    assert_eq!(
        huge,
        [(
            "burst".into(),
            "leaky_bucket capacity 4000000000 over a 31536000 s window is too large to count exactly (burst × window seconds must be at most 2^52)".into()
        )]
    );
    let huge = errs("unit: year, requests_per_unit: 4000000000, algorithm: leaky_bucket");
    assert_eq!(huge.len(), 1, "{huge:?}");
    assert_eq!(huge[0].0, "requests_per_unit");
    assert!(huge[0].1.starts_with("leaky_bucket capacity"), "{huge:?}");
    let all = errs("unlimited: true, algorithm: leaky_bucket, burst: 3");
    let paths: Vec<&str> = all.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["algorithm", "burst"], "{all:?}");
}

#[test]
fn unknown_algorithms_are_errors() {
    for name in ["magic", "leaky"] {
        assert_eq!(
            errs(&format!(
                "unit: second, requests_per_unit: 1, algorithm: {name}"
            )),
            [(
                "algorithm".into(),
                format!(
                    "invalid algorithm '{name}' (expected fixed_window, sliding_window, sliding_log, token_bucket, leaky_bucket or concurrency)"
                )
            )]
        );
    }
}

#[test]
fn sliding_log_compiles_up_to_its_size_cap() {
    let yaml =
        one("unit: minute, requests_per_unit: 100000, algorithm: sliding_log, unit_multiplier: 2");
    let cfg = run(&[("f.yaml", &yaml)], false).unwrap();
    let spec = cfg.limits()[0].spec().unwrap();
    assert_eq!(
        (spec.algorithm, spec.limit, spec.window.secs()),
        (Algorithm::SlidingLog, 100_000, 120)
    );
    assert_eq!(
        errs("unit: minute, requests_per_unit: 100001, algorithm: sliding_log"),
        [(
            "requests_per_unit".into(),
            "sliding_log keeps one entry per admitted request; requests_per_unit 100001 exceeds the maximum 100000 (use sliding_window for higher rates)".into()
        )]
    );
    assert_eq!(
        errs("unit: second, requests_per_unit: 5, algorithm: sliding_log, burst: 5"),
        [(
            "burst".into(),
            "burst only applies to token_bucket and leaky_bucket (algorithm is sliding_log)".into()
        )]
    );
    // The cap is for sliding_log only: other algorithms keep constant-size state.
    let yaml = one("unit: minute, requests_per_unit: 100001, algorithm: sliding_window");
    assert!(run(&[("f.yaml", &yaml)], false).is_ok());
    // Reported with its file and full path, like every config error.
    let yaml = one("unit: minute, requests_per_unit: 200000, algorithm: sliding_log");
    let (file, path, _) = errors(&[("f.yaml", &yaml)], false).remove(0);
    assert_eq!(
        (file.as_str(), path.as_str()),
        ("f.yaml", "descriptors[0].rate_limit.requests_per_unit")
    );
}

#[test]
fn burst_misuse_is_reported() {
    assert_eq!(
        errs("unit: second, requests_per_unit: 1, burst: 5"),
        [(
            "burst".into(),
            "burst only applies to token_bucket and leaky_bucket (algorithm is fixed_window)"
                .into()
        )]
    );
    assert_eq!(
        errs("unit: second, requests_per_unit: 1, algorithm: token_bucket, burst: 0"),
        [("burst".into(), "burst must be at least 1".into())]
    );
    assert_eq!(
        errs("unit: second, requests_per_unit: 1, algorithm: token_bucket, burst: -1")[0].0,
        "burst"
    );
    let huge = errs("unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: 4000000000");
    assert_eq!(huge.len(), 1, "{huge:?}");
    assert_eq!(huge[0].0, "burst");
    assert!(huge[0].1.contains("too large"), "{huge:?}");
    // Without `burst` the capacity is requests_per_unit, and that is where the error points.
    let huge = errs("unit: year, requests_per_unit: 4000000000, algorithm: token_bucket");
    assert_eq!(huge[0].0, "requests_per_unit");
}

#[test]
fn unit_multiplier_misuse_is_reported() {
    assert_eq!(
        errs("unit: second, requests_per_unit: 1, unit_multiplier: 0"),
        [(
            "unit_multiplier".into(),
            "unit_multiplier must be at least 1".into()
        )]
    );
    let long = errs("unit: year, requests_per_unit: 1, unit_multiplier: 11");
    assert_eq!(long.len(), 1);
    assert_eq!(long[0].0, "unit_multiplier");
    assert!(long[0].1.contains("longest allowed"), "{long:?}");
}

#[test]
fn extensions_with_unlimited_and_every_error_at_once() {
    let all = errs("unlimited: true, algorithm: token_bucket, burst: 3, unit_multiplier: 2");
    let paths: Vec<&str> = all.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["algorithm", "burst", "unit_multiplier"], "{all:?}");
    let all =
        errs("unit: second, requests_per_unit: 1, algorithm: nope, burst: 0, unit_multiplier: 0");
    assert_eq!(all.len(), 3, "{all:?}");
}

#[test]
fn lease_is_a_fixed_window_and_token_bucket_extension() {
    for algorithm in ["fixed_window", "token_bucket"] {
        let yaml = one(&format!(
            "unit: hour, requests_per_unit: 1000, algorithm: {algorithm}, lease: 100"
        ));
        let cfg = run(&[("f.yaml", &yaml)], false).unwrap();
        assert_eq!(cfg.limits()[0].lease, Some(100), "{algorithm}");
    }
    for (algorithm, why) in [
        ("sliding_log", "it stamps each hit with its own time"),
        ("sliding_window", "it weighs each hit by when it came"),
        ("leaky_bucket", "its answer is a time slot per hit"),
    ] {
        let yaml = one(&format!(
            "unit: hour, requests_per_unit: 9, algorithm: {algorithm}, lease: 5"
        ));
        assert_eq!(
            errors(&[("f.yaml", &yaml)], false),
            [(
                "f.yaml".into(),
                "descriptors[0].rate_limit.lease".into(),
                format!(
                    "lease only applies to fixed_window and token_bucket, not {algorithm} ({why}, so a batch reserved now cannot be spent later): see README \"Token leases\""
                )
            )]
        );
    }
}

#[test]
fn usage_report_reaches_the_limit_and_misuse_is_named() {
    let cfg = run(
        &[(
            "f.yaml",
            &one("unit: minute, requests_per_unit: 5, algorithm: token_bucket, usage: report"),
        )],
        false,
    )
    .unwrap();
    assert!(cfg.limits()[0].usage_report);
    let cfg = run(
        &[(
            "f.yaml",
            &one("unit: minute, requests_per_unit: 5, usage: request"),
        )],
        false,
    )
    .unwrap();
    assert!(!cfg.limits()[0].usage_report);
    let field = "usage";
    let e = errs("unit: minute, requests_per_unit: 5, usage: tokens");
    assert_eq!(
        e,
        [(
            field.to_owned(),
            "invalid usage 'tokens' (expected report or request)".to_owned()
        )]
    );
    let e = errs("unit: minute, requests_per_unit: 5, algorithm: concurrency, usage: report");
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, field);
    assert!(e[0].1.contains("does not apply to concurrency"), "{e:?}");
    let e = errs("unlimited: true, usage: report");
    assert!(
        e.iter()
            .any(|(at, m)| at == field && m == "should not specify usage when unlimited"),
        "{e:?}"
    );
}

#[test]
fn usage_estimate_reaches_the_limit_and_misuse_is_named() {
    let cfg = run(
        &[(
            "f.yaml",
            &one("unit: minute, requests_per_unit: 1000, usage: {mode: report, estimate: 500}"),
        )],
        false,
    )
    .unwrap();
    let l = &cfg.limits()[0];
    assert!(l.usage_report);
    assert_eq!(l.usage_estimate, Some(500));
    let cfg = run(
        &[(
            "f.yaml",
            &one("unit: minute, requests_per_unit: 5, usage: {mode: report}"),
        )],
        false,
    )
    .unwrap();
    assert_eq!(
        (cfg.limits()[0].usage_report, cfg.limits()[0].usage_estimate),
        (true, None)
    );
    let at = |f: &str| format!("usage.{f}");
    assert_eq!(
        errs("unit: minute, requests_per_unit: 100, usage: {mode: report, estimate: 101}"),
        [(
            at("estimate"),
            "invalid usage estimate 101 (expected 1 to 100, the most one request may take from this limit)".to_owned()
        )]
    );
    // A bucket's capacity is its burst.
    let bucket = "unit: minute, requests_per_unit: 100, algorithm: token_bucket, burst: 200, usage: {mode: report, estimate: 150}";
    assert!(run(&[("f.yaml", &one(bucket))], false).is_ok());
    assert_eq!(
        errs("unit: minute, requests_per_unit: 100, usage: {mode: report, estimate: 0}")[0].1,
        "invalid usage estimate 0 (expected 1 to 100, the most one request may take from this limit)"
    );
    assert_eq!(
        errs("unit: minute, requests_per_unit: 100, usage: {mode: request, estimate: 5}"),
        [(
            at("estimate"),
            "an estimate is charged by the check of a reported usage; it needs mode: report"
                .to_owned()
        )]
    );
    let e = errs("unit: minute, requests_per_unit: 100, usage: {mode: report, estimat: 5}");
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, at("estimat"));
    assert!(e[0].1.contains("unknown usage key 'estimat'"), "{e:?}");
    assert!(e[0].1.contains("expected mode or estimate"), "{e:?}");
    let e = errs("unit: minute, requests_per_unit: 100, usage: {estimate: 5}");
    assert_eq!(
        e[0],
        (
            at("mode"),
            "usage needs a mode (report or request)".to_owned()
        )
    );
    let e = errs("unit: minute, requests_per_unit: 100, usage: {mode: report, estimate: many}");
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, at("estimate"));
}

#[test]
fn every_limit_of_a_descriptor_with_an_estimate_counts_the_same_one() {
    let yaml = "domain: d\ndescriptors:\n  - key: a\n    rate_limits:\n      - {unit: minute, requests_per_unit: 1000, usage: {mode: report, estimate: 50}}\n      - {unit: day, requests_per_unit: 100000, usage: report}\n";
    let e = errors(&[("f.yaml", yaml)], false);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].1, "descriptors[0].rate_limits[1].usage");
    assert!(e[0].2.contains("estimate: 50"), "{e:?}");
    let ok = yaml.replace("usage: report}", "usage: {mode: report, estimate: 50}}");
    assert!(run(&[("f.yaml", &ok)], false).is_ok());
}
