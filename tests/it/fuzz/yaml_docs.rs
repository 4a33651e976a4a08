//! Domain YAML documents for the YAML target: descriptor trees whose fields are valid, wrongly
//! typed or out of range (odd scalars, tags, unknown keys), written in block or flow style.

use proptest::prelude::*;

use crate::fuzz::inputs::{nasty_string, number_text, present};

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
                            write_pairs(out, pairs, indent + 2, true);
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

/// A scalar of the wrong kind, or in an odd spelling: every shape yaml.v2 and `serde_yaml` differ on.
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
                Y::Map(present(named))
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
            present(named)
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

pub(super) fn document() -> impl Strategy<Value = String> {
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
