//! Starting the configuration source the settings pick (`CONFIG_TYPE`): the first file load, or
//! the xDS client and its first push.

use std::future::Future;

use tokio::task::JoinSet;

use super::AppError;
use crate::reload::{ConfigHandle, Reloading};
use crate::settings::{ConfigType, Settings};
use crate::xds::XdsClient;

/// Loads the files, or starts the xDS client on `tasks` and waits for its first push to be applied
/// or refused (as the Go service waits for its first configuration event), unless
/// `FORCE_START_WITHOUT_INITIAL_CONFIG`. Over xDS this waits as long as the server is away.
pub(super) async fn start(
    settings: &Settings,
    reloading: &Reloading,
    tasks: &mut JoinSet<()>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AppError> {
    match settings.config_type {
        ConfigType::File => {
            reloading.reload(true).await;
        }
        ConfigType::GrpcXdsSotw => {
            let client = XdsClient::new(&settings.xds)?;
            let (first, first_applied) = tokio::sync::oneshot::channel();
            tasks.spawn(client.run(reloading.clone(), Some(first), stop));
            if !settings.force_start_without_initial_config {
                let _ = first_applied.await;
            }
        }
    }
    Ok(())
}

/// After the first load (files and policy database): with no domain at all, every request would
/// be allowed without a trace, which is how a misnamed variable or a wrong path fails open. That
/// refuses to start, naming what was searched, unless `ALLOW_EMPTY_CONFIG` or a source that fills
/// in later (xDS, a policy database the API can write to) makes an empty start legitimate; then
/// it is a warning at the default log level.
pub(super) fn refuse_empty(settings: &Settings, config: &ConfigHandle) -> Result<(), AppError> {
    if settings.config_type != ConfigType::File
        || config
            .snapshot()
            .is_some_and(|s| s.config.domain_count() > 0)
    {
        return Ok(());
    }
    let searched = settings.config_source().describe_searched();
    let failure = config
        .last_failure()
        .map(|f| format!("; the load failed:\n{}", f.errors))
        .unwrap_or_default();
    let policy = &settings.policy;
    let writable_db = policy.enabled
        && (policy.admin_token.is_some()
            || policy.admin_token_file.is_some()
            || policy.db_url.is_some());
    if settings.allow_empty_config || writable_db {
        tracing::warn!(
            "no rate limit domain loaded; searched {searched}; every request is allowed until one is{failure}"
        );
        return Ok(());
    }
    Err(AppError::EmptyConfig(format!(
        "no rate limit domain loaded; searched {searched}{failure}\n\
         Point RATELIMITD_CONFIG (or --config) at a config file or a directory of *.yaml files, \
         or set ALLOW_EMPTY_CONFIG=true to start with none (every request is then allowed)"
    )))
}
