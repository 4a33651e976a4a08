//! Which configuration source starts, as `CONFIG_TYPE` says: the files (`reload::start`) or the
//! xDS client (`xds::start`), and whether an empty start is allowed.

use super::AppError;
use crate::background::Background;
use crate::reload::{ConfigHandle, ConfigType, Reloading};
use crate::settings::Settings;
use crate::xds::XdsDeps;

/// Loads the files, or starts the xDS client and waits for its first push unless
/// `FORCE_START_WITHOUT_INITIAL_CONFIG` (over xDS this waits as long as the server is away).
pub(super) async fn start(
    settings: &Settings,
    reloading: &Reloading,
    background: Background<'_>,
) -> Result<(), AppError> {
    match settings.config_type {
        ConfigType::File => crate::reload::start(reloading).await,
        ConfigType::GrpcXdsSotw => {
            let deps = XdsDeps {
                reloading,
                wait_for_first_push: !settings.force_start_without_initial_config,
                background,
            };
            crate::xds::start(&settings.xds, deps).await?;
        }
    }
    Ok(())
}

/// After the first load from files: refuses an empty configuration (`reload::refuse_empty`)
/// unless `ALLOW_EMPTY_CONFIG`, or a policy database the API can write to, allows it. Over xDS an
/// empty start is always allowed: the management server fills it in.
pub(super) fn refuse_empty(settings: &Settings, config: &ConfigHandle) -> Result<(), AppError> {
    if settings.config_type != ConfigType::File {
        return Ok(());
    }
    let policy = &settings.policy;
    let writable_db = policy.enabled
        && (policy.admin_token.is_some()
            || policy.admin_token_file.is_some()
            || policy.admin_tokens_file.is_some()
            || policy.db_url.is_some());
    let allowed = settings.allow_empty_config || writable_db;
    crate::reload::refuse_empty(config, &settings.config_source(), allowed)
        .map_err(AppError::EmptyConfig)
}
