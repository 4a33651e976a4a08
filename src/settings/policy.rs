//! The policy database and its management API: where rules and overrides are stored,
//! how often they are re-read, and the bearer tokens of the admin API.

use std::path::PathBuf;
use std::time::Duration;

use super::violations;
use super::{SettingsError, Vars, kinds::Secret, parse};

pub(crate) use crate::policy::PolicySettings;

/// The file name of the last good copy in the data directory.
const SNAPSHOT_FILE: &str = "policy-last-good.json";

pub(super) fn from_vars(v: &Vars) -> Result<PolicySettings, SettingsError> {
    let nonempty = |name: &str| {
        v.get(name)
            .map(|(s, _)| s.clone())
            .filter(|s| !s.is_empty())
    };
    let data_dir = PathBuf::from(v.string("RATELIMITD_DATA_DIR", "./data"));
    let snapshot_path = match v.string("POLICY_SNAPSHOT_PATH", "").as_str() {
        "" => Some(data_dir.join(SNAPSHOT_FILE)),
        "off" => None,
        p => Some(PathBuf::from(p)),
    };
    let above_zero = |s: &str| match parse::go_duration(s)? {
        d if d.is_zero() => Err("must be above zero".to_string()),
        d => Ok(d),
    };
    Ok(PolicySettings {
        enabled: v.bool("POLICY_ENABLED", true)?,
        snapshot_path,
        expired_retention: v.parse(
            "POLICY_EXPIRED_RETENTION",
            Duration::from_secs(7 * 86_400),
            parse::go_duration,
        )?,
        purge_interval: v.parse(
            "POLICY_PURGE_INTERVAL",
            Duration::from_secs(3600),
            above_zero,
        )?,
        data_dir,
        db_url: nonempty("POLICY_DB_URL").map(Secret),
        admin_token: super::admin::admin_token(v)?,
        admin_token_file: nonempty("ADMIN_TOKEN_FILE").map(PathBuf::from),
        admin_tokens_file: nonempty("ADMIN_TOKENS_FILE").map(PathBuf::from),
        refresh_interval: v.parse(
            "POLICY_REFRESH_INTERVAL",
            Duration::from_secs(30),
            above_zero,
        )?,
        max_overrides: v.parse("POLICY_MAX_OVERRIDES", 10_000, |s| {
            parse::uint_in(s, 1, 1_000_000).map(|n| n as usize)
        })?,
        violations: violations::from_vars(v)?,
    })
}

#[cfg(test)]
mod tests {
    use crate::settings::Settings;

    fn settings(env: &[(&str, &str)]) -> Settings {
        Settings::from_env(env.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap()
    }

    #[test]
    fn defaults_and_variables() {
        let d = settings(&[]).policy;
        assert!(d.enabled);
        assert_eq!(d.data_dir, std::path::PathBuf::from("./data"));
        assert!(d.db_url.is_none() && d.admin_token.is_none());
        assert_eq!(d.refresh_interval, std::time::Duration::from_secs(30));
        let last_good = std::path::Path::new("./data/policy-last-good.json");
        assert_eq!(d.snapshot_path.as_deref(), Some(last_good));
        assert_eq!(d.expired_retention, std::time::Duration::from_secs(604_800));
        assert_eq!(d.purge_interval, std::time::Duration::from_secs(3600));
        let s = settings(&[
            ("POLICY_ENABLED", "false"),
            ("RATELIMITD_DATA_DIR", "/tmp/x"),
            ("ADMIN_TOKEN", "s3cret"),
            ("POLICY_REFRESH_INTERVAL", "5s"),
            ("POLICY_SNAPSHOT_PATH", "off"),
            ("POLICY_EXPIRED_RETENTION", "0"),
        ])
        .policy;
        assert!(s.snapshot_path.is_none());
        assert!(s.expired_retention.is_zero());
        assert!(!s.enabled);
        assert_eq!(s.admin_token.unwrap().0, "s3cret");
        assert_eq!(s.refresh_interval, std::time::Duration::from_secs(5));
        let bad = Settings::from_env([("POLICY_REFRESH_INTERVAL".into(), "0s".into())]);
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("POLICY_REFRESH_INTERVAL")
        );
        let bad = Settings::from_env([("POLICY_PURGE_INTERVAL".into(), "0s".into())]);
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("POLICY_PURGE_INTERVAL")
        );
    }
}
