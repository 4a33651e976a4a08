//! The Rate Limit Quota Service over real gRPC with a tonic client (no Envoy): the split of a
//! global budget by demand on every store and across two instances on one Redis, blanket rules,
//! reload re-assignment and abandonment, and the statuses that end a stream on bad reports.

use std::time::Duration;

use crate::support::require;
use crate::support::rlqs::{QuotaStream, Seen, bucket, usage};
use crate::support::stores::shared_redis;
use crate::support::{StoreKind, TestServer, on_every_store};

const CONFIG: &str = "domain: quota
descriptors:
  - key: name
    value: api
    rate_limit: {unit: second, requests_per_unit: 20}
  - key: name
    value: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: name
    value: free
    unlimited: true
  - key: name
    value: pair
    descriptors:
      - key: tier
        rate_limit: {unit: minute, requests_per_unit: 600}
";

/// Opens a stream once a slot is free (ended streams give theirs back as their task ends; at
/// most 50 tries, 20 ms apart).
async fn open_when_free(s: &TestServer) -> QuotaStream {
    for _ in 0..50 {
        if let Ok(q) = QuotaStream::open(addr(s)).await {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no RLQS stream slot came free within 1 s");
}

fn addr(s: &TestServer) -> std::net::SocketAddr {
    s.running().grpc_addr
}

/// Two Envoys ask 30 and 10 requests a second of a 20/s bucket: they get 15 and 5 (as 150 and
/// 50 tokens per 10 s), after the first got the whole budget while it reported alone.
async fn demand_splits_the_budget(store: StoreKind) {
    let s = TestServer::start_with_store(&[("quota.yaml", CONFIG)], &[], store).await;
    let api = || bucket(&[("name", "api")]);
    let mut a = QuotaStream::open(addr(&s)).await.unwrap();
    let mut b = QuotaStream::open(addr(&s)).await.unwrap();
    let first = a.report("quota", usage(api(), 30, 0, 1)).await.unwrap();
    // Alone: the whole 20/s, living RLQS_MIN_ASSIGNMENT_TTL (more than three 1 s intervals).
    assert_eq!(first, (Seen::Bucket(20, 20, 1), Some(10)));
    let (seen_b, _) = b.report("quota", usage(api(), 8, 2, 1)).await.unwrap();
    assert_eq!(seen_b, Seen::Bucket(5, 5, 1), "a quarter of the budget");
    let (seen_a, _) = a.report("quota", usage(api(), 20, 10, 1)).await.unwrap();
    assert_eq!(seen_a, Seen::Bucket(15, 15, 1), "three quarters");
    s.shutdown().await;
}

on_every_store!(demand_splits_the_budget);

#[tokio::test]
async fn two_instances_on_one_redis_split_one_budget() {
    require!(Redis);
    let mut env = StoreKind::Redis.env();
    // Both instances share one key prefix: one fleet.
    let _ = shared_redis();
    env.retain(|(k, _)| k != "CACHE_KEY_PREFIX");
    env.push(("CACHE_KEY_PREFIX".into(), "rlqs-fleet:".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let one = TestServer::start(&[("quota.yaml", CONFIG)], &env).await;
    let two = TestServer::start(&[("quota.yaml", CONFIG)], &env).await;
    let api = || bucket(&[("name", "api")]);
    let mut a = QuotaStream::open(addr(&one)).await.unwrap();
    let mut b = QuotaStream::open(addr(&two)).await.unwrap();
    a.report("quota", usage(api(), 10, 0, 1)).await.unwrap();
    let (seen_b, _) = b.report("quota", usage(api(), 10, 0, 1)).await.unwrap();
    assert_eq!(seen_b, Seen::Bucket(10, 10, 1), "half of one global 20/s");
    let (seen_a, _) = a.report("quota", usage(api(), 10, 0, 1)).await.unwrap();
    assert_eq!(seen_a, Seen::Bucket(10, 10, 1));
    // A's stream ends: its demand leaves Redis at once (the manual clock never expires it), and
    // instance two re-splits B's bucket within a second, unasked: the whole budget.
    drop(a);
    let mut whole = false;
    for _ in 0..3 {
        let pushed = b.next().await.unwrap();
        whole = pushed
            .iter()
            .any(|(_, seen, _)| *seen == Seen::Bucket(20, 20, 1));
        if whole {
            break;
        }
    }
    assert!(whole, "B holds the whole 20/s once A's stream ended");
    one.shutdown().await;
    two.shutdown().await;
}

#[tokio::test]
async fn deny_unlimited_unmatched_and_nested_buckets() {
    let s = TestServer::start(&[("quota.yaml", CONFIG)], &[]).await;
    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    let one = |v| usage(bucket(&[("name", v)]), 1, 0, 0);
    assert_eq!(
        q.report("quota", one("blocked")).await.unwrap().0,
        Seen::DenyAll
    );
    assert_eq!(
        q.report("quota", one("free")).await.unwrap().0,
        Seen::AllowAll
    );
    assert_eq!(
        q.report("", one("nothing")).await.unwrap().0,
        Seen::AllowAll
    );
    // Entries sorted by key: name, then tier — the nested 600/minute limit, as 10 a second.
    let pair = usage(bucket(&[("tier", "gold"), ("name", "pair")]), 1, 0, 0);
    let (seen, _) = q.report("quota", pair).await.unwrap();
    assert_eq!(seen, Seen::Bucket(10, 10, 1));
    s.shutdown().await;

    let s = TestServer::start(&[("quota.yaml", CONFIG)], &[("RLQS_UNMATCHED", "deny")]).await;
    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    assert_eq!(
        q.report("quota", one("nothing")).await.unwrap().0,
        Seen::DenyAll
    );
    s.shutdown().await;
}

#[tokio::test]
async fn reload_reassigns_and_abandons() {
    let s = TestServer::start(&[("quota.yaml", CONFIG)], &[]).await;
    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    let api = bucket(&[("name", "api")]);
    let pair = bucket(&[("name", "pair"), ("tier", "gold")]);
    q.send(
        "quota",
        vec![usage(api.clone(), 5, 0, 1), usage(pair.clone(), 5, 0, 1)],
    )
    .await;
    assert_eq!(q.next().await.unwrap().len(), 2);
    // api doubles to 40/s; pair's limit disappears.
    let changed = CONFIG
        .replace("requests_per_unit: 20", "requests_per_unit: 40")
        .replace("    descriptors:\n      - key: tier\n        rate_limit: {unit: minute, requests_per_unit: 600}\n", "    rate_limit: {unit: second, requests_per_unit: 5}\n");
    std::fs::write(s.dir.path().join("quota.yaml"), changed).unwrap();
    let _ = s.running().reload_now().await;
    // Pushed without a report (the stream checks the configuration once a second).
    let mut pushed = q.next().await.unwrap();
    pushed.sort_by_key(|(id, _, _)| id.bucket.len());
    assert_eq!(pushed.len(), 2, "{pushed:?}");
    assert_eq!(pushed[0].0, api);
    assert_eq!(pushed[0].1, Seen::Bucket(40, 40, 1));
    assert_eq!(pushed[1].0, pair);
    assert_eq!(pushed[1].1, Seen::Abandon);
    s.shutdown().await;
}

#[tokio::test]
async fn bad_reports_end_the_stream_with_a_clear_status() {
    let env = [
        ("RLQS_MAX_BUCKETS_PER_STREAM", "2"),
        ("RLQS_MAX_STREAMS", "2"),
        // Every stream here comes from 127.0.0.1: the whole cap is this peer's share.
        ("RLQS_MAX_STREAMS_PER_PEER", "2"),
    ];
    let s = TestServer::start(&[("quota.yaml", CONFIG)], &env).await;
    let api = || usage(bucket(&[("name", "api")]), 1, 0, 0);

    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    let e = q.report("", api()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("must name its domain"), "{e:?}");

    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    let e = q.report("nowhere", api()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    assert!(e.message().contains("unknown domain 'nowhere'"), "{e:?}");

    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    let e = q
        .report("quota", usage(bucket(&[]), 1, 0, 0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("bucket_quota_usages[0].bucket_id"),
        "{e:?}"
    );

    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    let three: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|v| usage(bucket(&[("name", v)]), 1, 0, 0))
        .collect();
    q.send("quota", three).await;
    let e = q.next().await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted);
    assert!(
        e.message().contains("RLQS_MAX_BUCKETS_PER_STREAM=2"),
        "{e:?}"
    );

    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    q.report("quota", api()).await.unwrap();
    let e = q.report("other", api()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("open a new stream"), "{e:?}");

    drop(q);
    // Two streams open: a third is refused until one ends.
    let mut a = open_when_free(&s).await;
    a.report("quota", api()).await.unwrap();
    let mut b = open_when_free(&s).await;
    b.report("quota", api()).await.unwrap();
    let e = QuotaStream::open(addr(&s)).await.err().expect("refused");
    assert_eq!(e.code(), tonic::Code::ResourceExhausted);
    assert!(e.message().contains("RLQS_MAX_STREAMS=2"), "{e:?}");
    drop(a);
    let mut c = open_when_free(&s).await;
    c.report("quota", api()).await.unwrap();
    s.shutdown().await;
}

#[tokio::test]
async fn report_floods_are_refused_and_metrics_count() {
    let env = [
        ("RLQS_MAX_REPORTS_PER_SECOND", "3"),
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("quota.yaml", CONFIG)], &env).await;
    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    let api = || usage(bucket(&[("name", "api")]), 4, 1, 1);
    q.report("quota", api()).await.unwrap();
    let text = s.scrape().await;
    assert_eq!(text.value("ratelimitd_rlqs_streams"), 1);
    assert_eq!(text.value("ratelimitd_rlqs_buckets"), 1);
    // Unchanged assignments are not resent: the flood gets no answer until it is refused.
    for _ in 0..10 {
        q.send("quota", vec![api()]).await;
    }
    let refused = q.next().await.err();
    let e = refused.expect("a flood of reports is refused");
    assert_eq!(e.code(), tonic::Code::ResourceExhausted);
    assert!(e.message().contains("RLQS_MAX_REPORTS_PER_SECOND"), "{e:?}");
    let text = s.scrape().await;
    // Each admitted report (at least 3: a slow machine may cross a second) counts 4 + 1.
    let strategy = "ratelimitd_rlqs_assignments_total{strategy=\"token_bucket\"}";
    assert_eq!(
        text.value(strategy),
        1,
        "one assignment, never resent unchanged"
    );
    let reported = |o| format!("ratelimitd_rlqs_reported_requests_total{{outcome=\"{o}\"}}");
    let denied = text.value(&reported("denied"));
    assert!(denied >= 3, "{denied}");
    assert_eq!(text.value(&reported("allowed")), 4 * denied);
    assert_eq!(
        text.value("ratelimitd_rlqs_streams"),
        0,
        "the refused stream ended"
    );
    assert_eq!(text.value("ratelimitd_rlqs_buckets"), 0);
    s.shutdown().await;
}
