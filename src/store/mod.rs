//! The store: the server's own implementations of the core's [`Store`] trait, [`redis`],
//! [`memcache`] and [`dynamodb`], and the tasks that keep the core's stores in shape: [`leases`]' release and the
//! memory store's [`sweeper`]; [`stats`] registers its metrics. The server names the core's
//! store as `ratelimitd_core::store`; the re-export below is for the modules here, which say
//! `super::Op`, and for `metrics`.

pub(crate) use ratelimitd_core::store::*;

pub(crate) mod dynamodb;
pub(crate) mod leases;
pub(crate) mod memcache;
mod options;
pub(crate) mod redis;
pub(crate) mod stats;
pub(crate) mod sweeper;
pub(crate) mod vitals;

pub(crate) use options::{Backend, Resilience};
