//! Conversion of `RateLimitConfig` resources, checked through the real compile step: what a proto
//! says is what gets enforced, and what is wrong in it is reported as for a file.

use prost::Message;

use super::*;
use crate::xds::pb::ratelimit::config::ratelimit::v3::RateLimitReplace;
use ratelimitd_core::config::{CompileOptions, Unit, compile};
use ratelimitd_core::limiter::Entry;

fn policy(unit: RateLimitUnit, n: u32) -> Option<RateLimitPolicy> {
    Some(RateLimitPolicy {
        unit: unit as i32,
        requests_per_unit: n,
        ..Default::default()
    })
}

fn desc(key: &str, value: &str, rate_limit: Option<RateLimitPolicy>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        key: key.into(),
        value: value.into(),
        rate_limit,
        ..Default::default()
    }
}

fn resource(name: &str, domain: &str, descriptors: Vec<RateLimitDescriptor>) -> prost_types::Any {
    let config = RateLimitConfig {
        name: name.into(),
        domain: domain.into(),
        descriptors,
    };
    prost_types::Any {
        type_url: TYPE_URL.into(),
        value: config.encode_to_vec(),
    }
}

fn compile_all(
    resources: &[prost_types::Any],
) -> Result<ratelimitd_core::config::RateLimitConfig, String> {
    let files: Vec<ConfigFile> = resources
        .iter()
        .map(resource_to_file)
        .collect::<Result<_, _>>()?;
    compile(&files, &CompileOptions::default()).map_err(|e| e.to_string())
}

#[test]
fn limits_nesting_flags_and_replaces_survive_the_conversion() {
    let mut parent = desc("user", "", None);
    let mut child = desc("path", "/login", policy(RateLimitUnit::Minute, 5));
    child.shadow_mode = true;
    if let Some(rl) = child.rate_limit.as_mut() {
        rl.name = "login".into();
        rl.replaces = vec![RateLimitReplace { name: "x".into() }];
    }
    parent.descriptors = vec![child];
    let week = desc("weekly", "yes", policy(RateLimitUnit::Week, 7));
    let config = compile_all(&[resource("r1", "d", vec![parent, week])]).unwrap();
    let d = config.domain("d").unwrap();
    let e = |k: &str, v: &str| Entry::new(k, v);
    let m = d
        .get_limit(&[e("user", "u1"), e("path", "/login")])
        .unwrap();
    assert_eq!(m.limit.requests_per_unit, 5);
    assert_eq!(m.limit.unit, Some(Unit::Minute));
    assert!(m.limit.shadow_mode);
    assert_eq!(m.limit.name, "login");
    assert_eq!(m.limit.replaces, ["x"]);
    // `yes` stays a string value, not a YAML boolean.
    let w = d.get_limit(&[e("weekly", "yes")]).unwrap();
    assert_eq!(w.limit.unit, Some(Unit::Week));
}

#[test]
fn metadata_becomes_the_limits_json_object() {
    let mut d = desc("k", "", policy(RateLimitUnit::Second, 1));
    let field = |kind| prost_types::Value { kind: Some(kind) };
    d.metadata = Some(prost_types::Struct {
        fields: [
            ("tier".to_string(), field(Kind::StringValue("gold".into()))),
            ("n".to_string(), field(Kind::NumberValue(3.0))),
            ("r".to_string(), field(Kind::NumberValue(0.5))),
        ]
        .into(),
    });
    let config = compile_all(&[resource("r", "dom", vec![d])]).unwrap();
    let domain = config.domain("dom").unwrap();
    let limit = domain.get_limit(&[Entry::new("k", "v")]).unwrap().limit;
    let meta = limit.metadata.clone().unwrap();
    assert_eq!(meta["tier"], "gold");
    assert_eq!(meta["n"], 3);
    assert_eq!(meta["r"], 0.5);
}

#[test]
fn errors_name_the_resource_and_use_the_file_texts() {
    let unknown = vec![desc("k", "", policy(RateLimitUnit::Unknown, 1))];
    let err = compile_all(&[resource("bad-resource", "d", unknown)]).unwrap_err();
    assert!(err.starts_with("bad-resource: "), "{err}");
    assert!(err.contains("invalid rate limit unit 'UNKNOWN'"), "{err}");
    let dup = compile_all(&[resource("a", "d", vec![]), resource("b", "d", vec![])]).unwrap_err();
    assert!(
        dup.contains("b: ") && dup.contains("duplicate domain 'd'"),
        "{dup}"
    );
    let empty = compile_all(&[resource("e", "", vec![])]).unwrap_err();
    assert!(
        empty.contains("config file cannot have empty domain"),
        "{empty}"
    );
}

#[test]
fn unlimited_without_a_unit_is_accepted() {
    let mut p = policy(RateLimitUnit::Unknown, 0).unwrap();
    p.unlimited = true;
    let config = compile_all(&[resource("r", "d", vec![desc("k", "", Some(p))])]).unwrap();
    let domain = config.domain("d").unwrap();
    assert!(
        domain
            .get_limit(&[Entry::new("k", "v")])
            .unwrap()
            .limit
            .unlimited
    );
}

#[test]
fn a_resource_of_another_type_or_undecodable_is_refused() {
    let mut other = resource("r", "d", vec![]);
    other.type_url = "type.googleapis.com/envoy.config.cluster.v3.Cluster".into();
    let err = resource_to_file(&other).unwrap_err();
    assert!(err.contains("unexpected resource type"), "{err}");
    let garbage = prost_types::Any {
        type_url: TYPE_URL.into(),
        value: vec![0xff, 0xff, 0xff],
    };
    let err = resource_to_file(&garbage).unwrap_err();
    assert!(err.contains("cannot decode"), "{err}");
}
