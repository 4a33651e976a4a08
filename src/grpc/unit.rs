//! The one mapping between [`Unit`] and its number in `RateLimitResponse.RateLimit.Unit`. Proto
//! numbers are a wire detail, so they live at the gRPC edge, next to the generated enum they come
//! from, rather than in `config`. `/json` speaks the same message in protojson, which accepts
//! enum numbers too, so `http::json` calls this module instead of keeping a second table: a
//! sideways arrow between the two edges (grpc never imports http), and one place to change if
//! the proto ever grows a unit.

use super::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as PbUnit;
use ratelimitd_core::config::Unit;

/// The proto number of `u` (WEEK is 7: it was added after YEAR).
pub(crate) fn to_proto_number(u: Unit) -> i32 {
    let pb = match u {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Week,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
    };
    pb as i32
}

/// The unit with proto number `n`; 0 (UNKNOWN) and numbers the proto does not define give `None`,
/// which callers treat as "no unit given", as the Go service does. Request overrides carry
/// `envoy.type.v3.RateLimitUnit`, which has no WEEK, but their number is read raw against the
/// response's enum, so 7 means WEEK there too (as in the Go service).
pub(crate) fn from_proto_number(n: i32) -> Option<Unit> {
    match PbUnit::try_from(n).ok()? {
        PbUnit::Unknown => None,
        PbUnit::Second => Some(Unit::Second),
        PbUnit::Minute => Some(Unit::Minute),
        PbUnit::Hour => Some(Unit::Hour),
        PbUnit::Day => Some(Unit::Day),
        PbUnit::Week => Some(Unit::Week),
        PbUnit::Month => Some(Unit::Month),
        PbUnit::Year => Some(Unit::Year),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto_numbers_round_trip() {
        for u in Unit::ALL {
            assert_eq!(from_proto_number(to_proto_number(u)), Some(u));
        }
        assert_eq!(to_proto_number(Unit::Second), 1);
        assert_eq!(to_proto_number(Unit::Year), 6);
        assert_eq!(to_proto_number(Unit::Week), 7);
        assert_eq!(from_proto_number(0), None);
        assert_eq!(from_proto_number(8), None);
        assert_eq!(from_proto_number(-1), None);
    }
}
