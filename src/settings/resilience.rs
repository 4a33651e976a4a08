//! What the service does when its store cannot answer: the circuit breaker put around each Redis
//! target (`REDIS_BREAKER_*`), and the failure mode of limits that do not name their own
//! (`DEFAULT_FAILURE_MODE`). The [`FailureMode`] type is the core config's
//! (`rate_limit.failure_mode`), re-exported here where the service-wide setting names it.

use std::time::Duration;

use super::{SettingsError, Vars, parse};

pub use crate::config::FailureMode;

/// The breaker and fallback settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resilience {
    /// `REDIS_BREAKER_FAILURES`: failure events in a row on one Redis target that open its
    /// breaker, and failed probes in a row that reopen it (0 = no breaker). Calls that fail
    /// together are one event; see `resilience::breaker`.
    pub breaker_failures: u32,
    /// `REDIS_BREAKER_COOLDOWN`: how long an open breaker answers without trying Redis before it
    /// lets probe calls through, one at a time.
    pub breaker_cooldown: Duration,
    /// `DEFAULT_FAILURE_MODE`: the failure mode of limits that do not set `failure_mode`.
    pub default_failure_mode: FailureMode,
}

impl Default for Resilience {
    fn default() -> Resilience {
        Resilience {
            breaker_failures: 3,
            breaker_cooldown: Duration::from_millis(500),
            default_failure_mode: FailureMode::Error,
        }
    }
}

pub(super) fn from_vars(v: &Vars) -> Result<Resilience, SettingsError> {
    let d = Resilience::default();
    Ok(Resilience {
        breaker_failures: v.parse("REDIS_BREAKER_FAILURES", d.breaker_failures, |s| {
            parse::uint_in(s, 0, 1_000_000).map(|n| n as u32)
        })?,
        breaker_cooldown: v.parse(
            "REDIS_BREAKER_COOLDOWN",
            d.breaker_cooldown,
            parse::go_duration,
        )?,
        default_failure_mode: v.parse("DEFAULT_FAILURE_MODE", d.default_failure_mode, |s| {
            FailureMode::parse(s).ok_or_else(|| FailureMode::EXPECTED.to_string())
        })?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    fn settings(env: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        Settings::from_env(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn breaker_and_default_mode_read_their_variables() {
        let s = settings(&[]).unwrap().resilience;
        assert_eq!(s, Resilience::default());
        let s = settings(&[
            ("REDIS_BREAKER_FAILURES", "5"),
            ("REDIS_BREAKER_COOLDOWN", "2s"),
            ("DEFAULT_FAILURE_MODE", "local"),
        ])
        .unwrap()
        .resilience;
        assert_eq!(s.breaker_failures, 5);
        assert_eq!(s.breaker_cooldown, Duration::from_secs(2));
        assert_eq!(s.default_failure_mode, FailureMode::Local);
        let e = settings(&[("DEFAULT_FAILURE_MODE", "open")]).unwrap_err();
        assert_eq!(e.name, "DEFAULT_FAILURE_MODE");
        assert_eq!(e.reason, FailureMode::EXPECTED);
    }
}
