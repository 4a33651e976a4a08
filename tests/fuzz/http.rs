//! `POST /check` and `/json` bodies through the real main-port router: whatever the body, the
//! answer is 200, 429 or 400 (never a 5xx: the store is healthy and the configuration loaded),
//! with a JSON body of the documented shape; a well-formed body is decided, never refused; and
//! `/json`'s protojson decoding round-trips the request it was rendered from.

use proptest::prelude::*;
use ratelimitd::http::json::parse_request;
use serde_json::Value;

use crate::harness::{InProcess, KEYS, runtime};
use crate::inputs::{J, any_json, deep_nesting, edits, mutate, nasty_string, number_text};

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
fn check_body() -> impl Strategy<Value = J> {
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
            J::Obj(
                named
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
                    .collect(),
            )
        })
}

/// A `/check` body that is valid by construction: the model says it is decided (200 or 429).
fn valid_check_body() -> impl Strategy<Value = J> {
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

/// `/json` bodies: a RateLimitRequest with every field maybe absent or wrong.
fn json_body() -> impl Strategy<Value = J> {
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
            J::Obj(
                named
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
                    .collect(),
            )
        })
}

/// Bytes of a body: the structured document (usually), any JSON, deep nesting, or a mutation of
/// the document's text.
fn bytes_of(doc: impl Strategy<Value = J> + 'static) -> impl Strategy<Value = Vec<u8>> {
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

/// What every `/check` answer must be: 200 or 429 with the decision, or 400 naming the problem.
fn check_answer(status: u16, body: &[u8]) -> Result<Value, TestCaseError> {
    prop_assert!(
        matches!(status, 200 | 400 | 429),
        "status {status}: {}",
        String::from_utf8_lossy(body)
    );
    let v: Value =
        serde_json::from_slice(body).map_err(|e| TestCaseError::fail(format!("not JSON: {e}")))?;
    if status == 400 {
        prop_assert!(v["error"].is_string() && v["message"].is_string(), "{v}");
    } else {
        prop_assert_eq!(v["allowed"].as_bool(), Some(status == 200), "{}", v);
        prop_assert!(v["retry_after"].is_u64() && v["delay_ms"].is_u64(), "{v}");
    }
    Ok(v)
}

proptest! {
    #![proptest_config(crate::cases(96))]

    #[test]
    fn check_answers_4xx_or_a_decision(body in bytes_of(check_body())) {
        let rt = runtime();
        let app = InProcess::start();
        let over = body.len() > ratelimitd::settings::edges::DEFAULT_CHECK_MAX_BODY_BYTES as usize;
        let (status, _, answer) = rt.block_on(app.post("/check", body));
        let v = check_answer(status.as_u16(), &answer)?;
        if over {
            prop_assert_eq!(&v["error"], "body_too_large", "{}", v);
        }
    }

    #[test]
    fn a_valid_check_body_is_decided(body in valid_check_body()) {
        let rt = runtime();
        let app = InProcess::start();
        let (status, _, answer) = rt.block_on(app.post("/check", body.text().into_bytes()));
        let v = check_answer(status.as_u16(), &answer)?;
        prop_assert!(status != 400, "refused: {v}");
    }

    #[test]
    fn json_answers_4xx_or_a_decision(body in bytes_of(json_body())) {
        let rt = runtime();
        let app = InProcess::start();
        let (status, _, answer) = rt.block_on(app.post("/json", body.clone()));
        let status = status.as_u16();
        prop_assert!(matches!(status, 200 | 400 | 429), "status {status}: {}", String::from_utf8_lossy(&answer));
        if status != 400 {
            let v: Value = serde_json::from_slice(&answer).map_err(|e| TestCaseError::fail(format!("not JSON: {e}")))?;
            let sent = parse_request(&body).map_err(|e| TestCaseError::fail(format!("decided but not parsed: {e}")))?;
            let statuses = v["statuses"].as_array().map_or(0, Vec::len);
            prop_assert_eq!(statuses, sent.descriptors.len(), "one status per descriptor: {}", v);
            prop_assert_eq!(v["overallCode"] == "OK", status == 200, "{}", v);
        }
    }

    #[test]
    fn json_decoding_round_trips(
        domain in "[a-z]{1,8}",
        hits in prop::option::of(any::<u32>()),
        ds in prop::collection::vec((
            prop::collection::vec(("[a-z_]{1,6}", "\\PC{0,6}"), 0..3),
            prop::option::of(any::<u64>()),
            prop::option::of((any::<u32>(), 1i32..=7)),
            any::<bool>(),
        ), 0..4),
        quoted in any::<bool>(),
    ) {
        let num = |n: u64| if quoted { J::s(n.to_string()) } else { J::n(n) };
        let mut pairs = vec![("domain".to_string(), J::s(domain.clone()))];
        if let Some(h) = hits {
            pairs.push(("hitsAddend".into(), num(u64::from(h))));
        }
        let descriptors = ds.iter().map(|(entries, h, limit, neg)| {
            let mut d = vec![(
                "entries".to_string(),
                J::Arr(entries.iter().map(|(k, v)| J::obj([("key", J::s(k.clone())), ("value", J::s(v.clone()))])).collect()),
            )];
            if let Some(h) = h {
                d.push(("hits_addend".into(), num(*h)));
            }
            if let Some((rpu, unit)) = limit {
                d.push(("limit".into(), J::obj([("requestsPerUnit", num(u64::from(*rpu))), ("unit", J::n(unit))])));
            }
            d.push(("isNegativeHits".into(), J::Bool(*neg)));
            J::Obj(d)
        }).collect();
        pairs.push(("descriptors".into(), J::Arr(descriptors)));
        let req = parse_request(J::Obj(pairs).text().as_bytes())
            .map_err(|e| TestCaseError::fail(format!("a valid body refused: {e}")))?;
        prop_assert_eq!(req.domain, domain);
        prop_assert_eq!(req.hits_addend, u64::from(hits.unwrap_or(0)));
        prop_assert_eq!(req.descriptors.len(), ds.len());
        for (got, (entries, h, limit, neg)) in req.descriptors.iter().zip(&ds) {
            let pairs: Vec<(String, String)> = got.entries.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
            prop_assert_eq!(&pairs, entries);
            prop_assert_eq!(got.hits_addend, *h);
            prop_assert_eq!(got.refund, *neg);
            prop_assert_eq!(got.limit.map(|l| l.requests_per_unit), limit.map(|l| l.0));
            prop_assert_eq!(got.limit.map(|l| l.unit.is_some()), limit.map(|_| true));
        }
    }
}

/// `/check` bodies whose own descriptors carry hits at every edge, on every algorithm.
fn heavy_check_body() -> impl Strategy<Value = J> {
    let descriptor = (
        prop::sample::select(KEYS.to_vec()),
        prop::sample::select(vec!["a", "b"]),
        crate::inputs::edge_u64(),
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

proptest! {
    #![proptest_config(crate::cases(64))]

    /// Every limit of the configuration refills within a day, so no answer may tell a caller to
    /// wait longer: a `Retry-After` of 117 000 years (`hitsAddend` near 2^64 on a bucket) tells
    /// the client never to come back.
    #[test]
    #[ignore = "open: descriptors[].hitsAddend is not clamped where hits enter the limiter; token and leaky buckets answer Retry-After of up to ~3.7e12 s (being fixed with the hits clamp)"]
    fn retry_after_stays_within_the_longest_window(calls in prop::collection::vec(heavy_check_body(), 1..4)) {
        let rt = runtime();
        let app = InProcess::start();
        for body in calls {
            let (status, headers, answer) = rt.block_on(app.post("/check", body.text().into_bytes()));
            let v = check_answer(status.as_u16(), &answer)?;
            let longest = crate::harness::LONGEST_WINDOW.as_secs();
            if let Some(h) = headers.get("retry-after") {
                let secs: u64 = h.to_str().ok().and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
                prop_assert!(secs <= longest, "Retry-After: {secs} for {}", body.text());
            }
            prop_assert!(v["retry_after"].as_u64().unwrap_or(0) <= longest, "{v} for {}", body.text());
        }
    }
}
