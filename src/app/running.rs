//! A started service's life after [`super::start`]: SIGHUP's reload, the graceful stop (drain,
//! then the unspent leases go back), and [`run`], which ties them to the process signals.

use super::{AppError, Running, signals, start};
use crate::reload::ReloadOutcome;
use crate::settings::Settings;

impl Running {
    /// Re-reads the configuration now and publishes it even if unchanged (what SIGHUP does).
    /// Over xDS there is nothing to re-read: the configuration is what the server last pushed.
    pub async fn reload_now(&self) -> ReloadOutcome {
        if !self.from_files {
            return ReloadOutcome::Unchanged;
        }
        self.reloading.reload(true).await
    }

    /// Graceful stop: readiness turns false at once; the service keeps accepting and answering
    /// for `SHUTDOWN_DELAY` (so whatever still routes here meanwhile is served), then listeners
    /// stop accepting, requests in flight finish (for at most the drain timeout), and every task
    /// ends.
    pub async fn shutdown(self) {
        self.shutdown_unless(std::future::pending()).await;
    }

    /// [`Self::shutdown`], with the shutdown delay cut short when `hurry` resolves first (a second
    /// SIGTERM or Ctrl-C: an operator who asks twice wants the process gone now).
    pub async fn shutdown_unless(mut self, hurry: impl std::future::Future<Output = ()>) {
        self.health.set_draining().await;
        if !self.shutdown_delay.is_zero() {
            let delay = self.shutdown_delay;
            tracing::info!(
                ?delay,
                "not ready; still serving until the shutdown delay ends"
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = hurry => tracing::info!("stop asked again: the shutdown delay is cut short"),
            }
        }
        let _ = self.shutdown.send(true);
        let drain = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(self.drain_timeout, drain)
            .await
            .is_err()
        {
            tracing::warn!(timeout = ?self.drain_timeout, "drain timed out; aborting remaining work");
            self.tasks.abort_all();
        }
        // No request is left to spend them: the unspent leases go back to the shared counters.
        self.leases.now().await;
    }
}

/// Runs the service until SIGTERM or SIGINT, reloading the configuration on SIGHUP, then shuts
/// it down gracefully. The signal handlers are installed before anything starts, so a signal
/// sent as soon as a port answers is acted on (see `signals`); SIGTERM or SIGINT while the
/// service is still starting (waiting for Redis or a first xDS push) stops it there.
pub async fn run(settings: &Settings) -> Result<(), AppError> {
    let mut signals = signals::Signals::install();
    let running = tokio::select! {
        // Biased: a start that completes wins over a signal that arrived meanwhile, which the
        // served process then answers as usual (a drain).
        biased;
        started = Box::pin(start(settings)) => started?,
        () = signals.stop_requested() => {
            tracing::info!("shutdown requested while starting; stopping");
            return Ok(());
        }
    };
    signals.serve_until_shutdown(&running).await;
    tracing::info!("shutdown requested; draining");
    running.shutdown_unless(signals.stop_requested()).await;
    Ok(())
}
