//! Process signals: SIGTERM and SIGINT start the graceful shutdown (a second one cuts its
//! `SHUTDOWN_DELAY` short); SIGHUP reloads the configuration. (The Go service shuts down on
//! SIGHUP too; a reload is what operators of a file configured daemon expect, and the file
//! watcher makes it rarely needed.)

use super::Running;

/// Returns when SIGTERM or SIGINT arrives; reloads the configuration on every SIGHUP meanwhile.
pub async fn serve_until_shutdown(running: &Running) {
    use tokio::signal::unix::{SignalKind, signal};
    let (term, int, hup) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    );
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (term, int, hup) else {
        tracing::warn!("cannot install signal handlers; stopping on Ctrl-C only");
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => return,
            _ = int.recv() => return,
            _ = hup.recv() => {
                tracing::info!("SIGHUP: reloading the configuration");
                running.reload_now().await;
            }
        }
    }
}

/// Returns at the next SIGTERM or SIGINT (never, if the handlers cannot be installed).
pub async fn stop_requested() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
