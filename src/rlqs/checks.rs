//! The checks of a usage report, made before any of it is applied: a bad report becomes the gRPC
//! status that ends the stream, naming the field and the bound it broke.

use tonic::Status;

use super::bucket::BucketKey;
use crate::grpc::pb::envoy::service::rate_limit_quota::v3 as pb;
use pb::rate_limit_quota_usage_reports::BucketQuotaUsage;

/// The stream's domain after a report naming `named` (empty: the one already known).
pub fn domain(current: Option<&str>, named: &str) -> Result<String, Status> {
    match (current, named) {
        (None, "") => Err(Status::invalid_argument(
            "the first usage report of a stream must name its domain",
        )),
        (None, d) | (Some(d), "") => Ok(d.to_string()),
        (Some(d), new) if d == new => Ok(d.to_string()),
        (Some(d), new) => Err(Status::invalid_argument(format!(
            "the stream's domain is '{d}'; a report named '{new}' (open a new stream to change domains)"
        ))),
    }
}

/// Each usage with its bucket key; `known` tells the buckets the stream already tracks, of which
/// it has `tracked`, and at most `max` (`RLQS_MAX_BUCKETS_PER_STREAM`) are allowed.
pub fn usages(
    usages: &[BucketQuotaUsage],
    known: impl Fn(&BucketKey) -> bool,
    (tracked, max): (usize, usize),
) -> Result<Vec<(BucketKey, &BucketQuotaUsage)>, Status> {
    let mut checked = Vec::with_capacity(usages.len());
    let mut added = 0usize;
    for (i, u) in usages.iter().enumerate() {
        let key = u
            .bucket_id
            .as_ref()
            .and_then(|id| BucketKey::of(&id.bucket))
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "bucket_quota_usages[{i}].bucket_id: missing, empty, or with an empty key or value"
                ))
            })?;
        if !known(&key) {
            added += 1;
            if tracked + added > max {
                return Err(Status::resource_exhausted(format!(
                    "bucket_quota_usages[{i}]: this stream already reports {tracked} buckets (RLQS_MAX_BUCKETS_PER_STREAM={max})"
                )));
            }
        }
        checked.push((key, u));
    }
    Ok(checked)
}
