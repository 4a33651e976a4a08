//! Process signals: SIGTERM and SIGINT start the graceful shutdown (a second one cuts its
//! `SHUTDOWN_DELAY` short); SIGHUP reloads the configuration. (The Go service shuts down on
//! SIGHUP too; a reload is what operators of a file configured daemon expect, and the file
//! watcher makes it rarely needed.)
//!
//! The handlers are installed before any port opens ([`Signals::install`], first thing in
//! [`super::run`]): whoever sees a port answer may signal the process at once, and a signal that
//! arrived before the handlers would meet its default disposition — SIGHUP kills the process, and
//! as PID 1 in a container SIGTERM is dropped by the kernel. A signal caught before the service
//! is ready waits in its stream until it is.

use super::Running;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The process's signal streams, listening from [`Signals::install`] on.
#[derive(Debug)]
pub(crate) struct Signals {
    // `None` when the handlers cannot be installed: only Ctrl-C then stops the process.
    streams: Option<Streams>,
}

#[derive(Debug)]
struct Streams {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    /// Installs the handlers of SIGTERM, SIGINT and SIGHUP; from here on each of them is kept
    /// until it is waited for. Needs a Tokio runtime.
    pub(crate) fn install() -> Signals {
        let (term, int, hup) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        );
        let streams = match (term, int, hup) {
            (Ok(term), Ok(int), Ok(hup)) => Some(Streams { term, int, hup }),
            _ => {
                tracing::warn!("cannot install signal handlers; stopping on Ctrl-C only");
                None
            }
        };
        Signals { streams }
    }

    /// Returns when SIGTERM or SIGINT arrives (or arrived since the last wait); reloads the
    /// configuration on every SIGHUP meanwhile.
    pub(crate) async fn serve_until_shutdown(&mut self, running: &Running) {
        let Some(s) = self.streams.as_mut() else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        loop {
            tokio::select! {
                _ = s.term.recv() => return,
                _ = s.int.recv() => return,
                _ = s.hup.recv() => {
                    tracing::info!("SIGHUP: reloading the configuration");
                    running.reload_now().await;
                }
            }
        }
    }

    /// Returns at the next SIGTERM or SIGINT (at Ctrl-C when the handlers are not installed,
    /// never if that cannot be waited for either). A SIGHUP meanwhile stays pending.
    pub(crate) async fn stop_requested(&mut self) {
        let Some(s) = self.streams.as_mut() else {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            return;
        };
        tokio::select! {
            _ = s.term.recv() => {}
            _ = s.int.recv() => {}
        }
    }
}
