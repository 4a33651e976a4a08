//! Time units of a limit, shared by the config, the limiter and the wire formats. Their proto
//! numbers are a gRPC detail and live in `grpc::unit`.

use std::fmt;

use crate::algorithm::calendar::CalendarUnit;

/// The unit a limit is expressed in. Windows are epoch-aligned fixed lengths, exactly as in
/// envoyproxy/ratelimit: a month is 30 days and a year 365 days, and weeks start on Thursday
/// 00:00 UTC (the Unix epoch's weekday). `calendar: true` opts a day, week, month or year into
/// real calendar windows instead ([`crate::algorithm::calendar`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// 1 second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3600 seconds.
    Hour,
    /// 86400 seconds.
    Day,
    /// 604800 seconds.
    Week,
    /// 30 days.
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    /// Every unit, shortest first.
    pub const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// The valid names, for error messages.
    pub const EXPECTED: &'static str =
        "one of second, minute, hour, day, week, month, year, in any case";

    /// Length of one window of this unit in seconds.
    pub fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 604_800,
            Unit::Month => 2_592_000,
            Unit::Year => 31_536_000,
        }
    }

    /// Parses a config unit name, case-insensitively (`second`, `Minute`, `WEEK`...).
    /// `unknown` and the empty string are not units.
    pub fn parse(name: &str) -> Option<Unit> {
        Unit::ALL
            .into_iter()
            .find(|u| u.as_str().eq_ignore_ascii_case(name))
    }

    /// The calendar unit of the same name (`calendar: true`); `None` for second, minute and hour,
    /// whose windows need no calendar.
    pub fn calendar(self) -> Option<CalendarUnit> {
        match self {
            Unit::Second | Unit::Minute | Unit::Hour => None,
            Unit::Day => Some(CalendarUnit::Day),
            Unit::Week => Some(CalendarUnit::Week),
            Unit::Month => Some(CalendarUnit::Month),
            Unit::Year => Some(CalendarUnit::Year),
        }
    }

    /// The upper-case name used on the wire and in `/rlconfig` (`SECOND`, `MINUTE`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Week => "WEEK",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_case_insensitively_and_rejects_unknown() {
        assert_eq!(Unit::parse("Second"), Some(Unit::Second));
        assert_eq!(Unit::parse("WEEK"), Some(Unit::Week));
        assert_eq!(Unit::parse("month"), Some(Unit::Month));
        assert_eq!(Unit::parse("unknown"), None);
        assert_eq!(Unit::parse(""), None);
    }

    #[test]
    fn window_lengths_match_the_go_service() {
        assert_eq!(Unit::Week.seconds(), 604_800);
        assert_eq!(Unit::Month.seconds(), 2_592_000);
        assert_eq!(Unit::Year.seconds(), 31_536_000);
    }
}
