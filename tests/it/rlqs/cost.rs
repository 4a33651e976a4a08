//! What the Rate Limit Quota Service costs Redis, counted by Redis itself (`INFO commandstats`,
//! where the commands a script runs count too): buckets whose demand holds still cost no command
//! while they live, renewals included, and a newcomer's demand still moves the others' shares.

use std::time::Duration;

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

/// The ceiling `docs/rlqs.md` states for buckets whose demand holds still: Redis commands per
/// bucket and second, everything the service sends counted.
const CEILING: f64 = 0.25;

/// Calls of `commands` Redis has served (`INFO commandstats`; commands a script runs count too).
pub(super) fn calls(redis: &RedisServer, commands: &[&str]) -> u64 {
    stats(redis)
        .into_iter()
        .filter(|(c, _)| commands.contains(&c.as_str()))
        .map(|(_, n)| n)
        .sum()
}

/// Calls per command Redis has served, but `INFO` (the test's own reading).
fn stats(redis: &RedisServer) -> Vec<(String, u64)> {
    let text = redis.cli(&["INFO", "commandstats"]);
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let n = rest.split(',').next()?.parse().ok()?;
            Some((name.to_string(), n))
        })
        .filter(|(name, _)| name != "info")
        .collect()
}

fn total(redis: &RedisServer) -> u64 {
    stats(redis).into_iter().map(|(_, n)| n).sum()
}

/// Per command, what `after` counts beyond `before` (the commands that changed).
fn grown(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    let was = |c: &str| before.iter().find(|(b, _)| b == c).map_or(0, |(_, n)| *n);
    after
        .iter()
        .map(|(c, n)| (c.clone(), n - was(c)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// 4 streams report 500 buckets each once, as an Envoy reporting every 5 s would (assignments
/// live 15 s), then say nothing for 12 s of service time while their buckets stay live and their
/// assignments are renewed: Redis serves fewer than 0.25 commands per bucket and second (the code
/// before re-read every bucket's board once a second and re-posted every entry half-way to its
/// expiry: ~1.9 per bucket and second). Then a newcomer on a bucket still cuts its first
/// reporter's share, unasked.
#[tokio::test]
async fn buckets_whose_demand_holds_still_cost_no_commands_while_they_live() {
    require!(Redis);
    const STREAMS: usize = 4;
    const BUCKETS: usize = 500;
    let redis = RedisServer::start();
    let s = TestServer::start_on(&[("quota.yaml", CONFIG)], &[], Some(&redis)).await;
    let addr = s.running().grpc_addr;
    let mut streams = Vec::new();
    for n in 0..STREAMS {
        let mut q = QuotaStream::open(addr).await.unwrap();
        // 25 requests over the last 5 s: a demand of 5/s.
        let usages =
            (0..BUCKETS).map(|i| usage(bucket(&[("user", &format!("s{n}-{i}"))]), 25, 0, 5));
        q.send("quota", usages.collect()).await;
        let answer = q.next().await.unwrap();
        assert_eq!(answer.len(), BUCKETS);
        for (_, seen, ttl) in &answer {
            assert_eq!((seen, *ttl), (&Seen::Bucket(100, 100, 1), Some(15)));
        }
        streams.push(q);
    }

    let before = stats(&redis);
    let window = Stopwatch::start();
    // 12 s of service time, a second per second of real time (the renewals follow Envoy's clock,
    // which is real): the buckets stay within their 15 s TTL throughout.
    let mut pace = tokio::time::interval(Duration::from_secs(1));
    for _ in 0..12 {
        pace.tick().await;
        s.advance(Duration::from_secs(1));
    }
    pace.tick().await;
    let after = stats(&redis);
    let secs = window.elapsed().as_secs_f64();

    // Each stream renewed every assignment within the window (half-way through its 15 s TTL):
    // the buckets were live and an assignment had to be renewed.
    for (n, q) in streams.iter_mut().enumerate() {
        let mut renewed = 0;
        while renewed < BUCKETS {
            let pushed = q.next().await.expect("renewals arrive");
            for (_, seen, ttl) in &pushed {
                assert_eq!((seen, *ttl), (&Seen::Bucket(100, 100, 1), Some(15)));
            }
            renewed += pushed.len();
        }
        assert_eq!(renewed, BUCKETS, "stream {n} renews each bucket once");
    }

    let spent: u64 =
        after.iter().map(|(_, n)| n).sum::<u64>() - before.iter().map(|(_, n)| n).sum::<u64>();
    let per_bucket = spent as f64 / (STREAMS * BUCKETS) as f64 / secs;
    let by_command = grown(&before, &after);
    eprintln!(
        "RLQS: {spent} Redis commands in {secs:.1} s for {STREAMS} x {BUCKETS} silent buckets ({per_bucket:.4} per bucket and second): {by_command:?}"
    );
    assert!(
        per_bucket <= CEILING,
        "{per_bucket:.3} Redis commands per silent bucket and second (ceiling {CEILING}): {spent} in {secs:.1} s, {by_command:?}"
    );

    // The feed still moves shares: a first stream reports a bucket (5/s), a newcomer asks 9/s of
    // it, and the first one's share falls to 5/14 of 100/s within a few seconds, without a report
    // of its own. (Fresh streams: the silent ones keep renewing, and Redis expires the window's
    // boards on its own clock, which the manual clock has not followed.)
    let probe = || bucket(&[("user", "probe")]);
    let mut first = QuotaStream::open(addr).await.unwrap();
    let (seen, _) = first
        .report("quota", usage(probe(), 25, 0, 5))
        .await
        .unwrap();
    assert_eq!(seen, Seen::Bucket(100, 100, 1), "alone: the whole budget");
    let before = total(&redis);
    let mut newcomer = QuotaStream::open(addr).await.unwrap();
    let (seen, _) = newcomer
        .report("quota", usage(probe(), 45, 0, 5))
        .await
        .unwrap();
    assert_eq!(seen, Seen::Bucket(64, 64, 1), "9/14 of 100/s");
    let pushed = first.next().await.expect("the first reporter is re-split");
    assert_eq!(pushed.len(), 1, "only the bucket that changed: {pushed:?}");
    assert_eq!(pushed[0].0, probe());
    assert_eq!(pushed[0].1, Seen::Bucket(36, 36, 1), "5/14 of 100/s");
    let spent = total(&redis) - before;
    assert!(
        spent < 100,
        "a newcomer on one bucket costs a handful of commands, not one per bucket: {spent}"
    );
    s.shutdown().await;
}
