//! The breaker's state machine on a manual clock.

use std::sync::Arc;
use std::time::Duration;

use super::{Breaker, BreakerState, Permit};
use crate::clock::{ManualClock, Timestamp};

const COOLDOWN: Duration = Duration::from_millis(500);

fn breaker() -> (Breaker, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_000)));
    (Breaker::new("main", 3, COOLDOWN, clock.clone()), clock)
}

fn fail(b: &Breaker, times: usize) {
    for _ in 0..times {
        let p = b.permit();
        b.record(p, false);
    }
}

#[test]
fn opens_after_a_run_of_failures_and_a_success_resets_the_run() {
    let (b, _) = breaker();
    fail(&b, 2);
    b.record(b.permit(), true);
    fail(&b, 2);
    assert_eq!(b.state(), BreakerState::Closed);
    fail(&b, 1);
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.permit(), Permit::Rejected);
    assert_eq!(b.report().opened, 1);
}

#[test]
fn half_opens_after_the_cooldown_with_one_probe_at_a_time() {
    let (b, clock) = breaker();
    fail(&b, 3);
    clock.advance(COOLDOWN.saturating_sub(Duration::from_micros(1)));
    assert_eq!(b.permit(), Permit::Rejected);
    clock.advance(Duration::from_micros(1));
    assert_eq!(b.permit(), Permit::Probe);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    // The probe is in flight: everyone else is answered without a call.
    assert_eq!(b.permit(), Permit::Rejected);
    b.record(Permit::Probe, true);
    assert_eq!(b.state(), BreakerState::Closed);
    assert!(matches!(b.permit(), Permit::Call { .. }));
    let r = b.report();
    assert_eq!((r.opened, r.half_opened, r.closed), (1, 1, 1));
}

#[test]
fn one_late_probe_does_not_reopen_it_a_run_of_them_does_for_a_whole_cooldown() {
    let (b, clock) = breaker();
    fail(&b, 3);
    clock.advance(COOLDOWN);
    assert_eq!(b.permit(), Permit::Probe);
    clock.advance(Duration::from_millis(15));
    // The probe timed out (Redis is still catching up): the next call probes again at once.
    b.record(Permit::Probe, false);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    assert_eq!(b.permit(), Permit::Probe);
    assert_eq!(b.permit(), Permit::Rejected, "still one probe at a time");
    b.record(Permit::Probe, true);
    assert_eq!(b.state(), BreakerState::Closed);
    // Redis is down again: three failed probes in a row open it for a whole cool-down.
    fail(&b, 3);
    clock.advance(COOLDOWN);
    for _ in 0..3 {
        assert_eq!(b.permit(), Permit::Probe);
        clock.advance(Duration::from_millis(15));
        b.record(Permit::Probe, false);
    }
    assert_eq!(b.state(), BreakerState::Open);
    clock.advance(COOLDOWN.saturating_sub(Duration::from_micros(1)));
    assert_eq!(b.permit(), Permit::Rejected);
    clock.advance(Duration::from_micros(1));
    assert_eq!(b.permit(), Permit::Probe);
    assert_eq!(b.report().opened, 3);
}

#[test]
fn a_probe_that_never_reports_is_replaced_after_a_cooldown() {
    let (b, clock) = breaker();
    fail(&b, 3);
    clock.advance(COOLDOWN);
    assert_eq!(b.permit(), Permit::Probe);
    // Its request was cancelled: nothing is recorded.
    clock.advance(COOLDOWN);
    assert_eq!(b.permit(), Permit::Probe);
}

#[test]
fn late_results_of_calls_started_while_closed_change_nothing() {
    let (b, clock) = breaker();
    let early = b.permit();
    fail(&b, 3);
    b.record(early, true);
    assert_eq!(b.state(), BreakerState::Open);
    clock.advance(COOLDOWN);
    assert_eq!(b.permit(), Permit::Probe);
    b.record(early, false);
    assert_eq!(b.state(), BreakerState::HalfOpen);
}

#[test]
fn a_successful_health_check_closes_it_and_a_failed_one_changes_nothing() {
    let (b, _) = breaker();
    fail(&b, 3);
    b.probed(false);
    assert_eq!(b.state(), BreakerState::Open);
    b.probed(true);
    assert_eq!(b.state(), BreakerState::Closed);
    b.probed(true);
    assert_eq!(b.report().closed, 1, "closing twice is one transition");
}

#[test]
fn calls_in_flight_together_that_fail_together_are_one_event() {
    let (b, _) = breaker();
    // A stall: 64 calls in flight, all time out together; then 64 more, sent after the first
    // timeout was counted, time out too (the stall lasted two timeouts).
    for _ in 0..2 {
        let in_flight: Vec<Permit> = (0..64).map(|_| b.permit()).collect();
        for p in in_flight {
            b.record(p, false);
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }
    // Redis answers again: the run ends.
    b.record(b.permit(), true);
    fail(&b, 2);
    assert_eq!(b.state(), BreakerState::Closed, "a new run of two events");
    // A third stall in a row (no answer in between): a Redis that is failing.
    let in_flight: Vec<Permit> = (0..64).map(|_| b.permit()).collect();
    for p in in_flight {
        b.record(p, false);
    }
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.report().opened, 1);
}

#[test]
fn a_call_that_waited_while_redis_answered_others_is_not_blamed_on_redis() {
    let (b, _) = breaker();
    fail(&b, 2);
    // Sent while two failures are counted; it waits in this process (a busy runtime, a queue
    // for a connection) while calls sent after it are answered.
    let waited = b.permit();
    b.record(b.permit(), true);
    b.record(waited, false);
    fail(&b, 2);
    assert_eq!(
        b.state(),
        BreakerState::Closed,
        "the late call counted nothing"
    );
    fail(&b, 1);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn a_healthy_breaker_moves_nothing_on_success() {
    let (b, _) = breaker();
    let before = b.permit();
    for _ in 0..1_000 {
        b.record(b.permit(), true);
    }
    assert_eq!(b.permit(), before, "the epoch did not move");
}
