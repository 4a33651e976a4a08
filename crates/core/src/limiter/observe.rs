//! Step 6 of a decision, off to the side: the settled decision is shown to the [`Observer`]s
//! (violation log, sampled decision log, hot keys). Observers are how insight features see
//! traffic without joining the request path: they get a borrowed view after the response is
//! built, must not block or await, and hand anything slow to a bounded queue of their own.

use std::fmt::Debug;
use std::sync::Arc;

use super::outcome::Settled;
use super::request::Request;
use crate::clock::Timestamp;

/// One decided request, as observers see it.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The request as it arrived (its domain and descriptors).
    pub request: &'a Request,
    /// One entry per request descriptor, in order: `settled[i]` belongs to
    /// `request.descriptors[i]`, with its plan (hits, stats key) and its reported limit, source
    /// and verdict.
    pub settled: &'a [Settled<'a>],
    /// True when the service runs in `SHADOW_MODE` (over-limit verdicts were not enforced).
    pub shadow_mode: bool,
    /// When the request was decided (the limiter's clock).
    pub now: Timestamp,
}

/// Something that watches decisions. Called once per request that reached a decision (not for
/// invalid requests or failed stores that errored the request), on the request's task: it must
/// return quickly (no I/O, no locks held long, no allocation proportional to history).
pub trait Observer: Send + Sync + Debug {
    /// Sees one decided request.
    fn observe(&self, decision: &Observed<'_>);
}

/// Every observer of a limiter, called in order.
#[derive(Debug, Clone, Default)]
pub struct Observers(Vec<Arc<dyn Observer>>);

impl Observers {
    /// Adds `observer` after the others.
    pub fn push(&mut self, observer: Arc<dyn Observer>) {
        self.0.push(observer);
    }

    /// Adds every observer of `more` after these.
    pub fn extend(&mut self, more: Observers) {
        self.0.extend(more.0);
    }

    /// True when nobody watches (the limiter then builds no view at all).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Shows `decision` to every observer.
    pub fn observe(&self, decision: &Observed<'_>) {
        for o in &self.0 {
            o.observe(decision);
        }
    }
}
