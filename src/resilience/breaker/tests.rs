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
    clock.advance(COOLDOWN - Duration::from_micros(1));
    assert_eq!(b.permit(), Permit::Rejected);
    clock.advance(Duration::from_micros(1));
    assert_eq!(b.permit(), Permit::Probe);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    // The probe is in flight: everyone else is answered without a call.
    assert_eq!(b.permit(), Permit::Rejected);
    b.record(Permit::Probe, true);
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.permit(), Permit::Call);
    let r = b.report();
    assert_eq!((r.opened, r.half_opened, r.closed), (1, 1, 1));
}

#[test]
fn a_failed_probe_opens_again_for_a_whole_cooldown() {
    let (b, clock) = breaker();
    fail(&b, 3);
    clock.advance(COOLDOWN);
    assert_eq!(b.permit(), Permit::Probe);
    clock.advance(Duration::from_millis(100));
    b.record(Permit::Probe, false);
    assert_eq!(b.state(), BreakerState::Open);
    clock.advance(COOLDOWN - Duration::from_micros(1));
    assert_eq!(b.permit(), Permit::Rejected);
    clock.advance(Duration::from_micros(1));
    assert_eq!(b.permit(), Permit::Probe);
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
    fail(&b, 3);
    b.record(Permit::Call, true);
    assert_eq!(b.state(), BreakerState::Open);
    clock.advance(COOLDOWN);
    assert_eq!(b.permit(), Permit::Probe);
    b.record(Permit::Call, false);
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
