//! The Rate Limit Quota Service against hostile or idle clients, over real gRPC on 127.0.0.1
//! (Redis where the store is involved): oversized bucket ids are refused, one client address
//! cannot take every stream slot, silent buckets cost no Redis command, and idle streams are
//! closed on the service clock.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::cost::calls;
use crate::support::TestServer;
use crate::support::redis::RedisServer;
use crate::support::require;
use crate::support::rlqs::{QuotaStream, Seen, bucket, usage};
use ratelimitd_core::clock::Stopwatch;

const CONFIG: &str = "domain: quota
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 100}
";

fn addr(s: &TestServer) -> SocketAddr {
    s.running().grpc_addr
}

/// A usage of one `user` bucket: 5 requests over one second.
fn user(name: &str) -> ratelimitd::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage{
    usage(bucket(&[("user", name)]), 5, 0, 1)
}

#[tokio::test]
async fn oversized_bucket_ids_end_the_stream() {
    let s = TestServer::start(&[("quota.yaml", CONFIG)], &[]).await;
    // The largest id the default allows: 512 bytes of keys and values.
    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    let (seen, _) = q.report("quota", user(&"v".repeat(508))).await.unwrap();
    assert_eq!(seen, Seen::Bucket(100, 100, 1));

    let refused = |e: tonic::Status, setting: &str| {
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert!(
            e.message().contains("bucket_quota_usages[0].bucket_id"),
            "{e:?}"
        );
        assert!(e.message().contains(setting), "{e:?}");
    };
    // One byte more, and the 0.9 MB value that used to be held several times over.
    for len in [509, 900_000] {
        let mut q = QuotaStream::open(addr(&s)).await.unwrap();
        let e = q.report("quota", user(&"v".repeat(len))).await.unwrap_err();
        refused(e, "RLQS_MAX_BUCKET_ID_BYTES=512");
    }
    // Seventeen entries (the default allows 16).
    let names: Vec<String> = (0..17).map(|i| format!("k{i:02}")).collect();
    let entries: Vec<(&str, &str)> = names.iter().map(|k| (k.as_str(), "v")).collect();
    let mut q = QuotaStream::open(addr(&s)).await.unwrap();
    let e = q
        .report("quota", usage(bucket(&entries), 1, 0, 1))
        .await
        .unwrap_err();
    refused(e, "RLQS_MAX_BUCKET_ENTRIES=16");
    s.shutdown().await;
}

/// Opens a stream from `source` once a slot is free (an ended stream gives its slot back as its
/// task ends; at most 50 tries, 20 ms apart).
async fn open_when_free(s: &TestServer, source: IpAddr) -> QuotaStream {
    for _ in 0..50 {
        if let Ok(q) = QuotaStream::open_from(addr(s), source).await {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no RLQS stream slot came free for {source} within 1 s");
}

#[tokio::test]
async fn one_peer_cannot_take_every_stream() {
    let env = [
        ("RLQS_MAX_STREAMS", "4"),
        ("RLQS_MAX_STREAMS_PER_PEER", "2"),
    ];
    let s = TestServer::start(&[("quota.yaml", CONFIG)], &env).await;
    let greedy: IpAddr = "127.0.0.2".parse().unwrap();
    // The greedy client opens streams (and says nothing) until it is refused: at most 10 tries.
    let mut held = Vec::new();
    let mut refusal = None;
    for _ in 0..10 {
        match QuotaStream::open_from(addr(&s), greedy).await {
            Ok(q) => held.push(q),
            Err(e) => {
                refusal = Some(e);
                break;
            }
        }
    }
    assert_eq!(
        held.len(),
        2,
        "one peer holds its share of the stream cap, no more"
    );
    let e = refusal.expect("the third stream of one peer is refused");
    assert_eq!(e.code(), tonic::Code::ResourceExhausted);
    assert!(e.message().contains("127.0.0.2"), "{e:?}");
    assert!(e.message().contains("RLQS_MAX_STREAMS_PER_PEER=2"), "{e:?}");

    // Envoys at other addresses still get streams and assignments.
    let mut envoys = Vec::new();
    for source in ["127.0.0.1", "127.0.0.3"] {
        let mut q = QuotaStream::open_from(addr(&s), source.parse().unwrap())
            .await
            .expect("another peer is not locked out");
        let (seen, _) = q.report("quota", user(source)).await.unwrap();
        assert_eq!(seen, Seen::Bucket(100, 100, 1));
        envoys.push(q);
    }
    // The cap on all streams still holds.
    let e = QuotaStream::open_from(addr(&s), "127.0.0.4".parse().unwrap())
        .await
        .err()
        .expect("a fifth stream is refused");
    assert!(e.message().contains("RLQS_MAX_STREAMS=4"), "{e:?}");
    // A stream that ends gives its peer's share back.
    drop(held.pop());
    let mut again = open_when_free(&s, greedy).await;
    again.report("quota", user("again")).await.unwrap();
    s.shutdown().await;
}

#[tokio::test]
async fn silent_buckets_cost_no_redis_commands() {
    require!(Redis);
    const STREAMS: usize = 8;
    const BUCKETS: usize = 250;
    // What a bucket's board costs (the change feed's commands are XADD and XRANGE).
    const BOARD: [&str; 4] = ["hgetall", "hset", "hdel", "pexpire"];
    let redis = RedisServer::start();
    let s = TestServer::start_on(&[("quota.yaml", CONFIG)], &[], Some(&redis)).await;
    // 8 streams report 250 buckets each once, with demand, and then say nothing.
    let mut silent = Vec::new();
    for n in 0..STREAMS {
        let mut q = QuotaStream::open(addr(&s)).await.unwrap();
        let names: Vec<String> = (0..BUCKETS).map(|i| format!("s{n}-{i}")).collect();
        q.send("quota", names.iter().map(|b| user(b)).collect())
            .await;
        assert_eq!(q.next().await.unwrap().len(), BUCKETS);
        silent.push(q);
    }
    // Past the assignment TTL (RLQS_MIN_ASSIGNMENT_TTL, 10 s) without a report.
    s.advance(Duration::from_secs(11));
    // Work that began before the clock moved finishes: wait until the board's commands hold
    // still for 1.5 s (bounded: 10 s).
    let waited = Stopwatch::start();
    let mut last = calls(&redis, &BOARD);
    loop {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let now = calls(&redis, &BOARD);
        if now == last {
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "the board still served {} commands in the last 1.5 s, 10 s after 2 000 buckets fell silent",
            now - last
        );
        last = now;
    }
    // Over three reads of the change feed (this instance reads it once a second), the 2 000
    // silent buckets cost the board nothing.
    let (board0, writes0) = (calls(&redis, &BOARD), calls(&redis, &["hset"]));
    let reads0 = calls(&redis, &["xrevrange"]);
    let waited = Stopwatch::start();
    while calls(&redis, &["xrevrange"]) < reads0 + 3 {
        assert!(
            waited.elapsed() < Duration::from_secs(15),
            "the change feed was not read three times in 15 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        calls(&redis, &BOARD) - board0,
        0,
        "{STREAMS} x {BUCKETS} silent buckets past their TTL cost the board nothing"
    );

    // The silent streams stay open: a changed demand is posted and answered.
    let (seen, _) = silent[0]
        .report("quota", usage(bucket(&[("user", "s0-0")]), 50, 0, 1))
        .await
        .unwrap();
    assert!(matches!(seen, Seen::Bucket(..)), "{seen:?}");
    assert_eq!(
        calls(&redis, &["hset"]) - writes0,
        1,
        "one changed demand, one write"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn idle_streams_are_closed() {
    let env = [("RLQS_STREAM_IDLE_TIMEOUT", "30s")];
    let s = TestServer::start(&[("quota.yaml", CONFIG)], &env).await;
    let mut reporting = QuotaStream::open(addr(&s)).await.unwrap();
    reporting.report("quota", user("a")).await.unwrap();
    let mut silent = QuotaStream::open(addr(&s)).await.unwrap();
    s.advance(Duration::from_secs(20));
    reporting.report("quota", user("b")).await.unwrap();
    // The silent stream has sent nothing for 31 s, the reporting one for 11 s.
    s.advance(Duration::from_secs(11));
    let e = silent.next().await.expect_err("the idle stream is closed");
    assert_eq!(e.code(), tonic::Code::DeadlineExceeded, "{e:?}");
    assert!(e.message().contains("RLQS_STREAM_IDLE_TIMEOUT"), "{e:?}");
    reporting.report("quota", user("c")).await.unwrap();
    s.advance(Duration::from_secs(30));
    let e = reporting.next().await.expect_err("idle in its turn");
    assert_eq!(e.code(), tonic::Code::DeadlineExceeded, "{e:?}");
    s.shutdown().await;
}
