//! The store: the core's [`Store`] trait, memory store, leases and local cache (re-exported, so
//! `crate::store::…` names them as before), the server's own implementations, [`redis`] and
//! [`memcache`], and the tasks that keep the core's stores in shape: [`leases`]' release and the
//! memory store's [`sweeper`]; [`stats`] registers its metrics.

pub use ratelimitd_core::store::*;

pub mod leases;
pub mod memcache;
mod options;
pub mod redis;
pub mod stats;
pub mod sweeper;

pub use options::{Backend, Resilience};
