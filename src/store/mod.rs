//! The store: the core's [`Store`] trait, memory store, leases and local cache (re-exported, so
//! `crate::store::…` names them as before), the server's own implementations, [`redis`] and
//! [`memcache`], and the tasks that keep the core's stores in shape: [`leases`]' release and the
//! memory store's [`sweeper`].

pub(crate) use ratelimitd_core::store::*;

pub(crate) mod leases;
pub(crate) mod memcache;
mod options;
pub(crate) mod redis;
pub(crate) mod sweeper;

pub(crate) use options::{Backend, Resilience};
