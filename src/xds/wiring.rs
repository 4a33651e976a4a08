//! The xDS configuration source's part of startup (`CONFIG_TYPE=GRPC_XDS_SOTW`): the client runs
//! among the background tasks and feeds the reload pipeline; startup waits for its first push to
//! be applied or refused, as the Go service waits for its first configuration event.

use super::{XdsClient, XdsError, XdsSettings};
use crate::background::Background;
use crate::reload::Reloading;

/// What the xDS client shares with the rest of the process.
#[derive(Debug)]
pub(crate) struct XdsDeps<'a> {
    /// The pipeline every push is applied through.
    pub reloading: &'a Reloading,
    /// False with `FORCE_START_WITHOUT_INITIAL_CONFIG`: start without waiting for the first push.
    pub wait_for_first_push: bool,
    /// Where the client runs.
    pub background: Background<'a>,
}

/// Starts the client; unless told not to, returns once its first push has been applied or
/// refused, which takes as long as the management server is away. Fails only on a bad URL or
/// unreadable TLS files.
pub(crate) async fn start(options: &XdsSettings, deps: XdsDeps<'_>) -> Result<(), XdsError> {
    let XdsDeps {
        reloading,
        wait_for_first_push,
        background: mut bg,
    } = deps;
    let client = XdsClient::new(options)?;
    let (first, first_applied) = tokio::sync::oneshot::channel();
    bg.spawn(client.run(reloading.clone(), Some(first), bg.stopped()));
    if wait_for_first_push {
        let _ = first_applied.await;
    }
    Ok(())
}
