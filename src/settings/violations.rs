//! The `VIOLATIONS_*` and `INSTANCE_ID` variables, translated into the violation log's options
//! ([`crate::policy::violations::ViolationOptions`]): where records go, how they are queued and
//! batched, and how long they are kept. ratelimitd's own settings.

use std::time::Duration;

use super::{SettingsError, Vars, parse};
use crate::policy::violations::{ViolationOptions, ViolationSinks};

pub(super) fn from_vars(v: &Vars) -> Result<ViolationOptions, SettingsError> {
    let positive = |s: &str| match parse::go_duration(s)? {
        d if d.is_zero() => Err("must be above zero".to_string()),
        d => Ok(d),
    };
    Ok(ViolationOptions {
        sinks: v.parse("VIOLATIONS_LOG", ViolationSinks::Db, |s| {
            match s.to_ascii_lowercase().as_str() {
                "db" => Ok(ViolationSinks::Db),
                "json" => Ok(ViolationSinks::Json),
                "both" => Ok(ViolationSinks::Both),
                "off" => Ok(ViolationSinks::Off),
                _ => Err("must be db, json, both or off".to_string()),
            }
        })?,
        queue_size: v.parse("VIOLATIONS_QUEUE_SIZE", 10_000, |s| {
            parse::uint_in(s, 1, 10_000_000).map(|n| n as usize)
        })?,
        batch_size: v.parse("VIOLATIONS_BATCH_SIZE", 500, |s| {
            parse::uint_in(s, 1, 1000).map(|n| n as usize)
        })?,
        batch_delay: v.parse("VIOLATIONS_BATCH_DELAY", Duration::from_secs(1), positive)?,
        retention_days: v.parse("VIOLATIONS_RETENTION_DAYS", 7, |s| {
            parse::uint_in(s, 0, 36_500).map(|n| n as u32)
        })?,
        retention_interval: v.parse(
            "VIOLATIONS_RETENTION_INTERVAL",
            Duration::from_secs(3600),
            positive,
        )?,
        instance_id: v
            .get("INSTANCE_ID")
            .map(|(s, _)| s.clone())
            .filter(|s| !s.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    fn env(pairs: &[(&str, &str)]) -> Result<ViolationOptions, SettingsError> {
        let vars = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Settings::from_env(vars).map(|s| s.policy.violations)
    }

    #[test]
    fn defaults_values_and_errors_naming_the_variable() {
        let d = env(&[]).unwrap();
        assert_eq!(d.sinks, ViolationSinks::Db);
        assert_eq!(
            (d.queue_size, d.batch_size, d.retention_days),
            (10_000, 500, 7)
        );
        let s = env(&[("VIOLATIONS_LOG", "both"), ("INSTANCE_ID", "pod-1")]).unwrap();
        assert!(s.sinks.db() && s.sinks.json());
        assert_eq!(s.instance_id.as_deref(), Some("pod-1"));
        for (name, bad) in [
            ("VIOLATIONS_LOG", "syslog"),
            ("VIOLATIONS_QUEUE_SIZE", "0"),
            ("VIOLATIONS_BATCH_SIZE", "1001"),
            ("VIOLATIONS_BATCH_DELAY", "0s"),
        ] {
            assert_eq!(env(&[(name, bad)]).unwrap_err().name, name);
        }
    }
}
