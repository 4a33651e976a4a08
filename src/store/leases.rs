//! Giving unspent token leases back (the core's `store::lease`): after a reload — a limit's rate
//! or lease may have changed, and the new limit should start from the counter's truth — and once
//! the drain has finished on shutdown, so a stopped instance leaves nothing reserved behind. Once
//! a second, token bucket leases whose TTL passed give their unspent tokens back as well.
//!
//! The store sits below the live configuration, so [`start`] is handed a reader of the
//! configuration's version rather than the configuration itself.

use std::future::Future;
use std::sync::Arc;

use super::Store;
use crate::background::{Background, every_second};
use ratelimitd_core::clock::Clock;

/// Reads the live configuration's version: 0 before the first load, then 1, 2, ... one per
/// configuration published.
pub(crate) type ConfigVersion = Arc<dyn Fn() -> u64 + Send + Sync>;

/// What the leases' release shares with the rest of the process.
#[derive(Debug)]
pub(crate) struct LeaseDeps<'a> {
    /// The store that holds the leases.
    pub store: &'a Arc<dyn Store>,
    /// The clock of decisions.
    pub clock: &'a Arc<dyn Clock>,
    /// Where the release task runs.
    pub background: Background<'a>,
}

/// What gives the leases back: the store that holds them and the clock of decisions. Kept by
/// the composition root to give them back after the drain ([`Release::now`]).
#[derive(Debug, Clone)]
pub(crate) struct Release {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
}

/// Starts giving the leases back on every reload (each new `version`)
/// and returns the handle that gives them back after the drain.
pub(crate) fn start(version: ConfigVersion, deps: LeaseDeps<'_>) -> Release {
    let LeaseDeps {
        store,
        clock,
        background: mut bg,
    } = deps;
    let release = Release {
        store: store.clone(),
        clock: clock.clone(),
    };
    bg.spawn(release.clone().on_reload(version, bg.stopped()));
    release
}

impl Release {
    /// Gives every unspent lease back now.
    pub(crate) async fn now(&self) {
        self.store.release_leases(self.clock.now()).await;
    }

    /// Reads `version` once a second and gives the leases back after each new one (every
    /// reload, whichever source published it), else only the expired ones, until `stop`.
    ///
    /// The task may start before the first configuration is loaded; that first load (version 1,
    /// the first a handle publishes) is not a reload: no lease can predate it, and releasing a
    /// second later would hand back leases taken under the very configuration that just loaded.
    async fn on_reload(self, version: ConfigVersion, stop: impl Future<Output = ()>) {
        let mut seen = version();
        every_second(stop, || {
            let current = version();
            let first_load = seen == 0 && current == 1;
            let changed = current != seen && !first_load;
            seen = current;
            let release = self.clone();
            async move {
                if changed {
                    release.now().await;
                } else {
                    let now = release.clock.now();
                    release.store.expire_leases(now).await;
                }
            }
        })
        .await;
    }
}
