//! The checks of a usage report, made before any of it is applied: a bad report becomes the gRPC
//! status that ends the stream, naming the field and the bound it broke (and the setting
//! that sets it).

use tonic::Status;

use super::bucket::BucketKey;
use crate::grpc::pb::envoy::service::rate_limit_quota::v3 as pb;
use crate::rlqs::RlqsOptions;
use pb::rate_limit_quota_usage_reports::BucketQuotaUsage;

/// The stream's domain after a report naming `named` (empty: the one already known).
pub(crate) fn domain(current: Option<&str>, named: &str) -> Result<String, Status> {
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

/// What a report's buckets are checked against, and what their keys are built of.
#[derive(Debug)]
pub(crate) struct Bounds<'a> {
    /// `CACHE_KEY_PREFIX`, in front of every bucket's demand name.
    pub prefix: &'a str,
    /// The stream's domain.
    pub domain: &'a str,
    /// The RLQS options (`RLQS_MAX_BUCKET_*`).
    pub options: &'a RlqsOptions,
    /// Buckets the stream tracks already.
    pub tracked: usize,
}

/// Each usage with its bucket key; `known` tells the buckets the stream already tracks. A
/// `bucket_id` must have 1 to `RLQS_MAX_BUCKET_ENTRIES` entries, none with an empty key or value,
/// of `RLQS_MAX_BUCKET_ID_BYTES` at most together (`INVALID_ARGUMENT` otherwise), and the stream
/// at most `RLQS_MAX_BUCKETS_PER_STREAM` buckets (`RESOURCE_EXHAUSTED`).
pub(crate) fn usages<'u>(
    usages: &'u [BucketQuotaUsage],
    known: impl Fn(&BucketKey) -> bool,
    b: &Bounds<'_>,
) -> Result<Vec<(BucketKey, &'u BucketQuotaUsage)>, Status> {
    let max = b.options.max_buckets_per_stream;
    let mut checked = Vec::with_capacity(usages.len().min(max));
    let mut added = 0usize;
    for (i, u) in usages.iter().enumerate() {
        let key = bucket_key(i, u.bucket_id.as_ref(), b)?;
        if !known(&key) {
            added += 1;
            if b.tracked + added > max {
                return Err(Status::resource_exhausted(format!(
                    "bucket_quota_usages[{i}]: this stream already reports {} buckets (RLQS_MAX_BUCKETS_PER_STREAM={max})",
                    b.tracked
                )));
            }
        }
        checked.push((key, u));
    }
    Ok(checked)
}

/// The key of usage `i`'s `bucket_id`, within the bounds.
fn bucket_key(i: usize, id: Option<&pb::BucketId>, b: &Bounds<'_>) -> Result<BucketKey, Status> {
    let invalid = |what: String| {
        Status::invalid_argument(format!("bucket_quota_usages[{i}].bucket_id: {what}"))
    };
    let bucket = id.map(|id| &id.bucket).filter(|m| !m.is_empty());
    let bucket = bucket.ok_or_else(|| invalid("missing or empty".to_string()))?;
    let (max_entries, max_bytes) = (b.options.max_bucket_entries, b.options.max_bucket_id_bytes);
    if bucket.len() > max_entries {
        return Err(invalid(format!(
            "{} entries, more than RLQS_MAX_BUCKET_ENTRIES={max_entries}",
            bucket.len()
        )));
    }
    let bytes: usize = bucket.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > max_bytes {
        return Err(invalid(format!(
            "{bytes} bytes of keys and values, more than RLQS_MAX_BUCKET_ID_BYTES={max_bytes}"
        )));
    }
    if bucket.iter().any(|(k, v)| k.is_empty() || v.is_empty()) {
        return Err(invalid("an entry with an empty key or value".to_string()));
    }
    let mut entries: Vec<(&str, &str)> = bucket
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    entries.sort_unstable();
    Ok(BucketKey::new(b.prefix, b.domain, &entries))
}
