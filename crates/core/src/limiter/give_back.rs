//! A refused request holds no concurrency slot: when another limit of the request (or another
//! slot) refused it, the slots it newly took in the same batch are released at once, so a caller
//! told 429 never has to release and a proxy that will not send the request on holds nothing.
//!
//! Only new acquisitions go back (the decision counted one more holder after than before): a
//! holder that renewed a slot it already held keeps it, as its earlier request is still running.
//!
//! The same holds for a usage estimate (`usage: {mode: report, estimate}`) the request's check
//! charged: a refused request never runs, so no report will true its estimate up, and the
//! estimate is given back with the slots.

use super::plan::{Plan, Plans};
use crate::algorithm::Algorithm;
use crate::clock::Timestamp;
use crate::store::{Answer, Op, Store, StoreError};

/// The release ops for the slots `ops` newly took according to `answers`.
pub(crate) fn releases(ops: &[Op], answers: &Result<Vec<Answer>, StoreError>) -> Vec<Op> {
    let Ok(answers) = answers else {
        return Vec::new();
    };
    ops.iter()
        .zip(answers)
        .filter(|(op, _)| op.spec.algorithm == Algorithm::Concurrency && !op.refund)
        .filter_map(|(op, answer)| match answer {
            Answer::Decided(d) if !d.over_limit && d.after > d.before => Some(Op {
                refund: true,
                hits: 0,
                ..op.clone()
            }),
            _ => None,
        })
        .collect()
}

/// The refunds of the usage estimates `plans` charged and the store took according to `answers`
/// (an estimate is counted only when admitted, so a refused one has nothing to give back).
pub(crate) fn estimates(plans: &Plans<'_>, answers: &Result<Vec<Answer>, StoreError>) -> Vec<Op> {
    let Ok(answers) = answers else {
        return Vec::new();
    };
    plans
        .descriptors
        .iter()
        .filter_map(|p| match p {
            Plan::Limited(l) if l.estimate => Some(l.ops.clone()),
            _ => None,
        })
        .flatten()
        .filter_map(|i| match (plans.ops.get(i)?, answers.get(i)?) {
            (op, Answer::Decided(d)) if !d.over_limit && op.hits > 0 => Some(Op {
                refund: true,
                only_admitted: false,
                ..op.clone()
            }),
            _ => None,
        })
        .collect()
}

/// Releases `ops` at `now`. A failure is not the request's: the slots then end with their
/// lease, as a holder that never came back.
pub(crate) async fn release(store: &dyn Store, ops: &[Op], now: Timestamp) {
    if ops.is_empty() {
        return;
    }
    if let Err(e) = store.apply(ops, now).await {
        tracing::debug!(error = %e, "could not give back what a refused request took");
    }
}
