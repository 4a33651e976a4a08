//! `rate_limits`: several limits on one node compile into one limit carrying the rest, and every
//! misuse is reported at its path.

use super::validate::{errors, run};
use crate::algorithm::Algorithm;
use crate::config::Unit;

fn node(body: &str) -> String {
    format!("domain: d\ndescriptors:\n  - key: a\n{body}")
}

fn errs(body: &str) -> Vec<(String, String)> {
    errors(&[("f.yaml", &node(body))], false)
        .into_iter()
        .map(|(_, path, message)| (path.replace("descriptors[0].", ""), message))
        .collect()
}

#[test]
fn every_limit_of_the_list_compiles_in_order() {
    let yaml = node(
        "    rate_limits:
      - {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20, name: fast}
      - {unit: day, requests_per_unit: 10000, failure_mode: allow}
",
    );
    let cfg = run(&[("f.yaml", &yaml)], false).unwrap();
    let all = cfg.limits();
    assert_eq!(all.len(), 2, "both limits are listed");
    let first = all[0];
    assert_eq!(first.also.len(), 1);
    assert_eq!(
        (first.algorithm, first.burst, first.name.as_str()),
        (Algorithm::TokenBucket, Some(20), "fast")
    );
    let day = &first.also[0];
    assert_eq!((day.unit, day.requests_per_unit), (Some(Unit::Day), 10000));
    assert_eq!(
        day.full_key, "d.a",
        "all limits report under the node's stats key"
    );
    assert_eq!(day.failure_mode, Some(crate::config::FailureMode::Allow));
}

#[test]
fn misuse_is_reported_at_its_path() {
    assert_eq!(
        errs("    rate_limit: {unit: second, requests_per_unit: 1}\n    rate_limits: [{unit: day, requests_per_unit: 9}]\n"),
        [(
            "rate_limits".into(),
            "rate_limit and rate_limits cannot both be set on one descriptor; put every limit in rate_limits".into()
        )]
    );
    assert_eq!(
        errs("    rate_limits: []\n"),
        [(
            "rate_limits".into(),
            "rate_limits must hold at least one limit".into()
        )]
    );
    assert_eq!(
        errs("    rate_limits:\n      - {unit: minute, requests_per_unit: 5}\n      - {unit: minute, requests_per_unit: 9}\n"),
        [(
            "rate_limits[1]".into(),
            "rate_limits[1] has the same algorithm and window as rate_limits[0]; merge them into one limit (the smaller one always decides)".into()
        )]
    );
    assert_eq!(
        errs("    rate_limits:\n      - {unit: minute, requests_per_unit: 5, name: a}\n      - {unlimited: true, replaces: [{name: b}]}\n"),
        [
            (
                "rate_limits[1].unlimited".into(),
                "unlimited cannot be combined with other limits in rate_limits".into()
            ),
            (
                "rate_limits[1].replaces".into(),
                "replaces belongs on the first entry of rate_limits (it applies to the whole descriptor)".into()
            ),
        ]
    );
}

#[test]
fn entries_are_checked_like_rate_limit() {
    assert_eq!(
        errs(
            "    rate_limits:\n      - {unit: fortnight, requests_per_unit: 5}\n      - {unit: day, requests_per_unit: 9, burst: 3, colour: red}\n"
        ),
        [
            (
                "rate_limits[1].colour".into(),
                "config error, unknown key 'colour'".into()
            ),
            (
                "rate_limits[0].unit".into(),
                "invalid rate limit unit 'fortnight' (one of second, minute, hour, day, week, month, year, in any case)".into()
            ),
            (
                "rate_limits[1].burst".into(),
                "burst only applies to token_bucket and leaky_bucket (algorithm is fixed_window)"
                    .into()
            ),
        ]
    );
    assert_eq!(
        errs("    rate_limits: {unit: day}\n"),
        [(
            "rate_limits".into(),
            "error loading config file: yaml: unmarshal errors: field rate_limits: cannot unmarshal !!map into []config.YamlRateLimit"
                .into()
        )]
    );
}
