//! The loop that turns file events and a periodic tick into debounced reload rounds. Shared by the
//! rate limit configuration and the gRPC TLS certificates.

use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc;

use super::watch::{PathWatcher, WatchTarget};

/// How eagerly to react.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Quiet time after the last event before reloading: long enough for an editor's or
    /// Kubernetes' multi-step update to finish, short enough to apply changes within a second.
    pub debounce: Duration,
    /// Upper bound on the wait while events keep arriving.
    pub max_delay: Duration,
    /// Re-read this often even without events (missed events, filesystems without inotify);
    /// `None` for events only.
    pub poll_interval: Option<Duration>,
}

impl WatchOptions {
    /// 250 ms debounce, at most 1 s delay, the given poll interval.
    pub fn with_poll(poll_interval: Option<Duration>) -> WatchOptions {
        WatchOptions {
            debounce: Duration::from_millis(250),
            max_delay: Duration::from_secs(1),
            poll_interval,
        }
    }
}

/// Calls `round` after every debounced burst of changes under `targets` and on every poll tick,
/// until `stop` resolves. `round` re-reads and compares; it decides whether anything changed.
///
/// The watches are always in place before a read: the watcher is armed, then `round` runs once
/// (whatever changed since the owner's first load, before anything watched, is read there), and
/// each later round re-aims the watches first. A change that lands while a round reads therefore
/// raises an event and another round — even one inside a directory that was just re-created,
/// which only the re-aimed watch can see.
pub async fn watch_loop<F, Fut>(
    targets: Vec<WatchTarget>,
    opts: WatchOptions,
    stop: impl Future<Output = ()>,
    mut round: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let (tx, mut events) = mpsc::channel(1);
    let mut watcher = PathWatcher::new(targets, tx);
    tokio::pin!(stop);
    // A disabled poll still needs a timer for `select!`; a day is as good as never.
    let period = opts.poll_interval.unwrap_or(Duration::from_secs(24 * 3600));
    let mut poll = tokio::time::interval(period);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    poll.tick().await; // the first tick is immediate: the read after arming stands in for it
    loop {
        round().await;
        tokio::select! {
            _ = &mut stop => return,
            Some(()) = events.recv() => {
                let quiet = debounce(&mut events, opts, || watcher.writers_open());
                tokio::select! {
                    _ = &mut stop => return,
                    _ = quiet => {}
                }
            }
            _ = poll.tick() => {}
        }
        watcher.refresh();
    }
}

/// Waits until no event arrived for `debounce` and no file is left open by its writer (`cp` or a
/// plain write creates the file, then fills it: a read in between would see it empty), or until
/// `max_delay` passed.
async fn debounce(
    events: &mut mpsc::Receiver<()>,
    opts: WatchOptions,
    writers_open: impl Fn() -> bool,
) {
    let deadline = tokio::time::sleep(opts.max_delay);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = &mut deadline => return,
            _ = tokio::time::sleep(opts.debounce) => if !writers_open() { return },
            ev = events.recv() => if ev.is_none() { return },
        }
    }
}
