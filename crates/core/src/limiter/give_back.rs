//! A refused request holds no concurrency slot: when another limit of the request (or another
//! slot) refused it, the slots it newly took in the same batch are released at once, so a caller
//! told 429 never has to release and a proxy that will not send the request on holds nothing.
//!
//! Only new acquisitions go back (the decision counted one more holder after than before): a
//! holder that renewed a slot it already held keeps it, as its earlier request is still running.

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

/// Releases `ops` at `now`. A failure is not the request's: the slots then end with their
/// lease, as a holder that never came back.
pub(crate) async fn release(store: &dyn Store, ops: &[Op], now: Timestamp) {
    if ops.is_empty() {
        return;
    }
    if let Err(e) = store.apply(ops, now).await {
        tracing::debug!(error = %e, "could not release the slots of a refused request");
    }
}
