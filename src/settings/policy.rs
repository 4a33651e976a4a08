//! The policy database and its management API (issue 16): where rules and overrides are stored,
//! how often they are re-read, and the bearer tokens of the admin API.

use std::path::PathBuf;
use std::time::Duration;

use super::violations::{self, ViolationSettings};
use super::{SettingsError, Vars, kinds::Secret, parse};

/// `POLICY_*`, `RATELIMITD_DATA_DIR`, `ADMIN_TOKEN[_FILE]`, `VIOLATIONS_*`.
#[derive(Debug, Clone)]
pub struct PolicySettings {
    /// `POLICY_ENABLED` (default true): false turns the policy database and its API off.
    pub enabled: bool,
    /// `RATELIMITD_DATA_DIR` (default `./data`): the embedded SQLite file `policy.db` lives here.
    pub data_dir: PathBuf,
    /// `POLICY_DB_URL`: a PostgreSQL URL shared by every instance (instead of SQLite).
    pub db_url: Option<Secret>,
    /// `ADMIN_TOKEN`: the bearer token of the management API, named `admin` in the change log.
    pub admin_token: Option<Secret>,
    /// `ADMIN_TOKEN_FILE`: a file of `name:token` lines, one token each.
    pub admin_token_file: Option<PathBuf>,
    /// `POLICY_REFRESH_INTERVAL` (default 30s): every instance re-reads the database this often,
    /// in case a change notification was lost.
    pub refresh_interval: Duration,
    /// `POLICY_MAX_OVERRIDES` (default 10000): active overrides accepted, which bounds the stats
    /// names they add.
    pub max_overrides: usize,
    /// The violation log written to this database ([`violations`]).
    pub violations: ViolationSettings,
}

pub(super) fn from_vars(v: &Vars) -> Result<PolicySettings, SettingsError> {
    let nonempty = |name: &str| {
        v.get(name)
            .map(|(s, _)| s.clone())
            .filter(|s| !s.is_empty())
    };
    Ok(PolicySettings {
        enabled: v.bool("POLICY_ENABLED", true)?,
        data_dir: PathBuf::from(v.string("RATELIMITD_DATA_DIR", "./data")),
        db_url: nonempty("POLICY_DB_URL").map(Secret),
        admin_token: super::admin::admin_token(v)?,
        admin_token_file: nonempty("ADMIN_TOKEN_FILE").map(PathBuf::from),
        refresh_interval: v.parse("POLICY_REFRESH_INTERVAL", Duration::from_secs(30), |s| {
            match parse::go_duration(s)? {
                d if d.is_zero() => Err("must be above zero".to_string()),
                d => Ok(d),
            }
        })?,
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
        let s = settings(&[
            ("POLICY_ENABLED", "false"),
            ("RATELIMITD_DATA_DIR", "/tmp/x"),
            ("ADMIN_TOKEN", "s3cret"),
            ("POLICY_REFRESH_INTERVAL", "5s"),
        ])
        .policy;
        assert!(!s.enabled);
        assert_eq!(s.admin_token.unwrap().0, "s3cret");
        assert_eq!(s.refresh_interval, std::time::Duration::from_secs(5));
        let bad = Settings::from_env([("POLICY_REFRESH_INTERVAL".into(), "0s".into())]);
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("POLICY_REFRESH_INTERVAL")
        );
    }
}
