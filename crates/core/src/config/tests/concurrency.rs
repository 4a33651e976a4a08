//! `algorithm: concurrency` in the YAML: slots and lease timeout reach the spec, and what does not
//! apply to it (`lease`, `burst`, more slots than one key may hold) is refused at its path.

use super::validate::{rate_limit_errors, run};
use crate::algorithm::Algorithm;

fn one(rate_limit: &str) -> String {
    format!("domain: d\ndescriptors:\n  - {{key: a, rate_limit: {{{rate_limit}}}}}\n")
}

fn errs(rate_limit: &str) -> Vec<(String, String)> {
    rate_limit_errors(&one(rate_limit))
}

#[test]
fn slots_and_the_lease_timeout_reach_the_spec() {
    let yaml =
        one("unit: second, unit_multiplier: 30, requests_per_unit: 10, algorithm: concurrency");
    let cfg = run(&[("f.yaml", &yaml)], false).unwrap();
    let spec = cfg.limits()[0].spec().unwrap();
    assert_eq!(
        (spec.algorithm, spec.limit, spec.window.secs()),
        (Algorithm::Concurrency, 10, 30)
    );
}

#[test]
fn leases_burst_and_too_many_slots_are_refused() {
    assert_eq!(
        errs("unit: minute, requests_per_unit: 5, algorithm: concurrency, lease: 10"),
        [(
            "lease".into(),
            "lease only applies to fixed_window and token_bucket, not concurrency (each slot belongs to one holder id, so a batch reserved now cannot be spent later): see README \"Token leases\"".into()
        )]
    );
    assert_eq!(
        errs("unit: minute, requests_per_unit: 5, algorithm: concurrency, burst: 5"),
        [(
            "burst".into(),
            "burst only applies to token_bucket and leaky_bucket (algorithm is concurrency)".into()
        )]
    );
    assert_eq!(
        errs("unit: minute, requests_per_unit: 100001, algorithm: concurrency"),
        [(
            "requests_per_unit".into(),
            "concurrency keeps one holder per slot; requests_per_unit 100001 exceeds the maximum 100000 slots".into()
        )]
    );
    // `lease: 0` (never lease) is what a concurrency limit does anyway.
    let yaml = one("unit: minute, requests_per_unit: 5, algorithm: concurrency, lease: 0");
    assert!(run(&[("f.yaml", &yaml)], false).is_ok());
}
