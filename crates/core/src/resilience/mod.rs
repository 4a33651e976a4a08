//! Keeping the limiter from becoming the outage when Redis is not answering: a circuit
//! [`breaker`] per Redis target, so a dead or hung target costs a request nothing once it is
//! known to be down; and the `instances` count the heartbeat keeps, so the local fallback
//! (`failure_mode: local`, in `limiter::fallback`) knows its share of each limit.
//!
//! Both are plain state read through the [`crate::clock::Clock`] trait: the store wraps its calls
//! in a breaker, the composition root runs the heartbeat, metrics read both at export time.

pub mod breaker;
pub(crate) mod instances;

pub use breaker::{Breaker, BreakerReport, BreakerState, Permit};
pub use instances::Instances;
