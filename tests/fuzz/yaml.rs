//! Domain YAML as an operator writes it, through the loader (size cap and alias budget), then
//! validation and compilation. Documents are generated as trees of descriptors whose fields are
//! valid, wrongly typed or out of range, written in block or flow style with tags, anchors,
//! aliases and merge keys, then often mutated as text. Whatever the file, the load ends in a
//! configuration or in errors that each name the file; the same files always give the same result;
//! and a valid document compiles to exactly the limits its descriptors declare.

use std::collections::BTreeSet;

use proptest::prelude::*;
use ratelimitd::config::{CompileOptions, ConfigFile, compile, load_path};

use crate::inputs::{edits, mutate, nasty_string, number_text};

/// A YAML scalar or collection as written.
#[derive(Debug, Clone)]
enum Y {
    Raw(String),
    Seq(Vec<Y>),
    Map(Vec<(String, Y)>),
}

impl Y {
    fn s(s: &str) -> Y {
        Y::Raw(quote(s))
    }

    /// Block style at `indent`, or flow style.
    fn write(&self, out: &mut String, indent: usize, flow: bool) {
        match self {
            Y::Raw(r) => out.push_str(r),
            Y::Seq(items) if flow || items.is_empty() => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write(out, indent, true);
                }
                out.push(']');
            }
            Y::Map(pairs) if flow || pairs.is_empty() => {
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(k);
                    out.push_str(": ");
                    v.write(out, indent, true);
                }
                out.push('}');
            }
            Y::Seq(items) => {
                for v in items {
                    out.push('\n');
                    out.push_str(&" ".repeat(indent));
                    out.push_str("- ");
                    match v {
                        Y::Map(pairs) if !pairs.is_empty() => {
                            write_pairs(out, pairs, indent + 2, true)
                        }
                        _ => v.write(out, indent + 2, false),
                    }
                }
            }
            Y::Map(pairs) => write_pairs(out, pairs, indent, false),
        }
    }
}

/// `key: value` lines; the first one continues the current line when `inline` (after `- `).
fn write_pairs(out: &mut String, pairs: &[(String, Y)], indent: usize, inline: bool) {
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 || !inline {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(k);
        out.push(':');
        match v {
            Y::Raw(_) => out.push(' '),
            Y::Seq(s) if s.is_empty() => out.push(' '),
            Y::Map(m) if m.is_empty() => out.push(' '),
            _ => {}
        }
        v.write(out, indent + 2, false);
    }
}

/// A double-quoted YAML string.
fn quote(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// A scalar of the wrong kind, or in an odd spelling: every shape yaml.v2 and serde_yaml differ on.
fn odd_scalar() -> impl Strategy<Value = Y> {
    prop_oneof![
        number_text().prop_map(Y::Raw),
        nasty_string().prop_map(|s| Y::Raw(quote(&s))),
        prop::sample::select(vec![
            "~",
            "null",
            "true",
            "no",
            "yes",
            "On",
            "0x1F",
            "0o17",
            "1_000",
            ".inf",
            "-.inf",
            ".nan",
            "!!str 5",
            "!!int \"7\"",
            "!!binary aGVsbG8=",
            "!custom minute",
            "2001-12-14t21:59:43.10-05:00",
            "\"\\u0000\"",
            "'single ''quoted'''",
            "|\n  literal",
            ">\n  folded",
            "*undefined",
        ])
        .prop_map(|s| Y::Raw(s.to_string())),
        Just(Y::Seq(vec![Y::s("a")])),
        Just(Y::Map(vec![("k".into(), Y::s("v"))])),
    ]
}

/// The right kind most of the time, else an odd scalar.
fn or_odd(right: impl Strategy<Value = Y> + 'static) -> BoxedStrategy<Y> {
    prop_oneof![5 => right, 1 => odd_scalar()].boxed()
}

fn rate_limit() -> BoxedStrategy<Y> {
    let unit = prop::sample::select(vec![
        "second",
        "minute",
        "hour",
        "day",
        "week",
        "month",
        "year",
        "SECOND",
        "fortnight",
        "",
    ]);
    let algorithm = prop::sample::select(vec![
        "fixed_window",
        "token_bucket",
        "leaky_bucket",
        "sliding_window",
        "sliding_log",
        "gcra",
    ]);
    let mode = prop::sample::select(vec!["error", "allow", "deny", "local"]);
    let num = || or_odd(number_text().prop_map(Y::Raw));
    (
        prop::option::weighted(0.9, or_odd(unit.prop_map(Y::s))),
        prop::option::weighted(0.9, num()),
        prop::option::weighted(
            0.1,
            or_odd(any::<bool>().prop_map(|b| Y::Raw(b.to_string()))),
        ),
        prop::option::weighted(0.2, or_odd("[a-z_]{1,6}".prop_map(|s| Y::s(&s)))),
        prop::option::weighted(
            0.1,
            or_odd(
                prop::collection::vec(
                    "[a-z_]{1,6}".prop_map(|n| Y::Map(vec![("name".into(), Y::s(&n))])),
                    0..3,
                )
                .prop_map(Y::Seq),
            ),
        ),
        prop::option::weighted(0.3, or_odd(algorithm.prop_map(Y::s))),
        prop::option::weighted(0.2, num()),
        prop::option::weighted(0.2, num()),
        prop::option::weighted(0.1, num()),
        prop::option::weighted(0.1, or_odd(mode.prop_map(Y::s))),
        prop::option::weighted(0.1, num()),
        prop::option::weighted(0.03, odd_scalar()),
    )
        .prop_map(
            |(
                unit,
                rpu,
                unlimited,
                name,
                replaces,
                alg,
                burst,
                mult,
                lease,
                mode,
                share,
                extra,
            )| {
                let named = [
                    ("unit", unit),
                    ("requests_per_unit", rpu),
                    ("unlimited", unlimited),
                    ("name", name),
                    ("replaces", replaces),
                    ("algorithm", alg),
                    ("burst", burst),
                    ("unit_multiplier", mult),
                    ("lease", lease),
                    ("failure_mode", mode),
                    ("local_share", share),
                    ("colour", extra),
                ];
                Y::Map(
                    named
                        .into_iter()
                        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
                        .collect(),
                )
            },
        )
        .boxed()
}

fn descriptor() -> impl Strategy<Value = Y> {
    let flag = || {
        prop::option::weighted(
            0.05,
            or_odd(any::<bool>().prop_map(|b| Y::Raw(b.to_string()))),
        )
    };
    let leaf = (
        or_odd(prop_oneof![4 => "[a-z_]{1,6}", 1 => nasty_string()].prop_map(|s| Y::s(&s))),
        prop::option::weighted(
            0.5,
            or_odd(prop_oneof![3 => "[a-z]{0,4}\\*?", 1 => nasty_string()].prop_map(|s| Y::s(&s))),
        ),
        prop::option::weighted(0.7, or_odd(rate_limit())),
        prop::option::weighted(
            0.1,
            or_odd(prop::collection::vec(rate_limit(), 0..3).prop_map(Y::Seq)),
        ),
        flag(),
        flag(),
        flag(),
        prop::option::weighted(
            0.05,
            Just(Y::Map(vec![
                ("team".into(), Y::s("x")),
                ("n".into(), Y::Raw("1.5".into())),
            ])),
        ),
    )
        .prop_map(|(key, value, rl, rls, shadow, share, metric, metadata)| {
            let named = [
                ("key", Some(key)),
                ("value", value),
                ("rate_limit", rl),
                ("rate_limits", rls),
                ("shadow_mode", shadow),
                ("share_threshold", share),
                ("detailed_metric", metric),
                ("metadata", metadata),
            ];
            named
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
                .collect::<Vec<_>>()
        });
    leaf.prop_map(Y::Map).prop_recursive(3, 24, 3, |inner| {
        (
            prop::collection::vec(inner, 0..3),
            prop::sample::select(vec![0usize, 1]),
        )
            .prop_map(|(children, at)| {
                let mut pairs = vec![(
                    "key".to_string(),
                    Y::s(if at == 0 { "parent" } else { "p2" }),
                )];
                pairs.push(("descriptors".into(), Y::Seq(children)));
                Y::Map(pairs)
            })
    })
}

fn document() -> impl Strategy<Value = String> {
    (
        prop::option::weighted(
            0.95,
            or_odd(
                prop_oneof![4 => Just("d".to_string()), 1 => nasty_string()].prop_map(|s| Y::s(&s)),
            ),
        ),
        or_odd(prop::collection::vec(descriptor(), 0..4).prop_map(Y::Seq)),
        any::<bool>(),
        prop::option::weighted(
            0.1,
            prop::sample::select(vec!["---\n", "%YAML 1.2\n---\n", "# comment\n", "\u{feff}"]),
        ),
        prop::option::weighted(
            0.1,
            prop::sample::select(vec!["\n---\ndomain: second\n", "\n...\n", "\n: orphan\n"]),
        ),
    )
        .prop_map(|(domain, descriptors, flow, head, tail)| {
            let mut pairs = Vec::new();
            if let Some(d) = domain {
                pairs.push(("domain".to_string(), d));
            }
            pairs.push(("descriptors".to_string(), descriptors));
            let mut out = head.unwrap_or("").to_string();
            let body = Y::Map(pairs);
            if flow {
                body.write(&mut out, 0, true);
            } else {
                let mut block = String::new();
                body.write(&mut block, 0, false);
                out.push_str(block.trim_start_matches('\n'));
            }
            out.push_str(tail.unwrap_or(""));
            out
        })
}

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

/// Descriptors (or metadata) nested up to 300 levels, past serde_yaml's recursion limit (128).
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
            let keys = |c: &ratelimitd::config::RateLimitConfig| {
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
    #![proptest_config(crate::cases(256))]

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
        match load_path(&path, false) {
            Ok(files) => compile_checked(&files, false)?,
            Err(e) => prop_assert!(e.to_string().contains("fuzz.yaml"), "{e}"),
        }
    }

    #[test]
    fn an_alias_bomb_is_refused_before_it_is_built((contents, nodes) in bomb()) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("bomb.yaml");
        std::fs::write(&path, &contents).expect("written");
        let loaded = load_path(&path, false);
        // Far past the budget (a million nodes): refused, naming the reason.
        if nodes > 4_000_000 {
            let e = loaded.err().ok_or_else(|| TestCaseError::fail(format!("{nodes} nodes loaded")))?;
            prop_assert!(e.to_string().contains("alias"), "{e}");
        } else if let Ok(files) = loaded {
            compile_checked(&files, false)?;
        }
    }
}
