//! The retry helper on a fixed wall clock, a recording sleeper and seeded jitter: it never retries
//! earlier than the server's hint (`Retry-After` as seconds or a date, or the draft `RateLimit`
//! header), backs off with full jitter without one, and stops at its attempts, total wait and
//! budget.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, Response, StatusCode};

use super::*;
use crate::clock::{ManualClock, WallClock};

/// A wall clock stopped at a whole second.
struct Fixed(SystemTime);

impl WallClock for Fixed {
    fn system_time(&self) -> SystemTime {
        self.0
    }
}

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

/// A helper on the fixed clock with a seeded jitter, and the waits it asked for.
fn retrying(seed: u64) -> (Retrying, Arc<Mutex<Vec<Duration>>>) {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let log = waits.clone();
    let r = Retrying::new()
        .clock(Arc::new(Fixed(now())))
        .seed(seed)
        .sleeper(Arc::new(move |d| -> crate::clock::SleepFuture {
            log.lock().unwrap().push(d);
            Box::pin(async {})
        }));
    (r, waits)
}

fn answer(status: u16, headers: &[(&'static str, &str)]) -> Response<()> {
    let mut r = Response::new(());
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    for (k, v) in headers {
        r.headers_mut().insert(*k, v.parse().unwrap());
    }
    r
}

/// Calls through `r` a function answering `answers` in turn; the statuses of the outcome and the
/// number of calls made.
async fn run(r: &Retrying, answers: Vec<Response<()>>) -> (u16, usize) {
    let total = answers.len();
    let queue = Mutex::new(VecDeque::from(answers));
    let last = r
        .call(|| {
            let next = queue
                .lock()
                .unwrap()
                .pop_front()
                .expect("a scripted answer");
            async move { next }
        })
        .await;
    let left = queue.lock().unwrap().len();
    (last.status().as_u16(), total - left)
}

#[tokio::test]
async fn never_earlier_than_retry_after_and_spread_over_one_more_hint() {
    for seed in 0..200 {
        for name in ["retry-after", "Retry-After"] {
            let (r, waits) = retrying(seed);
            let mut h = HeaderMap::new();
            h.insert(
                http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                "7".parse().unwrap(),
            );
            let w = r.wait_for(0, &h);
            assert!(w >= Duration::from_secs(7), "seed {seed}: {w:?}");
            assert!(w <= Duration::from_secs(14), "seed {seed}: {w:?}");
            let got = run(
                &r,
                vec![answer(429, &[("retry-after", "7")]), answer(200, &[])],
            )
            .await;
            assert_eq!(got, (200, 2));
            let waits = waits.lock().unwrap();
            assert!(waits[0] >= Duration::from_secs(7), "{waits:?}");
        }
    }
}

#[tokio::test]
async fn a_herd_told_the_same_wait_comes_back_spread_out() {
    let mut waits: Vec<Duration> = (0..50)
        .map(|seed| retrying(seed).0.wait_for(0, &retry_after("50")))
        .collect();
    waits.sort();
    assert!(waits[0] >= Duration::from_secs(50), "{waits:?}");
    assert!(waits[49] <= Duration::from_secs(100), "{waits:?}");
    // Spread across the window, not bunched: each fifth of it holds some of the herd.
    for fifth in 0..5u64 {
        let (lo, hi) = (
            Duration::from_secs(50 + 10 * fifth),
            Duration::from_secs(60 + 10 * fifth),
        );
        assert!(
            waits.iter().any(|w| *w >= lo && *w < hi),
            "{fifth}: {waits:?}"
        );
    }
}

fn retry_after(v: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(http::header::RETRY_AFTER, v.parse().unwrap());
    h
}

#[tokio::test]
async fn an_http_date_retry_after_is_honoured() {
    let date = httpdate::fmt_http_date(now() + Duration::from_secs(30));
    let (r, waits) = retrying(7);
    let got = run(
        &r,
        vec![answer(503, &[("retry-after", &date)]), answer(200, &[])],
    )
    .await;
    assert_eq!(got, (200, 2));
    assert!(waits.lock().unwrap()[0] >= Duration::from_secs(30));
    let past = httpdate::fmt_http_date(now() - Duration::from_secs(30));
    assert_eq!(
        parse_retry_after(&past.parse().unwrap(), now()),
        Some(Duration::ZERO)
    );
    assert_eq!(parse_retry_after(&"soon".parse().unwrap(), now()), None);
}

#[test]
fn the_draft_ratelimit_header_is_a_hint_too() {
    let secs = |s| Some(Duration::from_secs(s));
    assert_eq!(
        parse_ratelimit(r#""per-client";r=99;t=13, "search";r=0;t=13"#),
        secs(13)
    );
    assert_eq!(
        parse_ratelimit(r#""a,b";r=0;t=20, "c";r=0;t=5"#),
        secs(20),
        "quoted commas"
    );
    assert_eq!(
        parse_ratelimit(r#""a";r=4;t=20"#),
        None,
        "nothing exhausted"
    );
    assert_eq!(parse_ratelimit("garbage;;;"), None);
    assert_eq!(
        parse_ratelimit(r#""a";r=0;t=-1, "b";r=0;t=inf, "c";r=0;t=NaN"#),
        None
    );
    let mut both = retry_after("2");
    both.insert("ratelimit", r#""x";r=0;t=9"#.parse().unwrap());
    assert_eq!(
        server_hint(&both, now()),
        Duration::from_secs(9),
        "the larger wins"
    );
    assert_eq!(
        server_hint(&retry_after("99999999999999999999999"), now()),
        Duration::MAX
    );
}

#[tokio::test]
async fn full_jitter_exponential_backoff_without_a_hint() {
    let (r, waits) = retrying(7);
    let r = r
        .base(Duration::from_secs(1))
        .cap(Duration::from_secs(10))
        .max_attempts(6);
    let mut answers: Vec<_> = (0..5).map(|_| answer(503, &[])).collect();
    answers.push(answer(200, &[]));
    assert_eq!(run(&r, answers).await, (200, 6));
    let waits = waits.lock().unwrap().clone();
    let ceilings = [1, 2, 4, 8, 10].map(Duration::from_secs);
    assert_eq!(waits.len(), 5);
    assert!(
        waits.iter().zip(ceilings).all(|(w, c)| *w <= c),
        "{waits:?}"
    );
    assert_ne!(waits, ceilings, "full jitter: not the ceilings themselves");
}

#[tokio::test]
async fn attempts_total_wait_and_budget_bound_the_retries() {
    let denied = |v: &str, n: usize| {
        (0..n)
            .map(|_| answer(429, &[("retry-after", v)]))
            .collect::<Vec<_>>()
    };
    let (r, _) = retrying(7);
    assert_eq!(
        run(&r.max_attempts(3), denied("1", 10)).await,
        (429, 3),
        "the last answer is handed back"
    );

    let (r, _) = retrying(7);
    assert_eq!(
        run(
            &r.max_total_wait(Duration::from_secs(120)),
            denied("50", 10)
        )
        .await,
        (429, 2),
        "a second 50+ s wait would pass 120 s in all"
    );

    let clock = Arc::new(ManualClock::new());
    let budget = Arc::new(RetryBudget::new(0.0, 2, Duration::from_secs(10)).clock(clock.clone()));
    let (r, _) = retrying(7);
    let r = r.budget(budget.clone()).max_attempts(10);
    assert_eq!(
        run(&r, denied("0", 10)).await,
        (429, 3),
        "two retries, then give up"
    );
    assert!(!budget.try_retry());
    clock.advance(Duration::from_secs(11));
    assert!(
        budget.try_retry(),
        "the budget refills as its window moves on"
    );
}

#[tokio::test]
async fn the_budget_grows_with_the_calls() {
    let clock = Arc::new(ManualClock::new());
    let budget = RetryBudget::new(0.5, 0, Duration::from_secs(10)).clock(clock.clone());
    assert!(!budget.try_retry(), "no calls, no minimum: nothing");
    for _ in 0..4 {
        budget.record_call();
        clock.advance(Duration::from_secs(1));
    }
    assert_eq!(
        (0..5).filter(|_| budget.try_retry()).count(),
        2,
        "half of 4 calls"
    );
}

#[tokio::test]
async fn other_answers_and_foreign_errors_are_final() {
    let (r, waits) = retrying(7);
    assert_eq!(
        run(&r, vec![answer(400, &[]), answer(200, &[])]).await,
        (400, 1)
    );
    let mut calls = 0;
    let out: Result<Response<()>, std::io::Error> = r
        .call(|| {
            calls += 1;
            async { Err(std::io::Error::other("refused")) }
        })
        .await;
    assert!(out.is_err());
    assert_eq!(calls, 1);
    assert!(waits.lock().unwrap().is_empty());
}

#[tokio::test]
async fn decisions_and_unavailability_carry_their_hints() {
    let denied = Decision {
        allowed: false,
        remaining: Some(0),
        reset_at: None,
        retry_after: Duration::from_secs(4),
        delay: Duration::ZERO,
        headers: HeaderMap::new(),
        holder: None,
    };
    let (status, headers) = denied.answer().unwrap();
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(server_hint(&headers, now()), Duration::from_secs(4));

    let (r, waits) = retrying(7);
    let mut calls = 0;
    let out: Result<Decision, Error> = r
        .max_attempts(3)
        .call(|| {
            calls += 1;
            async {
                Err(Error::Unavailable {
                    code: "unavailable".into(),
                    retry_after: Some(Duration::from_secs(2)),
                })
            }
        })
        .await;
    assert!(matches!(out, Err(Error::Unavailable { .. })));
    assert_eq!(calls, 3);
    let waits = waits.lock().unwrap();
    assert!(
        waits.iter().all(|w| *w >= Duration::from_secs(2)),
        "{waits:?}"
    );
    assert!(
        Error::Timeout(Duration::from_millis(1)).answer().is_none(),
        "a timeout is the failure policy's, not a server's answer"
    );
}
