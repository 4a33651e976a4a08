//! Starting the configuration source the settings pick (`CONFIG_TYPE`): the first file load, or
//! the xDS client and its first push.

use std::future::Future;

use tokio::task::JoinSet;

use super::AppError;
use crate::reload::Reloading;
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
