//! Domain YAML as an operator writes it, through the loader (size cap and alias budget), then
//! validation and compilation. Documents are generated as trees of descriptors whose fields are
//! valid, wrongly typed or out of range, written in block or flow style with tags, anchors,
//! aliases and merge keys, then often mutated as text. Whatever the file, the load ends in a
//! configuration or in errors that each name the file; the same files always give the same result;
//! and a valid document compiles to exactly the limits its descriptors declare.

use std::collections::BTreeSet;

use proptest::prelude::*;
use ratelimitd_core::config::{CompileOptions, ConfigFile, LoadOptions, compile, load_path};

use crate::fuzz::inputs::{edits, mutate};
use crate::fuzz::yaml_docs::document;

/// Anchors, aliases and merge keys: shared rate limits, a merged descriptor, an alias in a
/// key's place, a self-reference.
fn aliased() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "domain: d\nlimits: &rl {unit: minute, requests_per_unit: 5}\ndescriptors:\n  - {key: a, rate_limit: *rl}\n",
        "domain: d\ndescriptors:\n  - &base {key: a, rate_limit: {unit: second, requests_per_unit: 1}}\n  - <<: *base\n    key: b\n",
        "domain: d\ndescriptors:\n  - {key: a, rate_limit: &rl {unit: second, requests_per_unit: 1}}\n  - {key: b, rate_limit: *rl}\n",
        "domain: &d d\ndescriptors:\n  - {key: *d}\n",
        "domain: d\ndescriptors: &list\n  - {key: a, descriptors: *list}\n",
        "domain: d\ndescriptors:\n  - <<: [{key: a}, {value: b}]\n    rate_limit: {unit: hour, requests_per_unit: 3}\n",
        "domain: d\ndescriptors:\n  - <<: 5\n",
        "domain: d\n*x : y\n",
    ])
    .prop_map(str::to_string)
}

/// An alias bomb: `depth` anchors, each a list of `width` aliases of the previous one.
fn bomb() -> impl Strategy<Value = (String, u32)> {
    (2usize..12, 1usize..12).prop_map(|(width, depth)| {
        let mut s = String::from("a0: &a0 [x]\n");
        for i in 1..=depth {
            let items = vec![format!("*a{}", i - 1); width].join(", ");
            s.push_str(&format!("a{i}: &a{i} [{items}]\n"));
        }
        s.push_str("domain: d\n");
        (
            s,
            (width as f64).powi(depth as i32).min(f64::from(u32::MAX)) as u32,
        )
    })
}

/// Text: a document, mutated or not, or an aliased one.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => document(),
        3 => (document(), edits(4)).prop_map(|(d, e)| String::from_utf8_lossy(&mutate(d.into_bytes(), &e)).into_owned()),
        1 => aliased(),
        1 => deep_yaml(),
    ]
}

/// Descriptors (or metadata) nested up to 300 levels, past `serde_yaml`'s recursion limit (128).
fn deep_yaml() -> impl Strategy<Value = String> {
    (1usize..300, any::<bool>()).prop_map(|(depth, metadata)| {
        let (open, close) = if metadata {
            ("{m: ", "}")
        } else {
            (
                "[{key: a, rate_limit: {unit: second, requests_per_unit: 1}, descriptors: ",
                "}]",
            )
        };
        let inner = format!("{}[]{}", open.repeat(depth), close.repeat(depth));
        if metadata {
            format!("domain: d\ndescriptors: [{{key: a, metadata: {inner}}}]\n")
        } else {
            format!("domain: d\ndescriptors: {inner}\n")
        }
    })
}

fn file(name: &str, contents: String) -> ConfigFile {
    ConfigFile {
        name: name.to_string(),
        contents,
    }
}

/// Compiles `files` twice: each error names its file and has a message, and both runs agree.
fn compile_checked(files: &[ConfigFile], merge: bool) -> Result<(), TestCaseError> {
    let opts = CompileOptions {
        merge_domains: merge,
        ..CompileOptions::default()
    };
    let first = compile(files, &opts);
    if let Err(errors) = &first {
        prop_assert!(!errors.0.is_empty());
        for e in &errors.0 {
            prop_assert!(
                files.iter().any(|f| f.name == e.file),
                "error names no file: {e}"
            );
            prop_assert!(!e.message.is_empty(), "empty message at {}", e.path);
        }
    }
    let second = compile(files, &opts);
    match (&first, &second) {
        (Ok(a), Ok(b)) => {
            let keys = |c: &ratelimitd_core::config::RateLimitConfig| {
                c.limits()
                    .iter()
                    .map(|l| l.full_key.clone())
                    .collect::<Vec<_>>()
            };
            prop_assert_eq!(keys(a), keys(b));
        }
        (Err(a), Err(b)) => prop_assert_eq!(a, b),
        _ => prop_assert!(false, "two compiles of the same files disagree"),
    }
    Ok(())
}

/// A valid descriptor tree (unique keys per level) and the full keys of its limits.
fn valid_tree() -> impl Strategy<Value = (String, BTreeSet<String>)> {
    let limit = (
        prop::sample::select(vec![
            "second", "minute", "hour", "day", "week", "month", "year",
        ]),
        0u32..100_000,
        prop::sample::select(vec![
            "fixed_window",
            "token_bucket",
            "leaky_bucket",
            "sliding_window",
            "sliding_log",
        ]),
    );
    let node = (prop::option::of("[a-z]{1,4}"), prop::option::of(limit));
    prop::collection::vec((node.clone(), prop::collection::vec(node, 0..3)), 1..5).prop_map(
        |tops| {
            let mut yaml = String::from("domain: d\ndescriptors:\n");
            let mut keys = BTreeSet::new();
            let rl = |l: &Option<(&str, u32, &str)>| match l {
                Some((unit, n, alg)) => format!(
                    ", rate_limit: {{unit: {unit}, requests_per_unit: {n}, algorithm: {alg}}}"
                ),
                None => String::new(),
            };
            for (i, ((value, limit), children)) in tops.iter().enumerate() {
                let composite = match value {
                    Some(v) => format!("k{i}_{v}"),
                    None => format!("k{i}"),
                };
                let value_field = value
                    .as_ref()
                    .map_or(String::new(), |v| format!(", value: {v}"));
                yaml.push_str(&format!("  - {{key: k{i}{value_field}{}", rl(limit)));
                if limit.is_some() {
                    keys.insert(format!("d.{composite}"));
                }
                if children.is_empty() {
                    yaml.push_str("}\n");
                    continue;
                }
                yaml.push_str(", descriptors: [");
                for (j, (cv, cl)) in children.iter().enumerate() {
                    let cvf = cv
                        .as_ref()
                        .map_or(String::new(), |v| format!(", value: {v}"));
                    yaml.push_str(&format!("{{key: c{j}{cvf}{}}}, ", rl(cl)));
                    if cl.is_some() {
                        let c = cv.as_ref().map_or(format!("c{j}"), |v| format!("c{j}_{v}"));
                        keys.insert(format!("d.{composite}.{c}"));
                    }
                }
                yaml.push_str("]}\n");
            }
            (yaml, keys)
        },
    )
}

proptest! {
    #![proptest_config(crate::fuzz::cases(256))]

    #[test]
    fn any_file_compiles_or_reports_errors_naming_it(a in text(), b in text(), merge in any::<bool>()) {
        compile_checked(&[file("a.yaml", a), file("b.yaml", b)], merge)?;
    }

    #[test]
    fn a_valid_file_compiles_to_the_limits_it_declares((yaml, keys) in valid_tree()) {
        let compiled = compile(&[file("v.yaml", yaml.clone())], &CompileOptions::default())
            .map_err(|e| TestCaseError::fail(format!("{e}\n{yaml}")))?;
        let got: BTreeSet<String> = compiled.limits().iter().map(|l| l.full_key.clone()).collect();
        prop_assert_eq!(got, keys, "{}", yaml);
    }

    #[test]
    fn the_loader_reads_or_refuses_naming_the_file(contents in prop_oneof![3 => text(), 1 => bomb().prop_map(|b| b.0)]) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("fuzz.yaml");
        std::fs::write(&path, &contents).expect("written");
        match load_path(&path, &LoadOptions::default()) {
            Ok(files) => compile_checked(&files, false)?,
            Err(e) => prop_assert!(e.to_string().contains("fuzz.yaml"), "{e}"),
        }
    }

    #[test]
    fn an_alias_bomb_is_refused_before_it_is_built((contents, nodes) in bomb()) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("bomb.yaml");
        std::fs::write(&path, &contents).expect("written");
        let loaded = load_path(&path, &LoadOptions::default());
        // Far past the budget (a million nodes): refused, naming the reason.
        if nodes > 4_000_000 {
            let e = loaded.err().ok_or_else(|| TestCaseError::fail(format!("{nodes} nodes loaded")))?;
            prop_assert!(e.to_string().contains("alias"), "{e}");
        } else if let Ok(files) = loaded {
            compile_checked(&files, false)?;
        }
    }
}
