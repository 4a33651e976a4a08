//! `/check` and `/json` bodies for the HTTP target: the documented fields, each maybe absent,
//! wrongly typed or at an edge (mostly of the right kind, so that most bodies reach the limiter),
//! then any JSON, deep nesting, byte mutations, and sizes around `CHECK_MAX_BODY_BYTES`.

use proptest::prelude::*;

use crate::fuzz::harness::KEYS;
use crate::fuzz::inputs::{
    J, any_json, deep_nesting, edits, mutate, nasty_string, number_text, present,
};

/// A value for one field: mostly of the right kind (so that most bodies get past the decoder
/// and reach the limiter), sometimes anything.
fn field(right: BoxedStrategy<J>) -> BoxedStrategy<J> {
    prop_oneof![16 => right, 1 => any_json()].boxed()
}

fn key() -> BoxedStrategy<String> {
    prop_oneof![
        8 => prop::sample::select(KEYS.to_vec()).prop_map(str::to_string),
        1 => nasty_string(),
    ]
    .boxed()
}

/// An entry value: a few that share counters across calls, sometimes a hostile one.
fn value() -> BoxedStrategy<String> {
    prop_oneof![
        8 => prop::sample::select(vec!["a", "b", "ab", "u1"]).prop_map(str::to_string),
        1 => nasty_string(),
    ]
    .boxed()
}

/// A number token: a small count mostly, else one at an edge.
fn count() -> BoxedStrategy<String> {
    prop_oneof![6 => (0u64..6).prop_map(|n| n.to_string()), 1 => number_text()].boxed()
}

/// A `/json`-form descriptor with each field maybe present, maybe wrongly typed.
fn json_descriptor() -> BoxedStrategy<J> {
    let entry = (
        field(key().prop_map(J::Str).boxed()),
        field(value().prop_map(J::Str).boxed()),
        any::<(bool, bool)>(),
    )
        .prop_map(|(k, v, (has_k, has_v))| {
            let mut pairs = Vec::new();
            if has_k || !has_v {
                pairs.push(("key".to_string(), k));
            }
            if has_v {
                pairs.push(("value".to_string(), v));
            }
            J::Obj(pairs)
        });
    let unit = prop_oneof![
        prop::sample::select(vec![
            "SECOND",
            "MINUTE",
            "HOUR",
            "DAY",
            "WEEK",
            "MONTH",
            "YEAR",
            "UNKNOWN",
            "second",
            "FORTNIGHT"
        ])
        .prop_map(J::s),
        (-2i64..10).prop_map(J::n),
    ];
    let limit = (field(count().prop_map(J::Num).boxed()), field(unit.boxed()))
        .prop_map(|(n, u)| J::Obj(vec![("requestsPerUnit".into(), n), ("unit".into(), u)]));
    (
        field(prop::collection::vec(entry, 1..4).prop_map(J::Arr).boxed()),
        prop::option::weighted(0.1, field(limit.boxed())),
        prop::option::weighted(0.5, field(hits().boxed())),
        prop::option::weighted(0.1, field(any::<bool>().prop_map(J::Bool).boxed())),
        any::<bool>(),
    )
        .prop_map(|(entries, limit, hits, negative, snake)| {
            let mut pairs = vec![("entries".to_string(), entries)];
            let name =
                |camel: &str, snake_name: &str| if snake { snake_name } else { camel }.to_string();
            if let Some(l) = limit {
                pairs.push(("limit".into(), l));
            }
            if let Some(h) = hits {
                pairs.push((name("hitsAddend", "hits_addend"), h));
            }
            if let Some(n) = negative {
                pairs.push((name("isNegativeHits", "is_negative_hits"), n));
            }
            J::Obj(pairs)
        })
        .boxed()
}

/// A protojson 64-bit number: a JSON number or a decimal string.
fn hits() -> impl Strategy<Value = J> {
    (count(), any::<bool>()).prop_map(|(n, quoted)| if quoted { J::Str(n) } else { J::Num(n) })
}

/// `/check` bodies: an object of the documented fields, each maybe absent, wrongly typed or out
/// of range, sometimes an unknown one.
pub(super) fn check_body() -> impl Strategy<Value = J> {
    let s = || {
        field(
            prop_oneof![6 => "[a-z0-9:]{1,8}".boxed(), 1 => nasty_string()]
                .prop_map(J::Str)
                .boxed(),
        )
    };
    let n = || field(count().prop_map(J::Num).boxed());
    (
        prop::option::weighted(0.97, s()),
        prop::option::weighted(0.4, s()),
        prop::option::weighted(0.5, n()),
        prop::option::weighted(0.3, n()),
        prop::option::weighted(
            0.2,
            field(
                prop::sample::select(vec!["api", "d", "nope"])
                    .prop_map(J::s)
                    .boxed(),
            ),
        ),
        prop::option::weighted(
            0.4,
            field(
                prop::collection::vec(json_descriptor(), 0..4)
                    .prop_map(J::Arr)
                    .boxed(),
            ),
        ),
        prop::option::weighted(0.3, field(any::<bool>().prop_map(J::Bool).boxed())),
        prop::option::weighted(0.02, any_json()),
    )
        .prop_map(|(ck, ep, cost, wait, domain, ds, details, unknown)| {
            let named = [
                ("client_key", ck),
                ("endpoint", ep),
                ("cost", cost),
                ("max_wait_ms", wait),
                ("domain", domain),
                ("descriptors", ds),
                ("details", details),
                ("colour", unknown),
            ];
            J::Obj(present(named))
        })
}

/// A `/check` body that is valid by construction: the model says it is decided (200 or 429).
pub(super) fn valid_check_body() -> impl Strategy<Value = J> {
    (
        "[a-z0-9:]{1,12}",
        prop::option::of("[a-z/]{1,12}"),
        prop::option::of(0u64..=1_000_000_000),
        prop::option::of(0u64..=60_000),
        any::<bool>(),
    )
        .prop_map(|(ck, ep, cost, wait, details)| {
            let mut pairs = vec![("client_key".to_string(), J::s(ck))];
            if let Some(ep) = ep {
                pairs.push(("endpoint".into(), J::s(ep)));
            }
            if let Some(c) = cost {
                pairs.push(("cost".into(), J::n(c)));
            }
            if let Some(w) = wait {
                pairs.push(("max_wait_ms".into(), J::n(w)));
            }
            pairs.push(("details".into(), J::Bool(details)));
            J::Obj(pairs)
        })
}

/// `/json` bodies: a `RateLimitRequest` with every field maybe absent or wrong.
pub(super) fn json_body() -> impl Strategy<Value = J> {
    (
        prop::option::weighted(
            0.9,
            field(
                prop_oneof![8 => Just("d".to_string()), 1 => nasty_string()]
                    .prop_map(J::Str)
                    .boxed(),
            ),
        ),
        prop::option::weighted(
            0.9,
            field(
                prop::collection::vec(json_descriptor(), 1..5)
                    .prop_map(J::Arr)
                    .boxed(),
            ),
        ),
        prop::option::weighted(0.4, field(hits().boxed())),
        prop::option::weighted(0.02, any_json()),
    )
        .prop_map(|(domain, ds, hits, unknown)| {
            let named = [
                ("domain", domain),
                ("descriptors", ds),
                ("hitsAddend", hits),
                ("bogus", unknown),
            ];
            J::Obj(present(named))
        })
}

/// Bytes of a body: the structured document (usually), any JSON, deep nesting, or a mutation of
/// the document's text.
pub(super) fn bytes_of(doc: impl Strategy<Value = J> + 'static) -> impl Strategy<Value = Vec<u8>> {
    let doc = doc.boxed();
    prop_oneof![
        12 => doc.clone().prop_map(|j| j.text().into_bytes()),
        1 => any_json().prop_map(|j| j.text().into_bytes()),
        1 => deep_nesting().prop_map(String::into_bytes),
        3 => (doc.clone(), edits(3)).prop_map(|(j, e)| mutate(j.text().into_bytes(), &e)),
        // Around CHECK_MAX_BODY_BYTES (64 KiB): leading whitespace keeps the document valid.
        1 => (doc, 65_000usize..66_500).prop_map(|(j, pad)| {
            let text = j.text();
            format!("{}{text}", " ".repeat(pad.saturating_sub(text.len()))).into_bytes()
        }),
    ]
}

/// `/check` bodies whose own descriptors carry hits at every edge, on every algorithm.
pub(super) fn heavy_check_body() -> impl Strategy<Value = J> {
    let descriptor = (
        prop::sample::select(KEYS.to_vec()),
        prop::sample::select(vec!["a", "b"]),
        crate::fuzz::inputs::edge_u64(),
    )
        .prop_map(|(k, v, hits)| {
            J::obj([
                (
                    "entries",
                    J::Arr(vec![J::obj([("key", J::s(k)), ("value", J::s(v))])]),
                ),
                ("hitsAddend", J::s(hits.to_string())),
            ])
        });
    (prop::collection::vec(descriptor, 1..4), 0u64..=60_000).prop_map(|(ds, wait)| {
        J::obj([
            ("client_key", J::s("c")),
            ("max_wait_ms", J::n(wait)),
            ("descriptors", J::Arr(ds)),
        ])
    })
}
