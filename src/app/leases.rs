//! Giving unspent token leases back (`store::lease`): after a reload — a limit's rate or lease
//! may have changed, and the new limit should start from the counter's truth — and once the
//! drain has finished on shutdown, so a stopped instance leaves nothing reserved behind. Once a
//! second, token bucket leases whose TTL passed give their unspent tokens back as well.

use std::future::Future;
use std::sync::Arc;

use super::tasks::{Background, every_second};
use crate::clock::Clock;
use crate::reload::ConfigHandle;
use crate::store::Store;

/// What gives the leases back: the store that holds them and the clock of decisions.
#[derive(Debug, Clone)]
pub(super) struct Release {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn Clock>,
}

impl Release {
    /// The leases of `store`, given back on every reload of `config` by a task in `bg` (see
    /// [`Release::on_reload`]) and, through the returned handle, after the drain.
    pub(super) fn start(
        store: &Arc<dyn Store>,
        clock: &Arc<dyn Clock>,
        config: &Arc<ConfigHandle>,
        bg: &mut Background<'_>,
    ) -> Release {
        let release = Release {
            store: store.clone(),
            clock: clock.clone(),
        };
        bg.spawn(release.clone().on_reload(config.clone(), bg.stopped()));
        release
    }

    /// Gives every unspent lease back now.
    pub(super) async fn now(&self) {
        self.store.release_leases(self.clock.now()).await;
    }

    /// Watches `config` once a second and gives the leases back after each new version (every
    /// reload, whichever source published it), else only the expired ones, until `stop`.
    ///
    /// The task may start before the first configuration is loaded; that first load (version 1,
    /// the first a handle publishes) is not a reload: no lease can predate it, and releasing a
    /// second later would hand back leases taken under the very configuration that just loaded.
    async fn on_reload(self, config: Arc<ConfigHandle>, stop: impl Future<Output = ()>) {
        let version = || config.snapshot().map_or(0, |s| s.version);
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
