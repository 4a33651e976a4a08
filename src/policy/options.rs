//! What the policy database is told at startup: whether it runs, where it lives (SQLite in the
//! data directory, or a shared PostgreSQL), the admin API's tokens, how often it is re-read and
//! purged, where its last good copy is kept, and its violation log. Read from `POLICY_*`,
//! `RATELIMITD_DATA_DIR`, `ADMIN_TOKEN[_FILE]` and `VIOLATIONS_*` by the settings.

use std::path::PathBuf;
use std::time::Duration;

use super::violations::ViolationOptions;
use crate::secret::Secret;

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
    /// `ADMIN_TOKENS_FILE`: a file of `name:token[:role]` lines (role `admin` or `read`), readable
    /// by its owner only.
    pub admin_tokens_file: Option<PathBuf>,
    /// `POLICY_REFRESH_INTERVAL` (default 30s): every instance re-reads the database this often,
    /// in case a change notification was lost.
    pub refresh_interval: Duration,
    /// `POLICY_MAX_OVERRIDES` (default 10000): active overrides accepted, which bounds the stats
    /// names they add.
    pub max_overrides: usize,
    /// `POLICY_SNAPSHOT_PATH` (default `policy-last-good.json` in `RATELIMITD_DATA_DIR`; `off`
    /// for none): the last good copy of the active overrides and rules, enforced while the
    /// database cannot be opened.
    pub snapshot_path: Option<PathBuf>,
    /// `POLICY_EXPIRED_RETENTION` (default 168h): an override is deleted this long after its
    /// `valid_until` (0: at the first purge after it).
    pub expired_retention: Duration,
    /// `POLICY_PURGE_INTERVAL` (default 1h): how often expired overrides are purged.
    pub purge_interval: Duration,
    /// The violation log written to this database.
    pub violations: ViolationOptions,
}

impl PolicySettings {
    /// Where the last good copy is kept, `None` when off.
    pub fn snapshot_path(&self) -> Option<PathBuf> {
        self.snapshot_path.clone()
    }
}
