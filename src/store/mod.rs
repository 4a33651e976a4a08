//! The store: the core's [`Store`] trait, memory store, leases and local cache (re-exported, so
//! `crate::store::…` names them as before), and the server's own implementations, [`redis`] and [`memcache`].

pub use ratelimitd_core::store::*;

pub mod leases;
pub mod memcache;
mod options;
pub mod redis;

pub use options::{Backend, Resilience};
