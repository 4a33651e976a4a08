//! Validation of `calendar` and `time_zone` (ratelimitd extensions): a fixed window of a day,
//! week, month or year may follow the calendar of a time zone instead of the epoch
//! ([`crate::algorithm::calendar`]). Absent, a limit keeps Go's epoch-aligned window.

use super::error::{Sink, field_path};
use super::model::RawRateLimit;
use super::unit::Unit;
use crate::algorithm::Algorithm;
use crate::algorithm::calendar::Zone;

/// Checks `calendar` and `time_zone` of `rl` (unit `unit`, `None` when unlimited or invalid;
/// algorithm `algorithm`), reporting every misuse at its path. Returns the zone whose calendar
/// the window follows, `None` for an epoch window.
pub(super) fn check(
    rl: &RawRateLimit,
    unit: Option<Unit>,
    algorithm: Algorithm,
    sink: &mut Sink<'_>,
) -> Option<&'static Zone> {
    let at = |field: &str| field_path(&rl.path, field);
    let on = rl.calendar == Some(true);
    if !on {
        if rl.time_zone.is_some() {
            sink.push_hinted(
                &at("time_zone"),
                "time_zone only applies to a calendar window",
                Some("add `calendar: true`, or remove time_zone".into()),
            );
        }
        return None;
    }
    if rl.unlimited == Some(true) {
        sink.push(
            &at("calendar"),
            "should not specify calendar when unlimited",
        );
        return None;
    }
    let zone = zone(rl, sink);
    let unit = unit?;
    if unit.calendar().is_none() {
        sink.push_hinted(
            &at("calendar"),
            format!(
                "calendar applies to the units day, week, month and year, not {}",
                unit.as_str().to_ascii_lowercase()
            ),
            Some("remove `calendar: true`: a second, minute or hour window starts on the same boundaries either way".into()),
        );
        return None;
    }
    if algorithm != Algorithm::FixedWindow {
        sink.push(
            &at("calendar"),
            format!(
                "calendar only applies to fixed_window, not {} ({})",
                algorithm.name(),
                why_not(algorithm)
            ),
        );
        return None;
    }
    zone
}

/// Why a calendar makes no sense for `algorithm` (any but the fixed window).
fn why_not(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::SlidingWindow => {
            "it weighs the previous window by its overlap with the last window length, which needs windows of one length; calendar months and DST days differ"
        }
        Algorithm::SlidingLog => {
            "it counts the last window length before each request, which has no calendar boundary"
        }
        Algorithm::TokenBucket | Algorithm::LeakyBucket => {
            "it refills at a steady rate of requests_per_unit per window length, and a calendar unit has no single length"
        }
        Algorithm::Concurrency => "its window is the lease of a slot, not a period",
        Algorithm::FixedWindow => "",
    }
}

/// The zone named by `time_zone` (when absent the service's `CALENDAR_TIME_ZONE`, else UTC), or
/// `None` after reporting an unknown name.
fn zone(rl: &RawRateLimit, sink: &mut Sink<'_>) -> Option<&'static Zone> {
    let name = match (&rl.time_zone, sink.default_zone()) {
        (Some(name), _) => name.as_str(),
        (None, Some(zone)) => return Some(zone),
        (None, None) => return Some(Zone::utc()),
    };
    if let Some(zone) = Zone::get(name) {
        return Some(zone);
    }
    let hint = match nearest_zone(name) {
        Some(near) => format!("did you mean `{near}`?"),
        None => "an IANA time zone name such as Europe/Paris, America/New_York or UTC".into(),
    };
    sink.push_hinted(
        &field_path(&rl.path, "time_zone"),
        format!("unknown time zone '{name}'"),
        Some(hint),
    );
    None
}

/// The zone of the bundled database whose name is nearest to `name`, when it is close enough to
/// be a typo of it (`Europe/Pari` → `Europe/Paris`): the "did you mean" of a file's `time_zone`
/// and of the service's `CALENDAR_TIME_ZONE`.
pub fn nearest_zone(name: &str) -> Option<String> {
    let known: Vec<String> = jiff::tz::db()
        .available()
        .map(|n| n.as_str().to_owned())
        .collect();
    super::suggest::nearest(name, known.iter().map(String::as_str)).map(str::to_owned)
}
