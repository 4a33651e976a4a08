//! The standard headers from hand-built responses: which limit is reported, rounding up, and the
//! draft-10 list syntax.

use std::time::Duration;

use super::*;
use crate::clock::Timestamp;
use crate::config::Unit;
use crate::limiter::{CurrentLimit, DescriptorStatus};

fn status(name: &str, quota: u32, remaining: u32, reset_ms: u64, over: bool) -> DescriptorStatus {
    DescriptorStatus {
        code: if over { Code::OverLimit } else { Code::Ok },
        current_limit: Some(CurrentLimit {
            name: name.into(),
            requests_per_unit: quota,
            unit: Unit::Minute,
            window: Window::from_secs(60).unwrap(),
            concurrency: false,
        }),
        limit_remaining: remaining,
        duration_until_reset: Some(Duration::from_millis(reset_ms)),
        wait: Duration::ZERO,
        debt: 0,
    }
}

fn response(code: Code, statuses: Vec<DescriptorStatus>, now_micros: u64) -> Response {
    Response {
        overall_code: code,
        statuses,
        response_headers: Vec::new(),
        dynamic_metadata: None,
        decided_at: Timestamp::from_micros(now_micros),
        holds_slots: false,
        other_limits: Vec::new(),
        soft_breach: false,
    }
}

#[test]
fn allowed_reports_the_least_remaining_and_rounds_the_reset_up() {
    let r = response(
        Code::Ok,
        vec![
            DescriptorStatus::no_limit(),
            status("per-client", 100, 47, 12_500, false),
            status("", 10, 3, 40_000, false),
        ],
        1_000_000_500_000,
    );
    let h = RateLimitHeaders::from_response(&r);
    assert_eq!(h.reported().map(|l| l.name.as_str()), Some("limit-2"));
    // 1_000_000.5 s + 40 s = 1_000_040.5 s, rounded up.
    assert_eq!(h.reset_at, Some(1_000_041));
    assert_eq!(h.retry_after, None);
    let pairs = h.pairs();
    let get = |n: &str| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| v.as_str());
    assert_eq!(get("X-RateLimit-Limit"), Some("10"));
    assert_eq!(get("X-RateLimit-Remaining"), Some("3"));
    assert_eq!(get("X-RateLimit-Reset"), Some("1000041"));
    assert_eq!(get("Retry-After"), None);
    assert_eq!(
        get("RateLimit-Policy"),
        Some(r#""per-client";q=100;w=60, "limit-2";q=10;w=60"#)
    );
    assert_eq!(
        get("RateLimit"),
        Some(r#""per-client";r=47;t=13, "limit-2";r=3;t=40"#)
    );
}

#[test]
fn denied_waits_for_the_over_limit_that_resets_last_and_at_least_a_second() {
    let r = response(
        Code::OverLimit,
        vec![
            status("a", 5, 0, 2_000, true),
            status("b", 50, 0, 30_001, true),
            status("c", 9, 0, 90_000, false),
        ],
        7_000_000,
    );
    let h = RateLimitHeaders::from_response(&r);
    assert_eq!(h.reported().map(|l| l.name.as_str()), Some("b"));
    assert_eq!(h.retry_after, Some(31));
    assert_eq!(h.reset_at, Some(38));

    let zero = response(Code::OverLimit, vec![status("a", 5, 0, 0, true)], 7_000_000);
    let h = RateLimitHeaders::from_response(&zero);
    assert_eq!(h.retry_after, Some(1), "never 0 on a denial");
}

#[test]
fn a_denied_cost_retries_when_all_its_hits_fit_not_one() {
    // A bucket: one hit fits again in 2 s, the request's 3 hits only in 6.2 s.
    let mut bucket = status("b", 5, 0, 2_000, true);
    bucket.wait = Duration::from_millis(6_200);
    let r = response(
        Code::OverLimit,
        vec![status("a", 5, 0, 4_000, true), bucket],
        7_000_000,
    );
    let h = RateLimitHeaders::from_response(&r);
    assert_eq!(h.reported().map(|l| l.name.as_str()), Some("b"));
    assert_eq!(h.retry_after, Some(7));
    assert_eq!(h.delay, Duration::ZERO);
    let pairs = h.pairs();
    assert!(pairs.contains(&("Retry-After", "7".to_string())));
    assert!(pairs.contains(&("RateLimit", r#""a";r=0;t=4, "b";r=0;t=2"#.to_string())));
}

#[test]
fn an_allowed_request_carries_its_longest_shaping_delay() {
    let mut shaped = status("lb", 10, 0, 1_000, false);
    shaped.wait = Duration::from_millis(300);
    let r = response(
        Code::Ok,
        vec![status("a", 5, 2, 4_000, false), shaped],
        7_000_000,
    );
    let h = RateLimitHeaders::from_response(&r);
    assert_eq!(h.delay, Duration::from_millis(300));
    assert_eq!(h.retry_after, None);
}

#[test]
fn no_limit_means_no_headers_unless_denied() {
    let ok = response(Code::Ok, vec![DescriptorStatus::unlimited()], 0);
    assert!(RateLimitHeaders::from_response(&ok).pairs().is_empty());
}

#[test]
fn names_are_structured_field_strings() {
    assert_eq!(sf_string(r#"a"b\c"#), r#""a\"b\\c""#);
    assert_eq!(sf_string("é\n"), r#""??""#);
}
