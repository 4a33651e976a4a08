//! Validation: every error class of `docs/design/contract.md#validation` with its exact Go message,
//! its YAML path and its file, plus error collection across descriptors and files.

use crate::config::*;

pub(super) fn run(
    files: &[(&str, &str)],
    merge_domains: bool,
) -> Result<RateLimitConfig, ConfigErrors> {
    let files: Vec<ConfigFile> = files
        .iter()
        .map(|(name, contents)| ConfigFile {
            name: (*name).to_owned(),
            contents: (*contents).to_owned(),
        })
        .collect();
    compile(
        &files,
        &CompileOptions {
            merge_domains,
            ..CompileOptions::default()
        },
    )
}

/// `(file, path, message)` of every error.
pub(super) fn errors(files: &[(&str, &str)], merge_domains: bool) -> Vec<(String, String, String)> {
    match run(files, merge_domains) {
        Ok(_) => panic!("expected errors"),
        Err(ConfigErrors(list)) => list
            .into_iter()
            .map(|e| (e.file.clone(), e.path.clone(), e.explained()))
            .collect(),
    }
}

/// `(path below descriptors[0].rate_limit, message)` of every error of one file `f.yaml`.
pub(super) fn rate_limit_errors(yaml: &str) -> Vec<(String, String)> {
    errors(&[("f.yaml", yaml)], false)
        .into_iter()
        .map(|(_, path, message)| (path.replace("descriptors[0].rate_limit.", ""), message))
        .collect()
}

/// Asserts `yaml`, as file `f.yaml`, gives exactly one error, and returns `(path, message)`.
fn only(yaml: &str) -> (String, String) {
    let mut all = errors(&[("f.yaml", yaml)], false);
    assert_eq!(all.len(), 1, "{all:?}");
    let (file, path, message) = all.remove(0);
    assert_eq!(file, "f.yaml");
    (path, message)
}

fn is(yaml: &str, path: &str, message: &str) {
    assert_eq!(
        only(yaml),
        (path.to_owned(), message.to_owned()),
        "for:\n{yaml}"
    );
}

/// A one-descriptor file around `body` (indented as the descriptor's fields).
fn desc(body: &str) -> String {
    format!("domain: d\ndescriptors:\n  - key: k\n{body}")
}

const UNMARSHAL: &str = "error loading config file: yaml: unmarshal errors: ";

#[test]
fn yaml_syntax_error_aborts_only_that_file() {
    is(
        "'''",
        "",
        "error loading config file: found unexpected end of stream at line 1 column 4, while scanning a quoted scalar",
    );
}

#[test]
fn non_map_top_level() {
    is(
        "a",
        "",
        &format!("{UNMARSHAL}cannot unmarshal !!str `a` into map[interface {{}}]interface {{}}"),
    );
}

#[test]
fn unknown_keys() {
    is(
        &desc("    ratelimit: {unit: second}\n"),
        "descriptors[0].ratelimit",
        "config error, unknown key 'ratelimit' (did you mean `rate_limit`?)",
    );
    is(
        &desc("    rate_limit: {unit: second, requestsperunit: 5}\n"),
        "descriptors[0].rate_limit.requestsperunit",
        "config error, unknown key 'requestsperunit' (did you mean `requests_per_unit`?)",
    );
    is(
        &desc("    rate_limt: {unit: second}\n"),
        "descriptors[0].rate_limt",
        "config error, unknown key 'rate_limt' (did you mean `rate_limit`?)",
    );
    // Nothing close: no guess.
    is(
        &desc("    colour: red\n"),
        "descriptors[0].colour",
        "config error, unknown key 'colour'",
    );
}

#[test]
fn non_string_key() {
    is(
        &desc("    0.25: x\n"),
        "descriptors[0]",
        "config error, key is not of type string: 0.25",
    );
}

#[test]
fn list_of_non_maps() {
    let all = errors(&[("f.yaml", "domain: d\ndescriptors: [a, b, c]\n")], false);
    let text = "config error, yaml file contains list of type other than map: ";
    let want: Vec<(String, String, String)> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, v)| {
            (
                "f.yaml".into(),
                format!("descriptors[{i}]"),
                format!("{text}{v}"),
            )
        })
        .collect();
    assert_eq!(all, want);
}

#[test]
fn float_leaf_is_an_error_checking_config() {
    is(
        &desc("    rate_limit: {unit: second, requests_per_unit: 1.5}\n"),
        "descriptors[0].rate_limit.requests_per_unit",
        "error checking config",
    );
}

#[test]
fn type_mismatches_are_unmarshal_errors() {
    is(
        &desc("    rate_limit: {unit: second, requests_per_unit: -1}\n"),
        "descriptors[0].rate_limit.requests_per_unit",
        &format!("{UNMARSHAL}field requests_per_unit: cannot unmarshal !!int `-1` into uint32"),
    );
    is(
        &desc("    rate_limit: {unit: second, requests_per_unit: 4294967296}\n"),
        "descriptors[0].rate_limit.requests_per_unit",
        &format!(
            "{UNMARSHAL}field requests_per_unit: cannot unmarshal !!int `4294967296` into uint32"
        ),
    );
    is(
        &desc("    rate_limit: [{unit: second}]\n"),
        "descriptors[0].rate_limit",
        &format!("{UNMARSHAL}field rate_limit: cannot unmarshal !!seq into config.YamlRateLimit"),
    );
    is(
        &desc("    shadow_mode: maybe\n"),
        "descriptors[0].shadow_mode",
        &format!("{UNMARSHAL}field shadow_mode: cannot unmarshal !!str `maybe` into bool"),
    );
    is(
        "domain: {domain: b}\n",
        "domain",
        &format!("{UNMARSHAL}field domain: cannot unmarshal !!map into string"),
    );
}

#[test]
fn empty_domain_and_empty_file() {
    is(
        "domain: \"\"\n",
        "domain",
        "config file cannot have empty domain",
    );
    is("", "domain", "config file cannot have empty domain");
}

#[test]
fn duplicate_domain_names_both_files() {
    let all = errors(
        &[("a.yaml", "domain: x\n"), ("b.yaml", "domain: x\n")],
        false,
    );
    assert_eq!(
        all,
        [(
            "b.yaml".into(),
            "domain".into(),
            "duplicate domain 'x' in config file (already defined in a.yaml)".into()
        )]
    );
}

#[test]
fn empty_descriptor_key() {
    is(
        "domain: d\ndescriptors:\n  - value: v\n",
        "descriptors[0].key",
        "descriptor has empty key",
    );
}

#[test]
fn duplicate_composite_keys() {
    let yaml = "domain: test-domain\ndescriptors:\n  - {key: key1, value: value1}\n  - {key: key1, value: value1}\n";
    is(
        yaml,
        "descriptors[1]",
        "duplicate descriptor composite key 'test-domain.key1_value1'",
    );
    // Go's `_` join makes `a`/`b_c` and `a_b`/`c` the same composite key.
    let yaml = "domain: d\ndescriptors:\n  - {key: a, value: b_c}\n  - {key: a_b, value: c}\n";
    is(
        yaml,
        "descriptors[1]",
        "duplicate descriptor composite key 'd.a_b_c'",
    );
}

#[test]
fn invalid_units() {
    is(
        &desc("    rate_limit: {unit: foo, requests_per_unit: 1}\n"),
        "descriptors[0].rate_limit.unit",
        "invalid rate limit unit 'foo' (one of second, minute, hour, day, week, month, year, in any case)",
    );
    is(
        &desc("    rate_limit: {requests_per_unit: 1}\n"),
        "descriptors[0].rate_limit.unit",
        "invalid rate limit unit '' (the unit is missing; one of second, minute, hour, day, week, month, year, in any case)",
    );
    is(
        &desc("    rate_limit: {unit: unknown, requests_per_unit: 1}\n"),
        "descriptors[0].rate_limit.unit",
        "invalid rate limit unit 'unknown' (one of second, minute, hour, day, week, month, year, in any case)",
    );
    is(
        &desc("    rate_limit: {unit: minutes, requests_per_unit: 1}\n"),
        "descriptors[0].rate_limit.unit",
        "invalid rate limit unit 'minutes' (one of second, minute, hour, day, week, month, year, in any case)",
    );
}

#[test]
fn unlimited_with_a_unit() {
    is(
        &desc("    rate_limit: {unlimited: true, unit: second}\n"),
        "descriptors[0].rate_limit.unit",
        "should not specify rate limit unit when unlimited",
    );
    // An invalid unit next to `unlimited` is not checked, as in Go.
    assert!(
        run(
            &[("f", &desc("    rate_limit: {unlimited: true, unit: foo}\n"))],
            false
        )
        .is_ok()
    );
}

#[test]
fn bad_replaces() {
    is(
        &desc("    rate_limit: {unit: second, name: n, replaces: [{name: \"\"}]}\n"),
        "descriptors[0].rate_limit.replaces[0]",
        "should not have an empty replaces entry",
    );
    is(
        &desc("    rate_limit: {unit: second, name: n, replaces: [{name: m}, {name: n}]}\n"),
        "descriptors[0].rate_limit.replaces[1].name",
        "replaces should not contain name of same descriptor",
    );
}

#[test]
fn share_threshold_needs_a_wildcard() {
    is(
        &desc("    value: files\n    share_threshold: true\n"),
        "descriptors[0].share_threshold",
        "share_threshold can only be used with wildcard values (containing '*'), but found key 'k_files'",
    );
}

#[test]
fn bad_metadata() {
    is(
        &desc("    metadata: {1: x}\n"),
        "descriptors[0].metadata",
        "error parsing metadata: invalid key 1: keys must be strings",
    );
    is(
        &desc("    metadata: {x: .nan}\n"),
        "descriptors[0].metadata",
        "error parsing metadata: invalid number NaN",
    );
    is(
        &desc("    metadata: text\n"),
        "descriptors[0].metadata",
        &format!(
            "{UNMARSHAL}field metadata: cannot unmarshal !!str `text` into map[string]interface {{}}"
        ),
    );
}
