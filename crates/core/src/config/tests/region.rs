//! `regions` on a rate limit: the shares reach the compiled limit, a region not listed gets the
//! documented default, and every misuse is reported at its YAML path.

use super::validate::{rate_limit_errors, run};

fn one(rate_limit: &str) -> String {
    format!(
        "domain: d\ndescriptors:\n  - {{key: a, rate_limit: {{unit: minute, requests_per_unit: 100, {rate_limit}}}}}\n"
    )
}

fn errs(rate_limit: &str) -> Vec<(String, String)> {
    rate_limit_errors(&one(rate_limit))
}

#[test]
fn shares_reach_the_limit_and_unlisted_regions_get_the_default() {
    let cfg = run(
        &[("f.yaml", &one("regions: {shares: {eu: 0.5, us-east: 0.3}}"))],
        false,
    )
    .unwrap();
    let r = cfg.limits()[0].regions.clone().unwrap();
    assert_eq!(r.path, "descriptors[0].rate_limit.regions");
    assert_eq!(r.share_of("eu"), 0.5);
    assert_eq!(r.share_of("us-east"), 0.3);
    // What the listed regions leave.
    assert!((r.share_of("ap") - 0.2).abs() < 1e-9);
    let cfg = run(
        &[(
            "f.yaml",
            &one("regions: {shares: {eu: 0.5}, default_share: 0.1}"),
        )],
        false,
    )
    .unwrap();
    assert_eq!(
        cfg.limits()[0].regions.as_ref().unwrap().share_of("ap"),
        0.1
    );
    // Shares written to sum to 1 leave nothing, not float noise.
    let cfg = run(
        &[(
            "f.yaml",
            &one("regions: {shares: {a: 0.7, b: 0.2, c: 0.1}}"),
        )],
        false,
    )
    .unwrap();
    assert_eq!(cfg.limits()[0].regions.as_ref().unwrap().default_share, 0.0);
    // Not regional unless asked.
    let cfg = run(&[("f.yaml", &one("name: x"))], false).unwrap();
    assert!(cfg.limits()[0].regions.is_none());
}

#[test]
fn bad_shares_are_refused_with_their_path() {
    let share = "invalid share";
    for (yaml, path, message) in [
        ("regions: {shares: {eu: 0}}", "regions.shares.eu", share),
        ("regions: {shares: {eu: 1.5}}", "regions.shares.eu", share),
        ("regions: {shares: {eu: -0.2}}", "regions.shares.eu", share),
        ("regions: {shares: {eu: half}}", "regions.shares.eu", share),
        (
            "regions: {shares: {eu: 0.5}, default_share: 0}",
            "regions.default_share",
            share,
        ),
        (
            "regions: {shares: {eu: 0.6, us: 0.5}}",
            "regions",
            "add up to 1.1 (expected at most 1",
        ),
        (
            "regions: {shares: {eu: 0.6}, default_share: 0.5}",
            "regions",
            "with default_share add up to 1.1",
        ),
        (
            "regions: {shares: {}}",
            "regions.shares",
            "shares lists no region",
        ),
        (
            "regions: {default_share: 0.5}",
            "regions.shares",
            "regions needs shares",
        ),
        (
            "regions: {shares: {eu: 0.5}, shars: 1}",
            "regions",
            "unknown key 'shars' in regions",
        ),
        (
            "regions: {shares: {'e u': 0.5}}",
            "regions.shares",
            "invalid region name e u",
        ),
        (
            "regions: eu",
            "regions",
            "invalid regions eu (expected a map",
        ),
    ] {
        let got = errs(yaml);
        assert_eq!(got.len(), 1, "{yaml}: {got:?}");
        assert_eq!(got[0].0, path, "{yaml}: {got:?}");
        assert!(got[0].1.contains(message), "{yaml}: {got:?}");
    }
}

#[test]
fn follow_demand_takes_defaults_or_checked_values() {
    let follow = |yaml: &str| {
        let cfg = run(&[("f.yaml", &one(yaml))], false).unwrap();
        cfg.limits()[0].regions.as_ref().unwrap().follow
    };
    assert_eq!(
        follow("regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: true}"),
        Some(crate::region::FollowDemand::DEFAULT)
    );
    let f = follow(
        "regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {floor: 0.2, max_step: 0.25}}",
    )
    .unwrap();
    assert_eq!((f.floor, f.max_step), (0.2, 0.25));
    assert_eq!(
        follow("regions: {shares: {eu: 0.5}, follow_demand: false}"),
        None
    );
    for (yaml, path, message) in [
        (
            "regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {floor: 0.6}}",
            "regions.follow_demand.floor",
            "1 / the regions listed = 0.5",
        ),
        (
            "regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {max_step: 0}}",
            "regions.follow_demand.max_step",
            "invalid max_step 0",
        ),
        (
            "regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {flor: 0.1}}",
            "regions.follow_demand.flor",
            "unknown key 'flor'",
        ),
        (
            "regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: yes please}",
            "regions.follow_demand",
            "invalid follow_demand",
        ),
        (
            "regions: {shares: {eu: 0.5}, default_share: 0.5, follow_demand: true}",
            "regions.default_share",
            "cannot be used with follow_demand",
        ),
    ] {
        let got = errs(yaml);
        assert_eq!(got.len(), 1, "{yaml}: {got:?}");
        assert_eq!(got[0].0, path, "{yaml}: {got:?}");
        assert!(got[0].1.contains(message), "{yaml}: {got:?}");
    }
}
