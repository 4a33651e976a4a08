//! `quota_group` (a ratelimitd extension): the name reaches the compiled limit, and every misuse
//! is refused at its path with what to write instead.

use super::validate::{errors, run};

fn errs(descriptor: &str) -> Vec<(String, String)> {
    let yaml = format!("domain: d\ndescriptors:\n  - {{{descriptor}}}\n");
    errors(&[("f.yaml", &yaml)], false)
        .into_iter()
        .map(|(_, path, message)| (path, message))
        .collect()
}

#[test]
fn the_group_name_reaches_the_compiled_limits() {
    let yaml = r#"
domain: d
descriptors:
  - key: model
    value: gpt
    quota_mode: true
    quota_group: gpt
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - {key: tenant, quota_mode: true, quota_group: gpt, rate_limit: {unit: minute, requests_per_unit: 10}}
  - {key: plain, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 1}}
"#;
    let cfg = run(&[("f.yaml", yaml)], false).unwrap();
    let mut groups: Vec<_> = cfg
        .limits()
        .iter()
        .map(|l| (l.full_key.clone(), l.quota_group.clone()))
        .collect();
    groups.sort();
    assert_eq!(
        groups,
        [
            ("d.model_gpt".to_string(), Some("gpt".to_string())),
            ("d.model_gpt.tenant".to_string(), Some("gpt".to_string())),
            ("d.plain".to_string(), None),
        ]
    );
}

#[test]
fn a_group_needs_a_name_quota_mode_and_a_limit() {
    let limit = "rate_limit: {unit: minute, requests_per_unit: 1}";
    assert_eq!(
        errs(&format!(
            "key: a, quota_mode: true, quota_group: '', {limit}"
        )),
        [(
            "descriptors[0].quota_group".to_string(),
            "quota_group must not be empty (name the group, e.g. the model)".to_string()
        )]
    );
    assert_eq!(
        errs(&format!("key: a, quota_group: gpt, {limit}")),
        [(
            "descriptors[0].quota_group".to_string(),
            "quota_group 'gpt' needs quota_mode: true on the same descriptor".to_string()
        )]
    );
    assert_eq!(
        errs("key: a, quota_mode: true, quota_group: gpt"),
        [(
            "descriptors[0].quota_group".to_string(),
            "quota_group 'gpt' needs a rate_limit (or rate_limits) on the same descriptor"
                .to_string()
        )]
    );
}
