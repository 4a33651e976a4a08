//! RLQS usage reports: protobuf bytes (encoded reports with bucket ids, counts and elapsed times
//! at their edges, then byte-level mutations) decoded by prost, then applied to one stream's
//! state as the service applies them. A report is answered with actions for buckets it reported,
//! or refused with a status naming the problem (`INVALID_ARGUMENT`, `NOT_FOUND`, `RESOURCE_EXHAUSTED`);
//! a stream never tracks more than `RLQS_MAX_BUCKETS_PER_STREAM` buckets, and every token bucket
//! it assigns is one Envoy can enforce.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use pb::rate_limit_quota_response::bucket_action::BucketAction as Action;
use pb::rate_limit_quota_usage_reports::BucketQuotaUsage;
use proptest::prelude::*;
use prost::Message;
use ratelimitd::Settings;
use ratelimitd::pb::envoy::service::rate_limit_quota::v3 as pb;
use ratelimitd::pb::envoy::r#type::v3::rate_limit_strategy::Strategy as Kind;
use ratelimitd::testing::ConfigHandle;
use ratelimitd::testing::Stream;
use ratelimitd::testing::{Board, MemoryBoard, Shared};
use ratelimitd_core::clock::{ManualClock, Timestamp};
use ratelimitd_core::limiter::KeyBuilder;
use ratelimitd_core::limiter::Overrides;

use crate::fuzz::harness::{KEYS, T0, runtime};
use crate::fuzz::inputs::{edge_u64, edits, mutate, nasty_string};

/// The shared domain `d` plus `q`, whose budgets sit at the arithmetic's edges.
const EDGES: &str = r#"
domain: q
descriptors:
  - {key: huge, rate_limit: {unit: second, requests_per_unit: 4294967295, algorithm: token_bucket, burst: 4294967295}}
  - {key: slow, rate_limit: {unit: year, requests_per_unit: 1}}
  - {key: none, rate_limit: {unit: second, requests_per_unit: 0}}
  - {key: free, rate_limit: {unlimited: true}}
"#;

/// Bucket cap of the streams under test, small so that the cap is reached.
const MAX_BUCKETS: usize = 6;

fn shared() -> Shared {
    let mut settings = Settings::defaults();
    settings.rlqs.max_buckets_per_stream = MAX_BUCKETS;
    let compiled = crate::fuzz::harness::config(&[("q.yaml", EDGES)]);
    let handle = Arc::new(ConfigHandle::new());
    handle.publish(compiled, Timestamp::from_secs(T0));
    Shared {
        config: handle,
        overrides: Arc::new(Overrides::default()),
        keys: KeyBuilder::new("", settings.cache_key_format),
        board: Board::Memory(Arc::new(MemoryBoard::default())),
        clock: Arc::new(ManualClock::new(Timestamp::from_secs(T0))),
        options: settings.rlqs,
        prefix: String::new(),
        metrics: None,
    }
}

fn bucket_id() -> impl Strategy<Value = pb::BucketId> {
    let key = prop_oneof![
        4 => prop::sample::select([&KEYS[..], &["huge", "slow", "none", "free"]].concat()).prop_map(str::to_string),
        1 => nasty_string(),
    ];
    let value = prop_oneof![
        8 => prop::sample::select(vec!["a", "b", "u1"]).prop_map(str::to_string),
        1 => nasty_string(),
    ];
    prop::collection::hash_map(key, value, 1..3).prop_map(|bucket| pb::BucketId { bucket })
}

fn usage() -> impl Strategy<Value = BucketQuotaUsage> {
    let seconds =
        prop_oneof![4 => 0i64..10, 1 => Just(i64::MAX), 1 => Just(i64::MIN), 1 => any::<i64>()];
    let nanos = prop_oneof![4 => 0i32..1_000_000_000, 1 => Just(i32::MAX), 1 => Just(-1)];
    (
        prop::option::weighted(0.98, bucket_id()),
        prop::option::weighted(0.9, (seconds, nanos)),
        edge_u64(),
        edge_u64(),
    )
        .prop_map(|(bucket_id, elapsed, allowed, denied)| BucketQuotaUsage {
            bucket_id,
            time_elapsed: elapsed.map(|(seconds, nanos)| prost_types::Duration { seconds, nanos }),
            num_requests_allowed: allowed,
            num_requests_denied: denied,
        })
}

fn report() -> impl Strategy<Value = pb::RateLimitQuotaUsageReports> {
    let domain = prop_oneof![8 => Just("d".to_string()), 4 => Just("q".to_string()), 1 => Just(String::new()), 1 => nasty_string()];
    (domain, prop::collection::vec(usage(), 0..5)).prop_map(|(domain, bucket_quota_usages)| {
        pb::RateLimitQuotaUsageReports {
            domain,
            bucket_quota_usages,
        }
    })
}

/// A report as it arrives: decoded from encoded (often mutated) bytes; `None` when the bytes no
/// longer decode (tonic would end the stream before the service saw it).
fn arriving() -> impl Strategy<Value = Option<pb::RateLimitQuotaUsageReports>> {
    prop_oneof![
        4 => report().prop_map(Some),
        1 => (report(), edits(3)).prop_map(|(r, e)| {
            pb::RateLimitQuotaUsageReports::decode(mutate(r.encode_to_vec(), &e).as_slice()).ok()
        }),
    ]
}

/// A bucket id as the service keys it: its entries sorted, `None` when it names no bucket (empty,
/// or an empty key or value).
fn bucket_of(id: &HashMap<String, String>) -> Option<BTreeMap<String, String>> {
    let ok = !id.is_empty() && id.iter().all(|(k, v)| !k.is_empty() && !v.is_empty());
    ok.then(|| id.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

fn check_action(
    a: &pb::rate_limit_quota_response::BucketAction,
    reported: &[BTreeMap<String, String>],
) -> Result<(), TestCaseError> {
    let id = a
        .bucket_id
        .as_ref()
        .map(|b| b.bucket.clone())
        .unwrap_or_default();
    let key = bucket_of(&id).ok_or_else(|| TestCaseError::fail("an action without a bucket"))?;
    prop_assert!(
        reported.contains(&key),
        "an action for a bucket never reported: {key:?}"
    );
    let Some(Action::QuotaAssignmentAction(q)) = &a.bucket_action else {
        return Ok(());
    };
    let ttl = q
        .assignment_time_to_live
        .ok_or_else(|| TestCaseError::fail("no TTL"))?;
    prop_assert!(ttl.seconds > 0 && ttl.nanos >= 0, "TTL {ttl:?}");
    let strategy = q
        .rate_limit_strategy
        .as_ref()
        .and_then(|s| s.strategy.as_ref());
    if let Some(Kind::TokenBucket(b)) = strategy {
        let fill = b.tokens_per_fill.unwrap_or(0);
        let every = b.fill_interval.map_or(0, |d| d.seconds);
        prop_assert!(fill >= 1 && b.max_tokens >= fill, "bucket {b:?}");
        prop_assert!((1..=86_400).contains(&every), "fill interval {every}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::fuzz::cases(128))]

    #[test]
    fn reports_are_answered_or_refused_naming_the_problem(reports in prop::collection::vec(arriving(), 1..5)) {
        let rt = runtime();
        let shared = shared();
        let mut stream = Stream::new(7, Timestamp::from_secs(T0));
        let mut reported: Vec<BTreeMap<String, String>> = Vec::new();
        rt.block_on(async {
            for msg in reports.into_iter().flatten() {
                for u in &msg.bucket_quota_usages {
                    let id = u.bucket_id.as_ref().map_or_else(HashMap::new, |b| b.bucket.clone());
                    reported.extend(bucket_of(&id));
                }
                match stream.report(&shared, msg.clone()).await {
                    Ok(answer) => {
                        for a in answer.iter().flat_map(|r| &r.bucket_action) {
                            check_action(a, &reported)?;
                        }
                        if let Some(r) = answer {
                            let again = pb::RateLimitQuotaResponse::decode(r.encode_to_vec().as_slice());
                            prop_assert_eq!(again.ok(), Some(r));
                        }
                    }
                    Err(status) => {
                        use tonic::Code::*;
                        prop_assert!(
                            matches!(status.code(), InvalidArgument | NotFound | ResourceExhausted),
                            "{status:?}"
                        );
                        prop_assert!(!status.message().is_empty());
                        // The service ends the stream on a refused report.
                        break;
                    }
                }
                prop_assert!(stream.buckets() <= MAX_BUCKETS, "{} buckets", stream.buckets());
                if let Some(r) = stream.tick(&shared).await {
                    for a in &r.bucket_action {
                        check_action(a, &reported)?;
                    }
                }
            }
            stream.close(&shared).await;
            prop_assert_eq!(stream.buckets(), 0);
            Ok(())
        })?;
    }
}

/// A report whose bucket id carries half a mebibyte is refused, not held: the stream would keep
/// the key several times for as long as it lives.
#[test]
fn a_huge_bucket_value_is_refused() {
    let rt = runtime();
    let shared = shared();
    let mut stream = Stream::new(7, Timestamp::from_secs(T0));
    let huge = "v".repeat(512 * 1024);
    let id = pb::BucketId {
        bucket: HashMap::from([("fw".to_string(), huge)]),
    };
    let msg = pb::RateLimitQuotaUsageReports {
        domain: "d".into(),
        bucket_quota_usages: vec![BucketQuotaUsage {
            bucket_id: Some(id),
            time_elapsed: None,
            num_requests_allowed: 1,
            num_requests_denied: 0,
        }],
    };
    let answer = rt.block_on(stream.report(&shared, msg));
    let status = answer.expect_err("a 512 KiB bucket value is refused");
    assert!(
        matches!(
            status.code(),
            tonic::Code::InvalidArgument | tonic::Code::ResourceExhausted
        ),
        "{status:?}"
    );
    assert_eq!(stream.buckets(), 0, "nothing is tracked");
}
