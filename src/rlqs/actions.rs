//! Assignments into the protocol's bucket actions (the only place RLQS protos are built).

use std::time::Duration;

use super::split::Assignment;
use crate::grpc::pb::envoy::service::rate_limit_quota::v3 as pb;
use crate::grpc::pb::envoy::r#type::v3 as types;
use pb::rate_limit_quota_response::BucketAction;
use pb::rate_limit_quota_response::bucket_action::{self, AbandonAction, QuotaAssignmentAction};
use types::rate_limit_strategy::{BlanketRule, Strategy};

fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: d.subsec_nanos() as i32,
    }
}

/// A `quota_assignment_action` of `a` for bucket `id`, living `ttl`.
pub(crate) fn assign(id: &pb::BucketId, a: Assignment, ttl: Duration) -> BucketAction {
    let strategy = match a {
        Assignment::AllowAll => Strategy::BlanketRule(BlanketRule::AllowAll as i32),
        Assignment::DenyAll => Strategy::BlanketRule(BlanketRule::DenyAll as i32),
        Assignment::Bucket(b) => Strategy::TokenBucket(types::TokenBucket {
            max_tokens: b.max_tokens,
            tokens_per_fill: Some(b.tokens_per_fill),
            fill_interval: Some(duration(Duration::from_secs(b.fill_interval_secs))),
            name: String::new(),
        }),
    };
    BucketAction {
        bucket_id: Some(id.clone()),
        bucket_action: Some(bucket_action::BucketAction::QuotaAssignmentAction(
            QuotaAssignmentAction {
                assignment_time_to_live: Some(duration(ttl)),
                rate_limit_strategy: Some(types::RateLimitStrategy {
                    strategy: Some(strategy),
                }),
            },
        )),
    }
}

/// An `abandon_action` for bucket `id`.
pub(crate) fn abandon(id: &pb::BucketId) -> BucketAction {
    BucketAction {
        bucket_id: Some(id.clone()),
        bucket_action: Some(bucket_action::BucketAction::AbandonAction(AbandonAction {})),
    }
}
