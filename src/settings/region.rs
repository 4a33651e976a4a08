//! The region settings: `REGION` (the region this instance serves; limits with `regions` count
//! against its share there), the global store the regions share (`GLOBAL_REDIS_*`, read by the
//! same parser and under the same TLS and auth rules as `REDIS_*`; absent = no global store) and
//! `REGION_SYNC_INTERVAL`, how often demand-following shares are synchronised through it.

use std::time::Duration;

use super::redis;
use super::{SettingsError, Vars, parse};
pub(crate) use crate::region::RegionSettings;
use ratelimitd_core::config::valid_region;

/// Reads the region settings.
pub(super) fn from_vars(v: &Vars) -> Result<RegionSettings, SettingsError> {
    let region = v.parse("REGION", None, |s| {
        if valid_region(s) {
            Ok(Some(s.to_string()))
        } else {
            Err("expected a region name of 1 to 64 letters, digits, '-', '_' or '.'".into())
        }
    })?;
    let global = match v.get("GLOBAL_REDIS_URL") {
        Some(_) => Some(redis::one(v, "GLOBAL_REDIS_", "")?),
        None => None,
    };
    let skip = v.bool("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)?;
    redis::refuse_sentinel_tls_skip(skip, global.iter())?;
    let at_least = |min: Duration| {
        move |s: &str| {
            let d = parse::go_duration(s)?;
            if d < min {
                return Err(format!("expected a duration of at least {min:?}"));
            }
            Ok(d)
        }
    };
    let settings = RegionSettings {
        region,
        global,
        global_response_timeout: v.parse(
            "GLOBAL_REDIS_RESPONSE_TIMEOUT",
            Duration::from_millis(500),
            at_least(Duration::from_millis(1)),
        )?,
        sync_interval: v.parse(
            "REGION_SYNC_INTERVAL",
            Duration::from_secs(1),
            at_least(Duration::from_millis(100)),
        )?,
    };
    // Checked last, so the other region settings are read (and reported) too; an invalid
    // REGION was reported already and is not also "missing".
    if let (Some(g), None) = (&settings.global, v.get("REGION")) {
        return Err(SettingsError {
            name: "GLOBAL_REDIS_URL".into(),
            value: g.url.clone(),
            also: Vec::new(),
            reason: "the global store is shared by regions: set REGION too".into(),
        });
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::super::Settings;
    use super::*;

    fn region(pairs: &[(&str, &str)]) -> Result<RegionSettings, SettingsError> {
        let env = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Settings::from_env(env.collect::<Vec<_>>()).map(|s| s.region)
    }

    #[test]
    fn absent_means_no_region_and_no_global_store() {
        let r = region(&[]).unwrap();
        assert!(r.region.is_none() && r.global.is_none());
        assert_eq!(r.sync_interval, Duration::from_secs(1));
    }

    #[test]
    fn the_global_store_reads_like_the_regional_one() {
        let r = region(&[
            ("REGION", "eu-west"),
            ("GLOBAL_REDIS_URL", "10.0.0.1:6379"),
            ("GLOBAL_REDIS_SOCKET_TYPE", "tcp"),
            ("GLOBAL_REDIS_TLS", "true"),
            ("GLOBAL_REDIS_AUTH", "user:pw"),
            ("REGION_SYNC_INTERVAL", "250ms"),
        ])
        .unwrap();
        let g = r.global.unwrap();
        assert_eq!(
            (g.url.as_str(), g.unix_socket, g.tls),
            ("10.0.0.1:6379", false, true)
        );
        assert_eq!(g.auth.0, "user:pw");
        assert_eq!(r.region.as_deref(), Some("eu-west"));
        assert_eq!(r.sync_interval, Duration::from_millis(250));
    }

    #[test]
    fn bad_values_are_refused_with_the_variable_named() {
        let e = region(&[("GLOBAL_REDIS_URL", "10.0.0.1:6379")]).unwrap_err();
        assert_eq!(e.name, "GLOBAL_REDIS_URL");
        assert!(e.reason.contains("set REGION"), "{e}");
        let e = region(&[("REGION", "eu west")]).unwrap_err();
        assert_eq!(e.name, "REGION");
        let e = region(&[("REGION", "eu"), ("REGION_SYNC_INTERVAL", "10ms")]).unwrap_err();
        assert_eq!(e.name, "REGION_SYNC_INTERVAL");
        let bad_type = [
            ("REGION", "eu"),
            ("GLOBAL_REDIS_URL", "x:1"),
            ("GLOBAL_REDIS_TYPE", "ring"),
        ];
        assert_eq!(region(&bad_type).unwrap_err().name, "GLOBAL_REDIS_TYPE");
        let sentinel = [
            ("REGION", "eu"),
            ("GLOBAL_REDIS_URL", "m,10.0.0.1:26379"),
            ("GLOBAL_REDIS_TYPE", "sentinel"),
            ("GLOBAL_REDIS_TLS", "true"),
            ("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true"),
        ];
        assert_eq!(
            region(&sentinel).unwrap_err().name,
            "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
            "the regional store's TLS rule holds for the global one"
        );
    }
}
