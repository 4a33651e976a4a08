//! How a limit's size reads to an operator, in `/rlconfig` and on the console: "N per unit" for
//! the limits that count per time, "N slots, lease timeout T s" for a concurrency limit, which
//! has no rate (its window is how long a slot may be held without a release).

use ratelimitd_core::algorithm::Algorithm;
use ratelimitd_core::config::Unit;

/// The size of a limit of `requests_per_unit` over `unit_multiplier` × `unit` (a config unit
/// name) under `algorithm` (its config name), e.g. `10 per 5 minute` or
/// `10 slots, lease timeout 60 s`.
pub(crate) fn rate(
    algorithm: &str,
    requests_per_unit: u32,
    unit_multiplier: u32,
    unit: &str,
) -> String {
    if algorithm == Algorithm::Concurrency.name() {
        let secs = Unit::parse(unit).map_or(0, ratelimitd_core::Unit::seconds)
            * u64::from(unit_multiplier);
        return format!("{requests_per_unit} slots, lease timeout {secs} s");
    }
    if unit_multiplier > 1 {
        format!("{requests_per_unit} per {unit_multiplier} {unit}")
    } else {
        format!("{requests_per_unit} per {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::rate;

    #[test]
    fn a_concurrency_limit_reads_as_slots_and_lease_timeout() {
        assert_eq!(
            rate("concurrency", 10, 2, "MINUTE"),
            "10 slots, lease timeout 120 s"
        );
        assert_eq!(rate("token_bucket", 10, 5, "second"), "10 per 5 second");
        assert_eq!(rate("fixed_window", 3, 1, "hour"), "3 per hour");
    }
}
