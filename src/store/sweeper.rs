//! The memory store's sweeper: once a second it reclaims the entries whose window has passed, so
//! the store's memory follows the live keys rather than every key ever counted. The memory store
//! itself (the core's) runs no task; this is its part of startup.

use std::sync::Arc;

use crate::background::{Background, every_second};
use ratelimitd_core::clock::Clock;
use ratelimitd_core::store::memory::MemoryStore;

/// Starts sweeping `store`'s expired entries once a second, by `clock`, until shutdown.
pub(crate) fn start(store: &Arc<MemoryStore>, clock: &Arc<dyn Clock>, mut bg: Background<'_>) {
    let (store, clock) = (store.clone(), clock.clone());
    let stop = bg.stopped();
    bg.spawn(async move {
        every_second(stop, || {
            store.sweep_at(clock.now());
            std::future::ready(())
        })
        .await;
    });
}
