//! `split` in the YAML: a valid one reaches the limit for every algorithm, and a value out of
//! range, a share below one and the features it does not combine with are refused at its path.

use super::validate::{errors, rate_limit_errors, run};

fn one(rate_limit: &str) -> String {
    format!("domain: d\ndescriptors:\n  - {{key: a, rate_limit: {{{rate_limit}}}}}\n")
}

#[test]
fn split_reaches_the_limit_of_every_algorithm() {
    for algorithm in [
        "fixed_window",
        "sliding_window",
        "sliding_log",
        "token_bucket",
        "leaky_bucket",
        "concurrency",
    ] {
        let yaml = one(&format!(
            "unit: minute, requests_per_unit: 100, algorithm: {algorithm}, split: 6"
        ));
        let cfg = run(&[("f.yaml", &yaml)], false).unwrap();
        assert_eq!(cfg.limits()[0].split, Some(6), "{algorithm}");
    }
    let cfg = run(
        &[("f.yaml", &one("unit: second, requests_per_unit: 9"))],
        false,
    )
    .unwrap();
    assert_eq!(cfg.limits()[0].split, None);
}

#[test]
fn out_of_range_splits_name_file_path_and_range() {
    for (n, hint) in [
        ("0", " (split 1 is one key: remove the field)"),
        ("1", " (split 1 is one key: remove the field)"),
        ("65", ""),
    ] {
        let yaml = one(&format!(
            "unit: second, requests_per_unit: 1000, split: {n}"
        ));
        assert_eq!(
            errors(&[("f.yaml", &yaml)], false),
            [(
                "f.yaml".into(),
                "descriptors[0].rate_limit.split".into(),
                format!("invalid split {n}: expected 2 to 64 sub-keys{hint}")
            )]
        );
    }
    let wrong = rate_limit_errors(&one("unit: second, requests_per_unit: 10, split: three"));
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert_eq!(wrong[0].0, "split");
}

#[test]
fn every_sub_key_needs_a_share_and_split_stands_alone() {
    assert_eq!(
        rate_limit_errors(&one("unit: second, requests_per_unit: 5, split: 6")),
        [(
            "split".into(),
            "split 6 needs requests_per_unit of at least 6 (it is 5), so that every sub-key has a share of at least 1".into()
        )]
    );
    assert_eq!(
        rate_limit_errors(&one(
            "unit: second, requests_per_unit: 50, algorithm: token_bucket, burst: 2, split: 3"
        )),
        [(
            "split".into(),
            "split 3 needs burst of at least 3 (it is 2), so that every sub-key has a share of at least 1".into()
        )]
    );
    for other in [
        "lease: 10",
        "regions: {shares: {eu: 0.5, us: 0.5}}",
        "usage: report",
        "priority_key: class, priorities: {gold: 1.0}",
    ] {
        let all = rate_limit_errors(&one(&format!(
            "unit: minute, requests_per_unit: 100, split: 3, {other}"
        )));
        assert!(
            all.iter().any(|(path, message)| path == "split"
                && message.starts_with("split does not combine with")),
            "{other}: {all:?}"
        );
    }
    // `lease: 0` (never lease) is what a split limit does anyway.
    let yaml = one("unit: minute, requests_per_unit: 100, split: 3, lease: 0");
    assert!(run(&[("f.yaml", &yaml)], false).is_ok());
    assert_eq!(
        rate_limit_errors(&one("unlimited: true, split: 3")),
        [(
            "split".into(),
            "should not specify split when unlimited".into()
        )]
    );
}
