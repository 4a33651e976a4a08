//! The calendar's bounds across the boundaries that epoch windows get wrong: month ends, leap
//! days, the year end, both daylight-saving changes of a zone that has them, weeks from Monday;
//! and what a fixed window on such a calendar answers (reset, expiry, key TTL).

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::algorithm::{Window, fixed_window};
use crate::clock::Timestamp;

/// Unix seconds of an RFC 3339 instant.
fn at(text: &str) -> u64 {
    let ts: JiffTimestamp = text.parse().unwrap();
    u64::try_from(ts.as_second()).unwrap()
}

fn cal(unit: CalendarUnit, count: u32, zone: &str) -> Calendar {
    Calendar::new(unit, count, Zone::get(zone).unwrap())
}

/// The bounds of `unit` in `zone` around `now`, as RFC 3339 instants.
fn bounds(unit: CalendarUnit, zone: &str, now: &str) -> (u64, u64) {
    let b = cal(unit, 1, zone).bounds(at(now)).unwrap();
    (b.start, b.end)
}

const HOUR: u64 = 3_600;
const DAY: u64 = 86_400;

#[test]
fn a_month_is_the_real_month_and_ends_at_local_midnight() {
    let paris = "Europe/Paris";
    let jan = (
        at("2026-01-01T00:00:00+01:00"),
        at("2026-02-01T00:00:00+01:00"),
    );
    assert_eq!(
        bounds(CalendarUnit::Month, paris, "2026-01-31T23:59:59+01:00"),
        jan
    );
    assert_eq!(
        bounds(CalendarUnit::Month, paris, "2026-01-01T00:00:00+01:00"),
        jan
    );
    // 23:30 UTC on the 31st is already February in Paris.
    let feb = bounds(CalendarUnit::Month, paris, "2026-01-31T23:30:00Z");
    assert_eq!(feb.0, jan.1);
    assert_eq!(feb.1 - feb.0, 28 * DAY);
    // A 30-day month, a 31-day month.
    let apr = bounds(CalendarUnit::Month, "UTC", "2026-04-30T12:00:00Z");
    assert_eq!(
        apr,
        (at("2026-04-01T00:00:00Z"), at("2026-05-01T00:00:00Z"))
    );
    let may = bounds(CalendarUnit::Month, "UTC", "2026-05-01T00:00:00Z");
    assert_eq!(may.1 - may.0, 31 * DAY);
}

#[test]
fn leap_years_have_a_29th_of_february_and_366_days() {
    let feb = bounds(CalendarUnit::Month, "UTC", "2028-02-29T12:00:00Z");
    assert_eq!(
        feb,
        (at("2028-02-01T00:00:00Z"), at("2028-03-01T00:00:00Z"))
    );
    assert_eq!(feb.1 - feb.0, 29 * DAY);
    let leap_day = bounds(CalendarUnit::Day, "UTC", "2028-02-29T23:59:59Z");
    assert_eq!(
        leap_day,
        (at("2028-02-29T00:00:00Z"), at("2028-03-01T00:00:00Z"))
    );
    let year = bounds(CalendarUnit::Year, "UTC", "2028-07-01T00:00:00Z");
    assert_eq!(year.1 - year.0, 366 * DAY);
    let plain = bounds(CalendarUnit::Month, "UTC", "2027-02-15T00:00:00Z");
    assert_eq!(plain.1 - plain.0, 28 * DAY);
    // 2100 is not a leap year.
    let feb_2100 = bounds(CalendarUnit::Month, "UTC", "2100-02-10T00:00:00Z");
    assert_eq!(feb_2100.1 - feb_2100.0, 28 * DAY);
}

#[test]
fn the_year_ends_at_local_new_year() {
    let utc = bounds(CalendarUnit::Year, "UTC", "2026-12-31T23:59:59Z");
    assert_eq!(
        utc,
        (at("2026-01-01T00:00:00Z"), at("2027-01-01T00:00:00Z"))
    );
    let next = bounds(CalendarUnit::Year, "UTC", "2027-01-01T00:00:00Z");
    assert_eq!(next.0, utc.1);
    // New Year comes an hour earlier in Paris (UTC+1 in winter).
    let paris = bounds(CalendarUnit::Year, "Europe/Paris", "2026-12-31T23:30:00Z");
    assert_eq!(paris.0, at("2026-12-31T23:00:00Z"));
    let tokyo = bounds(CalendarUnit::Day, "Asia/Tokyo", "2026-12-31T15:00:00Z");
    assert_eq!(tokyo.0, at("2027-01-01T00:00:00+09:00"));
}

#[test]
fn daylight_saving_days_last_23_and_25_hours() {
    // Europe/Paris: clocks go forward at 02:00 on 29 March 2026 and back at 03:00 on 25 October.
    let spring = bounds(
        CalendarUnit::Day,
        "Europe/Paris",
        "2026-03-29T12:00:00+02:00",
    );
    assert_eq!(
        spring,
        (
            at("2026-03-29T00:00:00+01:00"),
            at("2026-03-30T00:00:00+02:00")
        )
    );
    assert_eq!(spring.1 - spring.0, 23 * HOUR);
    let autumn = bounds(CalendarUnit::Day, "Europe/Paris", "2026-10-25T01:30:00Z");
    assert_eq!(
        autumn,
        (
            at("2026-10-25T00:00:00+02:00"),
            at("2026-10-26T00:00:00+01:00")
        )
    );
    assert_eq!(autumn.1 - autumn.0, 25 * HOUR);
    // The weeks and months around them are an hour short and long too.
    let week = bounds(
        CalendarUnit::Week,
        "Europe/Paris",
        "2026-03-29T23:00:00+02:00",
    );
    assert_eq!(week.1 - week.0, 7 * DAY - HOUR);
    let october = bounds(
        CalendarUnit::Month,
        "Europe/Paris",
        "2026-10-31T23:59:59+01:00",
    );
    assert_eq!(october.1 - october.0, 31 * DAY + HOUR);
    // New York changes on other dates (8 March, 1 November 2026).
    let ny = bounds(
        CalendarUnit::Day,
        "America/New_York",
        "2026-03-08T12:00:00-04:00",
    );
    assert_eq!(ny.1 - ny.0, 23 * HOUR);
    let ny = bounds(
        CalendarUnit::Day,
        "America/New_York",
        "2026-11-01T12:00:00-05:00",
    );
    assert_eq!(ny.1 - ny.0, 25 * HOUR);
}

#[test]
fn a_week_starts_on_monday_at_local_midnight() {
    // 27 November 2026 is a Friday; 23 November a Monday.
    let week = bounds(
        CalendarUnit::Week,
        "Europe/Paris",
        "2026-11-27T10:00:00+01:00",
    );
    assert_eq!(
        week,
        (
            at("2026-11-23T00:00:00+01:00"),
            at("2026-11-30T00:00:00+01:00")
        )
    );
    let sunday = bounds(
        CalendarUnit::Week,
        "Europe/Paris",
        "2026-11-29T23:59:59+01:00",
    );
    assert_eq!(sunday, week);
    let monday = bounds(
        CalendarUnit::Week,
        "Europe/Paris",
        "2026-11-30T00:00:00+01:00",
    );
    assert_eq!(monday.0, week.1);
    // A week across the year end belongs to neither year.
    let new_year = bounds(CalendarUnit::Week, "UTC", "2027-01-01T00:00:00Z");
    assert_eq!(
        new_year,
        (at("2026-12-28T00:00:00Z"), at("2027-01-04T00:00:00Z"))
    );
}

#[test]
fn several_units_count_from_1970_so_three_months_are_quarters() {
    let q2 = cal(CalendarUnit::Month, 3, "UTC").bounds(at("2026-05-15T00:00:00Z"));
    assert_eq!(
        q2,
        Some(Bounds {
            start: at("2026-04-01T00:00:00Z"),
            end: at("2026-07-01T00:00:00Z"),
        })
    );
    let half = cal(CalendarUnit::Month, 6, "Europe/Berlin").bounds(at("2026-12-31T12:00:00Z"));
    assert_eq!(half.unwrap().start, at("2026-07-01T00:00:00+02:00"));
    let decade = cal(CalendarUnit::Year, 10, "UTC").bounds(at("2026-01-01T00:00:00Z"));
    assert_eq!(decade.unwrap().start, at("2020-01-01T00:00:00Z"));
    // Fortnights start on Mondays too.
    let two = cal(CalendarUnit::Week, 2, "UTC").bounds(at("2026-11-27T00:00:00Z"));
    let two = two.unwrap();
    assert_eq!(two.end - two.start, 14 * DAY);
    assert_eq!((two.start / DAY + 3) % 7, 0, "a Monday");
}

#[test]
fn zones_are_found_by_any_case_and_kept_once() {
    let a = Zone::get("europe/paris").unwrap();
    let b = Zone::get("Europe/Paris").unwrap();
    assert!(std::ptr::eq(a, b));
    assert_eq!(a.name(), "Europe/Paris");
    assert!(Zone::get("Europe/Pari").is_none());
    assert!(Zone::get("").is_none());
    assert_eq!(cal(CalendarUnit::Month, 3, "UTC").to_string(), "3month@UTC");
    assert_eq!(
        cal(CalendarUnit::Week, 1, "europe/berlin").to_string(),
        "week@Europe/Berlin"
    );
}

#[test]
fn a_fixed_window_on_a_calendar_resets_at_the_real_boundary() {
    // A nominal month is 30 days: an epoch window would reset elsewhere.
    let month = Window::from_secs(2_592_000).unwrap().with_calendar(cal(
        CalendarUnit::Month,
        1,
        "Europe/Berlin",
    ));
    let now = Timestamp::from_secs(at("2026-02-28T22:00:00Z"));
    let mut state = fixed_window::FixedWindowState::default();
    let d = fixed_window::apply(&mut state, 2, month, 3, now);
    assert!(d.over_limit);
    // Berlin's March begins at 23:00 UTC.
    assert_eq!(d.reset_after, Duration::from_secs(HOUR));
    assert_eq!(
        d.expires_at,
        Timestamp::from_secs(at("2026-02-28T23:00:00Z"))
    );
    assert_eq!(state.window_start, at("2026-01-31T23:00:00Z"));
    assert_eq!(month.key_ttl_secs(now), HOUR);
    let march = Timestamp::from_secs(at("2026-02-28T23:00:00Z"));
    let d = fixed_window::apply(&mut state, 2, month, 1, march);
    assert_eq!((d.over_limit, d.before, d.after), (false, 0, 1));
    assert_eq!(d.reset_after, Duration::from_secs(31 * DAY - HOUR));
    // An epoch window keeps Go's TTL: its length, whatever the time.
    let epoch = Window::from_secs(2_592_000).unwrap();
    assert_eq!(epoch.key_ttl_secs(now), 2_592_000);
}

proptest! {
    /// Windows tile time: each contains its instant, starts where the previous one ended, and
    /// is the same window from any of its instants.
    #[test]
    fn windows_tile_time(
        // From 1976: the window before any window drawn here (at most 3 years, counted from
        // 1970 local time) still starts after the epoch in every zone.
        secs in 200_000_000u64..4_102_444_800,
        unit in prop_oneof![
            Just(CalendarUnit::Day), Just(CalendarUnit::Week),
            Just(CalendarUnit::Month), Just(CalendarUnit::Year),
        ],
        count in 1u32..4,
        zone in prop_oneof![
            Just("UTC"), Just("Europe/Paris"), Just("America/New_York"),
            Just("Australia/Lord_Howe"), Just("Asia/Kolkata"),
        ],
    ) {
        let c = cal(unit, count, zone);
        let b = c.bounds(secs).unwrap();
        prop_assert!(b.start <= secs && secs < b.end);
        prop_assert_eq!(c.bounds(b.start), Some(b));
        prop_assert_eq!(c.bounds(b.end - 1), Some(b));
        prop_assert_eq!(c.bounds(b.end).unwrap().start, b.end);
        prop_assert_eq!(c.bounds(b.start - 1).unwrap().end, b.start);
    }

    /// A UTC calendar day is Go's epoch day: days need no calendar in UTC.
    #[test]
    fn a_utc_day_is_the_epoch_day(secs in 0u64..4_102_444_800) {
        let b = cal(CalendarUnit::Day, 1, "UTC").bounds(secs).unwrap();
        prop_assert_eq!((b.start, b.end), (secs - secs % DAY, secs - secs % DAY + DAY));
    }
}

proptest! {
    /// The window kept per zone and unit answers exactly what placing the instant computes,
    /// whatever order instants come in and whatever windows of several units run alongside.
    #[test]
    fn the_kept_window_answers_as_the_computation(
        times in proptest::collection::vec((100_000_000u64..4_102_444_800, 0u32..3), 1..50),
    ) {
        for (now, extra) in times {
            for count in [1, 1 + extra] {
                let c = cal(CalendarUnit::Month, count, "America/Santiago");
                prop_assert_eq!(c.bounds(now), c.place(now));
                prop_assert_eq!(c.bounds(now + 1), c.place(now + 1));
            }
        }
    }
}
