//! What the service does when its store cannot answer: the circuit breaker put around each Redis
//! target (`REDIS_BREAKER_*`), and the failure mode of limits that do not name their own
//! (`DEFAULT_FAILURE_MODE`). The [`FailureMode`] type is the core config's
//! (`rate_limit.failure_mode`), re-exported here where the service-wide setting names it.

use super::{SettingsError, Vars, parse};

pub(crate) use crate::store::Resilience;
pub(crate) use ratelimitd_core::config::FailureMode;

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
    use std::time::Duration;

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
