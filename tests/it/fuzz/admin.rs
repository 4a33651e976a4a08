//! Admin API input: `POST /v1/overrides` and `PUT /v1/policies/{id}` bodies and the
//! `/v1/violations` query (with its cursor). Whatever arrives is accepted or refused with a list
//! of field errors, never a panic; a valid body is accepted with exactly what it said; an
//! accepted rule compiles with the configuration validator as the reload will compile it, and
//! its JSON form (what `GET` answers) is accepted again as the same rule.

use std::collections::HashMap;

use proptest::prelude::*;
use ratelimitd::testing::parse_override;
use ratelimitd::testing::{Cursor, ViolationQuery};
use ratelimitd::testing::{parse_rule, to_files};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::config::{self, CompileOptions, Unit};

use crate::fuzz::inputs::{
    J, any_json, deep_nesting, edits, mutate, nasty_string, number_text, present,
};

/// The service clock of every case: 2023-11-14T22:13:20Z.
const NOW: u64 = 1_700_000_000;

fn field(right: BoxedStrategy<J>) -> BoxedStrategy<J> {
    prop_oneof![5 => right, 1 => any_json()].boxed()
}

fn unit_name() -> BoxedStrategy<String> {
    prop_oneof![
        4 => prop::sample::select(vec!["second", "minute", "hour", "day", "week", "month", "year", "SECOND", "Minute"]).prop_map(str::to_string),
        1 => nasty_string(),
    ]
    .boxed()
}

/// RFC 3339 texts at the parser's edges: past, future, far future, odd offsets, leap seconds.
fn time_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "2030-01-01T00:00:00Z",
            "2023-11-14T22:13:20Z",
            "2023-11-14T22:13:21+00:00",
            "9999-12-31T23:59:59.999999999Z",
            "2030-06-30T23:59:60Z",
            "2030-01-01T00:00:00+23:59",
            "2030-01-01T00:00:00-23:59",
            "1969-12-31T23:59:59Z",
            "0000-01-01T00:00:00Z",
            "2030-02-30T00:00:00Z",
            "2030-01-01 00:00:00Z",
            "2030-01-01T00:00:00",
            "tomorrow",
        ]).prop_map(str::to_string),
        1 => nasty_string(),
    ]
    .boxed()
}

fn path_entry() -> BoxedStrategy<J> {
    prop_oneof![
        6 => (field(nasty_string().prop_map(J::Str).boxed()), prop::option::of(field(nasty_string().prop_map(J::Str).boxed())))
            .prop_map(|(k, v)| {
                let mut pairs = vec![("key".to_string(), k)];
                if let Some(v) = v {
                    pairs.push(("value".to_string(), v));
                }
                J::Obj(pairs)
            }),
        1 => any_json(),
    ]
    .boxed()
}

fn path() -> BoxedStrategy<J> {
    prop_oneof![
        8 => prop::collection::vec(path_entry(), 0..5).prop_map(J::Arr),
        1 => (30usize..36).prop_map(|n| J::Arr(vec![J::obj([("key", J::s("k"))]); n])),
        1 => any_json(),
    ]
    .boxed()
}

fn override_body() -> impl Strategy<Value = J> {
    (
        prop::option::weighted(0.9, field(nasty_string().prop_map(J::Str).boxed())),
        prop::option::weighted(0.9, path()),
        prop::option::weighted(0.9, field(number_text().prop_map(J::Num).boxed())),
        prop::option::weighted(0.9, field(unit_name().prop_map(J::Str).boxed())),
        prop::option::weighted(0.9, field(time_text().prop_map(J::Str).boxed())),
        prop::option::weighted(
            0.5,
            field(
                prop_oneof![
                    nasty_string(),
                    (1020usize..1030).prop_map(|n| "r".repeat(n))
                ]
                .prop_map(J::Str)
                .boxed(),
            ),
        ),
        prop::option::weighted(0.05, any_json()),
    )
        .prop_map(|(domain, descriptor, rpu, unit, until, reason, extra)| {
            let named = [
                ("domain", domain),
                ("descriptor", descriptor),
                ("requests_per_unit", rpu),
                ("unit", unit),
                ("valid_until", until),
                ("reason", reason),
                ("extra", extra),
            ];
            J::Obj(present(named))
        })
}

/// A `rate_limit` object with the YAML fields, each maybe wrong.
fn rate_limit() -> BoxedStrategy<J> {
    let algorithm = prop::sample::select(vec![
        "fixed_window",
        "token_bucket",
        "leaky_bucket",
        "sliding_window",
        "sliding_log",
        "gcra",
    ]);
    let mode = prop::sample::select(vec!["error", "allow", "deny", "local", "panic"]);
    let num = || field(number_text().prop_map(J::Num).boxed());
    (
        prop::option::weighted(0.9, field(unit_name().prop_map(J::Str).boxed())),
        prop::option::weighted(0.9, num()),
        prop::option::weighted(0.3, field(algorithm.prop_map(J::s).boxed())),
        prop::option::weighted(0.2, num()),
        prop::option::weighted(0.2, num()),
        prop::option::weighted(0.1, num()),
        prop::option::weighted(0.2, field(mode.prop_map(J::s).boxed())),
        prop::option::weighted(0.1, num()),
        prop::option::weighted(0.1, field(any::<bool>().prop_map(J::Bool).boxed())),
        prop::option::weighted(0.2, field(nasty_string().prop_map(J::Str).boxed())),
        prop::option::weighted(0.05, any_json()),
    )
        .prop_map(
            |(unit, rpu, alg, burst, mult, lease, mode, share, unlimited, name, extra)| {
                let named = [
                    ("unit", unit),
                    ("requests_per_unit", rpu),
                    ("algorithm", alg),
                    ("burst", burst),
                    ("unit_multiplier", mult),
                    ("lease", lease),
                    ("failure_mode", mode),
                    ("local_share", share),
                    ("unlimited", unlimited),
                    ("name", name),
                    ("colour", extra),
                ];
                J::Obj(present(named))
            },
        )
        .boxed()
}

fn rule_body() -> impl Strategy<Value = J> {
    (
        prop::option::weighted(
            0.95,
            field(
                prop_oneof![3 => Just("api".to_string()), 1 => nasty_string()]
                    .prop_map(J::Str)
                    .boxed(),
            ),
        ),
        prop::option::weighted(0.95, path()),
        prop::option::weighted(0.95, field(rate_limit())),
        prop::option::weighted(0.3, field(any::<bool>().prop_map(J::Bool).boxed())),
    )
        .prop_map(|(domain, descriptor, rl, enabled)| {
            let named = [
                ("domain", domain),
                ("descriptor", descriptor),
                ("rate_limit", rl),
                ("enabled", enabled),
            ];
            J::Obj(present(named))
        })
}

fn rule_id() -> impl Strategy<Value = String> {
    prop_oneof![4 => "[a-zA-Z0-9._-]{1,16}", 1 => nasty_string(), 1 => (126usize..130).prop_map(|n| "i".repeat(n))]
}

fn bytes_of(doc: impl Strategy<Value = J> + 'static) -> impl Strategy<Value = Vec<u8>> {
    let doc = doc.boxed();
    prop_oneof![
        8 => doc.clone().prop_map(|j| j.text().into_bytes()),
        2 => (doc, edits(4)).prop_map(|(j, e)| mutate(j.text().into_bytes(), &e)),
        1 => deep_nesting().prop_map(String::into_bytes),
    ]
}

proptest! {
    #![proptest_config(crate::fuzz::cases(256))]

    #[test]
    fn override_bodies_are_accepted_or_refused_field_by_field(body in bytes_of(override_body())) {
        let now = Timestamp::from_secs(NOW);
        match parse_override(&body, now) {
            Ok(o) => {
                prop_assert!(o.valid_until > now);
                prop_assert!(!o.domain.is_empty() && !o.descriptor.is_empty() && o.descriptor.len() <= 32);
                prop_assert!(o.descriptor.iter().all(|e| !e.key.is_empty()));
                prop_assert!(o.reason.len() <= 1024);
            }
            Err(errors) => {
                prop_assert!(!errors.is_empty());
                prop_assert!(errors.iter().all(|e| !e.message.is_empty()), "{errors:?}");
            }
        }
    }

    #[test]
    fn a_valid_override_is_accepted_as_written(
        domain in "[a-z]{1,8}",
        entries in prop::collection::vec(("[a-z_]{1,8}", "\\PC{0,8}"), 1..=32),
        rpu in any::<u32>(),
        unit in prop::sample::select(Unit::ALL.to_vec()),
        ahead in 1u64..(100 * 365 * 86_400),
        reason in "\\PC{0,64}",
    ) {
        let until = Timestamp::from_secs(NOW + ahead);
        let body = J::obj([
            ("domain", J::s(domain.clone())),
            ("descriptor", J::Arr(entries.iter().map(|(k, v)| J::obj([("key", J::s(k.clone())), ("value", J::s(v.clone()))])).collect())),
            ("requests_per_unit", J::n(rpu)),
            ("unit", J::s(unit.as_str().to_ascii_lowercase())),
            ("valid_until", J::s(until.to_rfc3339())),
            ("reason", J::s(reason.clone())),
        ]);
        let o = parse_override(body.text().as_bytes(), Timestamp::from_secs(NOW))
            .map_err(|e| TestCaseError::fail(format!("refused: {e:?}")))?;
        prop_assert_eq!(o.domain, domain);
        let got: Vec<(String, String)> = o.descriptor.into_iter().map(|e| (e.key, e.value)).collect();
        prop_assert_eq!(got, entries);
        prop_assert_eq!(o.requests_per_unit, rpu);
        prop_assert_eq!(o.unit, unit);
        prop_assert_eq!(o.valid_until, until);
        prop_assert_eq!(o.reason, reason);
    }

    #[test]
    fn an_accepted_rule_compiles_and_round_trips(id in rule_id(), body in bytes_of(rule_body())) {
        match parse_rule(&id, &body) {
            Ok(rule) => {
                let enabled = ratelimitd::testing::Rule { enabled: true, ..rule.clone() };
                let compiled = config::compile(&to_files(&[enabled]), &CompileOptions::default());
                prop_assert!(compiled.is_ok(), "accepted but does not compile: {:?}", compiled.err());
                // What `GET` answers, less its read-only `id` (the URL carries it), is accepted
                // again as the same rule.
                let mut shown = rule.to_json();
                shown.as_object_mut().map(|o| o.remove("id"));
                let again = parse_rule(&id, shown.to_string().as_bytes());
                prop_assert_eq!(again, Ok(rule));
            }
            Err(errors) => {
                prop_assert!(!errors.is_empty());
                prop_assert!(errors.iter().all(|e| !e.message.is_empty()), "{errors:?}");
            }
        }
    }

    #[test]
    fn violation_queries_parse_or_name_each_bad_parameter(
        params in prop::collection::hash_map(
            prop_oneof![4 => prop::sample::select(vec!["domain", "client_key", "since", "until", "limit", "cursor"]).prop_map(str::to_string), 1 => "[a-z]{1,6}"],
            prop_oneof![time_text(), number_text(), nasty_string(), "[0-9a-f]{0,40}"],
            0..6,
        ),
    ) {
        let params: HashMap<String, String> = params;
        match ViolationQuery::parse(&params) {
            Ok(q) => prop_assert!((1..=1000).contains(&q.limit), "limit {}", q.limit),
            Err(errors) => {
                prop_assert!(!errors.is_empty());
                prop_assert!(errors.iter().all(|e| params.contains_key(&e.field) || e.field == "until"), "{errors:?}");
            }
        }
    }

    #[test]
    fn a_cursor_round_trips(at in any::<u64>(), id in "[A-Za-z0-9_]{1,40}", token in "\\PC{0,80}") {
        let c = Cursor { at: Timestamp::from_micros(at), id };
        prop_assert_eq!(Cursor::decode(&c.encode()), Some(c));
        let _ = Cursor::decode(&token);
    }
}
