//! Regional limits this instance cannot enforce are refused at start, naming the file, the YAML
//! path and what to set; bad region settings stop the binary, naming the variable.

use crate::ops::loud_config::{refused, stderr};
use crate::support::TestServer;

const WORLD: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100, regions: {shares: {eu: 0.6, us: 0.4}}}\n";
const MOVING: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: true}}\n";
const BAD: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100, regions: {shares: {eu: 0.6, us: 0.6}}}\n";

/// A configuration, the settings it starts with, and a part of the error it must give.
type Case = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

#[tokio::test]
async fn a_regional_limit_needs_a_region_a_share_and_for_demand_a_global_store() {
    let cases: [Case; 4] = [
        (
            WORLD,
            &[],
            "d.yaml: descriptors[0].rate_limit.regions: limit d.k: regions needs REGION to be set",
        ),
        (
            WORLD,
            &[("REGION", "ap")],
            "REGION=ap has no share of this limit",
        ),
        (
            MOVING,
            &[("REGION", "eu")],
            "follow_demand needs the global store",
        ),
        (
            BAD,
            &[("REGION", "eu")],
            "descriptors[0].rate_limit.regions: the shares add up to 1.2",
        ),
    ];
    for (yaml, env, expected) in cases {
        // As in production: a configuration that does not load stops the start.
        let mut env = env.to_vec();
        env.push(("ALLOW_EMPTY_CONFIG", "false"));
        let e = TestServer::try_start(&[("d.yaml", yaml)], &env).await.err();
        let e = e.unwrap_or_else(|| panic!("{env:?} started"));
        assert!(e.contains(expected), "{env:?}: {e}");
    }
}

#[test]
fn bad_region_settings_stop_the_binary_naming_the_variable() {
    let out = refused(&[
        ("REGION", "eu west"),
        ("REGION_SYNC_INTERVAL", "5ms"),
        ("GLOBAL_REDIS_URL", "127.0.0.1:6379"),
        ("GLOBAL_REDIS_TYPE", "ring"),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    for (name, value) in [
        ("REGION", "eu west"),
        ("REGION_SYNC_INTERVAL", "5ms"),
        ("GLOBAL_REDIS_TYPE", "ring"),
    ] {
        assert!(
            err.contains(&format!("invalid value {value:?} for {name}")),
            "{name}: {err}"
        );
    }
    let out = refused(&[("GLOBAL_REDIS_URL", "127.0.0.1:6379")]);
    let err = stderr(&out);
    assert!(
        err.contains("GLOBAL_REDIS_URL") && err.contains("set REGION too"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
