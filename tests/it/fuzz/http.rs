//! `POST /check` and `/json` bodies through the real main-port router: whatever the body, the
//! answer is 200, 429 or 400 (never a 5xx: the store is healthy and the configuration loaded),
//! with a JSON body of the documented shape; a well-formed body is decided, never refused; and
//! `/json`'s protojson decoding round-trips the request it was rendered from.

use proptest::prelude::*;
use ratelimitd::Settings;
use ratelimitd::testing::parse_request;
use serde_json::Value;

use crate::fuzz::harness::{InProcess, runtime};
use crate::fuzz::http_bodies::{
    bytes_of, check_body, heavy_check_body, json_body, valid_check_body,
};
use crate::fuzz::inputs::J;

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
    #![proptest_config(crate::fuzz::cases(96))]

    #[test]
    fn check_answers_4xx_or_a_decision(body in bytes_of(check_body())) {
        let rt = runtime();
        let app = InProcess::start();
        let over = body.len() > ratelimitd::testing::DEFAULT_CHECK_MAX_BODY_BYTES as usize;
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
            let sent = parse_request(&body, &Settings::defaults().limits).map_err(|e| TestCaseError::fail(format!("decided but not parsed: {e}")))?;
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
                d.push(("limit".into(), J::obj([("requestsPerUnit", num(u64::from(*rpu))), ("unit", J::n(*unit))])));
            }
            d.push(("isNegativeHits".into(), J::Bool(*neg)));
            J::Obj(d)
        }).collect();
        pairs.push(("descriptors".into(), J::Arr(descriptors)));
        let req = parse_request(J::Obj(pairs).text().as_bytes(), &Settings::defaults().limits)
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

proptest! {
    #![proptest_config(crate::fuzz::cases(64))]

    /// Every limit of the configuration refills within a day, so no answer may tell a caller to
    /// wait longer: a `Retry-After` of 117 000 years (`hitsAddend` near 2^64 on a bucket) tells
    /// the client never to come back.
    #[test]
    fn retry_after_stays_within_the_longest_window(calls in prop::collection::vec(heavy_check_body(), 1..4)) {
        let rt = runtime();
        let app = InProcess::start();
        for body in calls {
            let (status, headers, answer) = rt.block_on(app.post("/check", body.text().into_bytes()));
            let v = check_answer(status.as_u16(), &answer)?;
            let longest = crate::fuzz::harness::LONGEST_WINDOW.as_secs();
            if let Some(h) = headers.get("retry-after") {
                let secs: u64 = h.to_str().ok().and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
                prop_assert!(secs <= longest, "Retry-After: {secs} for {}", body.text());
            }
            prop_assert!(v["retry_after"].as_u64().unwrap_or(0) <= longest, "{v} for {}", body.text());
        }
    }
}
