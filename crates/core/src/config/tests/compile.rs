//! Compiling several files and several errors at once: error collection, the bad-file-among-good
//! rule, domain merging, the lenient forms Go accepts, and a no-panic fuzz test.

use super::validate::{errors, run};
use crate::config::*;

#[test]
fn one_file_reports_all_its_errors() {
    let yaml = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: foo}\n  - key: \"\"\n  - key: b\n    bogus: 1\n";
    let all = errors(&[("f.yaml", yaml)], false);
    let got: Vec<(&str, &str)> = all
        .iter()
        .map(|(_, p, m)| (p.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("descriptors[2].bogus", "config error, unknown key 'bogus'"),
            (
                "descriptors[0].rate_limit.unit",
                "invalid rate limit unit 'foo' (one of second, minute, hour, day, week, month, year, in any case)"
            ),
            ("descriptors[1].key", "descriptor has empty key"),
        ]
    );
    assert!(all.iter().all(|(f, _, _)| f == "f.yaml"));
}

#[test]
fn a_bad_file_fails_the_load_and_only_it_is_named() {
    let good =
        "domain: good\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n";
    let all = errors(
        &[
            ("a.yaml", good),
            ("b.yaml", "'''"),
            ("c.yaml", "domain: other\n"),
        ],
        false,
    );
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].0, "b.yaml");
}

#[test]
fn merge_domains_adds_top_level_descriptors_and_rejects_repeats() {
    let a = (
        "a.yaml",
        "domain: x\ndescriptors: [{key: k1, rate_limit: {unit: second}}]\n",
    );
    let b = (
        "b.yaml",
        "domain: x\ndescriptors: [{key: k2, rate_limit: {unit: minute}}]\n",
    );
    let c = run(&[a, b], true).expect("merges");
    assert_eq!(c.domain_count(), 1);
    assert_eq!(c.limits().len(), 2);
    let again = ("c.yaml", "domain: x\ndescriptors: [{key: k1}]\n");
    let all = errors(&[a, b, again], true);
    assert_eq!(
        all,
        [(
            "c.yaml".into(),
            "descriptors[0]".into(),
            "duplicate descriptor composite key 'x.k1'".into()
        )]
    );
}

#[test]
fn lenient_forms_go_accepts() {
    let yaml = "domain: d\ndescriptors:\n  - key: k\n    value: 123\n    unit: ignored-here\n    rate_limit: {unit: WEEK, requests_per_unit: 3}\n  - key: k\n    value: true\n    rate_limit: null\n    descriptors: null\n  - key: y\n    shadow_mode: yes\n    rate_limit: {unit: Second}\n---\nnot: read\n";
    let c = run(&[("f", yaml)], false).expect("valid");
    let keys: Vec<&str> = c.limits().iter().map(|l| l.full_key.as_str()).collect();
    assert_eq!(keys, ["d.k_123", "d.y"]);
    assert_eq!(c.limits()[0].unit, Some(Unit::Week));
    assert!(c.limits()[1].shadow_mode);
    assert!(
        c.domain("d")
            .expect("d")
            .descriptors()
            .any(|n| n.value == "true")
    );
}

mod fuzz {
    use super::run;
    use proptest::prelude::*;

    /// YAML-ish text: config keywords, punctuation and indentation in random order.
    fn yamlish() -> impl Strategy<Value = String> {
        let token = prop::sample::select(vec![
            "domain: ",
            "descriptors:",
            "- key: ",
            "value: ",
            "rate_limit:",
            "unit: ",
            "second",
            "requests_per_unit: ",
            "-1",
            "1.5",
            "4294967296",
            "unlimited: true",
            "replaces:",
            "- name: ",
            "metadata:",
            "share_threshold: true",
            "*",
            "a",
            "_",
            "\n",
            "  ",
            "    ",
            "[",
            "]",
            "{",
            "}",
            ",",
            "'",
            "\"",
            "&x ",
            "*x",
            "<<: ",
            "!tag ",
            "~",
            "? ",
            ": ",
            "é",
        ]);
        prop::collection::vec(token, 0..60).prop_map(|t| t.concat())
    }

    proptest! {
        #[test]
        fn compile_never_panics(a in yamlish(), b in yamlish(), merge in any::<bool>()) {
            let _ = run(&[("a", &a), ("b", &b)], merge);
        }

        #[test]
        fn compile_never_panics_on_arbitrary_text(s in ".{0,200}") {
            let _ = run(&[("s", &s)], false);
        }
    }
}

#[test]
fn alias_expansion_is_bounded() {
    // "Billion laughs": each level doubles ten-fold; serde_yaml refuses past its repetition limit.
    let mut yaml = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let prev = i - 1;
        yaml.push_str(&format!(
            "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    let all = errors(&[("bomb.yaml", &yaml)], false);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].1, "");
    assert!(
        all[0].2.starts_with("error loading config file: "),
        "{}",
        all[0].2
    );
}
