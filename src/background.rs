//! Background tasks and the shutdown flag they end on: every feature's `start` (the policy
//! database's, insight's, ...) spawns its loops into one [`Background`], and each loop returns
//! when the flag turns true, so the composition root drains them all together.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

/// Where a feature spawns its background tasks, and the flag that stops them.
#[derive(Debug)]
pub struct Background<'a> {
    /// The process's tasks, drained at shutdown.
    pub tasks: &'a mut JoinSet<()>,
    /// The shutdown flag.
    pub stop: &'a watch::Receiver<bool>,
}

impl Background<'_> {
    /// The same tasks and flag, lent for a while (to one feature's `start`).
    pub fn reborrow(&mut self) -> Background<'_> {
        Background {
            tasks: self.tasks,
            stop: self.stop,
        }
    }

    /// Spawns `task` among the process's tasks.
    pub fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(task);
    }

    /// A future resolving at shutdown, for a task to end on.
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        stopped(self.stop.clone())
    }
}

/// Resolves when the shutdown flag turns true (or its sender is gone).
pub(crate) async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Runs `round` once a second until `stop` (a round in progress finishes first).
pub(crate) async fn every_second<F, Fut>(stop: impl Future<Output = ()>, mut round: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tick.tick() => round().await,
        }
    }
}
