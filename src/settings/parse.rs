//! Parsers for setting values with the Go service's semantics (envconfig): Go's `ParseBool`
//! spellings, Go duration syntax, bounded integers.

use std::time::Duration;

/// Parses a boolean exactly as Go's `strconv.ParseBool`.
pub fn go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err("expected a boolean (true, false, 1, 0, t, f)".into()),
    }
}

/// Parses a Go duration (`300ms`, `1.5h`, `1h30m`, `10s`, `150us`); `0` alone is allowed.
pub fn go_duration(s: &str) -> Result<Duration, String> {
    const ERR: &str = "expected a duration such as 10s, 500ms or 1h30m";
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return Err(ERR.into());
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or(ERR)?;
        let number: f64 = rest[..num_len].parse().map_err(|_| ERR.to_string())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos_per_unit = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(ERR.into()),
        };
        total += number * nanos_per_unit;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() || total > u64::MAX as f64 {
        return Err("duration out of range".into());
    }
    Ok(Duration::from_nanos(total as u64))
}

/// Parses an unsigned integer within `[min, max]`.
pub fn uint_in(s: &str, min: u64, max: u64) -> Result<u64, String> {
    s.parse::<u64>()
        .ok()
        .filter(|v| (min..=max).contains(v))
        .ok_or_else(|| format!("expected an integer from {min} to {max}"))
}

/// Parses a port number.
pub(crate) fn port(s: &str) -> Result<u16, String> {
    uint_in(s, 0, u64::from(u16::MAX)).map(|v| v as u16)
}

/// A comma-separated `host:port` list (DNS names allowed, empty items skipped), each port numeric.
pub(crate) fn host_ports(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.rsplit_once(':') {
            Some((host, p)) if !host.is_empty() && port(p).is_ok() => out.push(item.to_string()),
            _ => {
                return Err(format!(
                    "{item:?} is not host:port (a comma-separated list)"
                ));
            }
        }
    }
    Ok(out)
}

/// Parses a float within `[0, 1]`.
pub(crate) fn ratio(s: &str) -> Result<f32, String> {
    s.parse::<f32>()
        .ok()
        .filter(|v| (0.0..=1.0).contains(v))
        .ok_or_else(|| "expected a number from 0 to 1".into())
}

/// Parses a soft-breach ratio: a share of a limit above 0, at most
/// [`ratelimitd_core::config::shedding::MAX_SOFT_UP_TO`] (a limit's soft zone ends there at the latest).
pub(crate) fn breach_ratio(s: &str) -> Result<Option<f64>, String> {
    let max = ratelimitd_core::config::shedding::MAX_SOFT_UP_TO;
    s.parse::<f64>()
        .ok()
        .filter(|v| *v > 0.0 && *v <= max)
        .map(Some)
        .ok_or_else(|| format!("expected a share of the limit above 0, at most {max} (e.g. 0.8)"))
}

/// Parses a Go duration that bounds every call to a store (`what`, e.g. `memcached`): above 0.
pub(crate) fn call_timeout(s: &str, what: &str) -> Result<Duration, String> {
    match go_duration(s)? {
        t if t.is_zero() => Err(format!(
            "must be more than 0 (every {what} call is bounded)"
        )),
        t => Ok(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bools_follow_go() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(go_bool(t), Ok(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(go_bool(f), Ok(false));
        }
        for bad in ["", "yes", "tRUE", "2"] {
            assert!(go_bool(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_follow_go() {
        assert_eq!(go_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(go_duration("150us"), Ok(Duration::from_micros(150)));
        assert_eq!(go_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(go_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "10", "-1s", "1x", "s", "1..2s"] {
            assert!(go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn numbers_are_range_checked() {
        assert_eq!(port("8081"), Ok(8081));
        assert!(port("65536").is_err());
        assert!(port("").is_err());
        assert_eq!(ratio("0.8"), Ok(0.8));
        assert!(ratio("1.5").is_err());
        assert_eq!(breach_ratio("0.8"), Ok(Some(0.8)));
        assert_eq!(breach_ratio("1.1"), Ok(Some(1.1)));
        for bad in ["0", "-1", "11", "x"] {
            assert!(breach_ratio(bad).is_err(), "{bad}");
        }
        assert!(uint_in("0", 1, 10).is_err());
    }
}
