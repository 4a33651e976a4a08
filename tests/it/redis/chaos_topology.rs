//! Chaos tests of the Redis deployments: a Redis refusing connections (`maxclients`),
//! a Sentinel failover with the primary killed, and a Redis Cluster losing one of its three
//! masters. Meanwhile every call is answered by its limit's failure policy within the response
//! timeout (at once once the breaker is open); a Cluster keeps deciding the ops of the masters
//! still up (one breaker per master); afterwards Redis decides again. Timings are printed for the
//! README (`bash tests/run.sh --test it redis::chaos_topology -- --nocapture`).

use ratelimitd_core::clock::Stopwatch;

use std::time::Duration;

use crate::support::chaos::{
    CFG, ENV, HANG, Paused, load, policy_then_breaker, report, source, target_transitions, timed,
    until_decided_within, until_redis_decides,
};
use crate::support::redis::{Access, RedisCluster, RedisServer};
use crate::support::require;
use crate::support::sentinel::Sentinel;
use crate::support::{Code, TestServer, overall};

/// A service on `redis_env` (the deployment's variables) with the chaos settings.
async fn start(redis_env: Vec<(String, String)>) -> TestServer {
    let mut all = redis_env;
    all.extend(ENV.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let env: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    TestServer::start(&[("c.yaml", CFG)], &env).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_refusing_connections_is_answered_by_policy_then_decides_again() {
    require!(Redis);
    let redis = RedisServer::start();
    // The test's own connection stays open, so it can lift the cap it sets.
    let mut admin = redis::Client::open(format!("redis://{}", redis.addr()))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut admin_cmd = |args: &[&str]| {
        redis::cmd(args[0])
            .arg(&args[1..])
            .query::<redis::Value>(&mut admin)
            .unwrap();
    };
    let s = start(redis.env()).await;
    let (before, _, _) = load(&s, "deny", "warm", 20).await;
    report("maxclients", "before", &before);

    admin_cmd(&["CONFIG", "SET", "maxclients", "1"]);
    // Drop the service's connections (not this one): reconnecting is refused ("max number of
    // clients reached").
    admin_cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    let (times, admitted, sources) = load(&s, "deny", "x", 20).await;
    let (closed, open) = policy_then_breaker(&times, &sources, "failure_policy");
    assert_eq!(admitted, 0, "failure_mode deny refuses while Redis is out");
    assert_eq!(target_transitions(&s, "main", "opened"), 1);
    report("maxclients", "breaker closed", &closed);
    report("maxclients", "breaker open", &open);

    admin_cmd(&["CONFIG", "SET", "maxclients", "10000"]);
    let recovery = until_redis_decides(&s, "deny").await;
    report("maxclients", "recovery", &[recovery]);
    assert_eq!(target_transitions(&s, "main", "closed"), 1);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_is_answered_by_policy_then_the_new_primary_decides() {
    require!(Redis);
    let mut primary = RedisServer::start();
    let port = primary.port.to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let sentinel = Sentinel::start("chaos", &primary);
    let env = vec![
        ("BACKEND_TYPE".to_string(), "redis".to_string()),
        ("REDIS_TYPE".into(), "sentinel".into()),
        ("REDIS_SOCKET_TYPE".into(), "tcp".into()),
        (
            "REDIS_URL".into(),
            format!("chaos,127.0.0.1:{}", sentinel.port),
        ),
        ("EXPIRATION_JITTER_MAX_SECONDS".into(), "0".into()),
    ];
    let s = start(env).await;
    let (before, _, _) = load(&s, "deny", "warm", 20).await;
    report("failover", "before", &before);

    let watch = ratelimitd_core::clock::Stopwatch::start();
    while replica.cli(&["DBSIZE"]) == "0"
        || replica
            .cli(&["INFO", "replication"])
            .contains("master_link_status:down")
    {
        assert!(
            watch.elapsed() < Duration::from_secs(10),
            "replication did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        primary.cli(&["WAIT", "1", "2000"]),
        "1",
        "the replica has every write of the warm-up"
    );
    primary.kill();
    let (times, admitted, sources) = load(&s, "deny", "x", 20).await;
    let (closed, open) = policy_then_breaker(&times, &sources, "failure_policy");
    assert_eq!(
        admitted, 0,
        "failure_mode deny refuses while there is no primary"
    );
    report("failover", "breaker closed", &closed);
    report("failover", "breaker open", &open);

    // One sentinel, down after 1 s: it promotes the replica within a few seconds.
    let recovery = until_decided_within(&s, ("deny", "after"), Duration::from_secs(20)).await;
    report("failover", "recovery", &[recovery]);
    assert!(replica.cli(&["ROLE"]).starts_with("master"), "promoted");
    // The new primary counts: its counter of the warm-up key goes on from the replicated 20
    // (back in the warm-up's window: waiting for the failover moved the manual clock on).
    s.set_time(crate::support::T0);
    let r = timed(&s, "chaos", ("deny", "warm")).await.1.unwrap();
    assert_eq!(source(&r), "store");
    assert!(r.statuses[0].limit_remaining < 10, "{:?}", r.statuses[0]);
    drop(sentinel);
    s.shutdown().await;
}

/// Which of `values` live on each node of `cluster` (by the keys the warm-up call made).
fn by_node<'v>(cluster: &RedisCluster, values: &'v [String]) -> Vec<Vec<&'v str>> {
    let keys: Vec<String> = cluster
        .nodes
        .iter()
        .map(|n| n.cli(&["--scan", "--pattern", "*deny*"]))
        .collect();
    keys.iter()
        .map(|k| {
            let held = |v: &&String| k.contains(&format!(":{v}}}"));
            values.iter().filter(held).map(String::as_str).collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_cluster_master_fails_only_its_slots() {
    require!(Redis);
    lost_master("cl-killed", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_cluster_master_fails_only_its_slots() {
    require!(Redis);
    lost_master("cl-hung", true).await;
}

/// One master of three is killed (`hang`: stopped with SIGSTOP) and later back: the ops of its
/// slots are answered by their failure policy, those of the other masters still by Redis.
async fn lost_master(fault: &str, hang: bool) {
    // No replicas; the other masters keep serving their slots while one is down.
    let full_coverage = ["--cluster-require-full-coverage", "no"];
    let mut cluster = RedisCluster::start_secure(3, &full_coverage, &Access::default(), &[]);
    let s = start(cluster.env()).await;
    let values: Vec<String> = (0..30).map(|i| format!("v{i:02}")).collect();
    let mut before = Vec::new();
    for v in &values {
        let (t, _, sources) = load(&s, "deny", v, 1).await;
        assert_eq!(sources, ["store"]);
        before.extend(t);
    }
    report(fault, "before", &before);
    let nodes = by_node(&cluster, &values);
    assert_eq!(nodes.iter().map(Vec::len).sum::<usize>(), 30, "{nodes:?}");
    let (lost, kept) = (nodes[0].clone(), [&nodes[1][..], &nodes[2][..]].concat());
    assert!(!lost.is_empty() && !kept.is_empty(), "{nodes:?}");
    let lost_addr = cluster.nodes[0].addr();

    let paused = if hang {
        Some(Paused::stop(&cluster.nodes[0]))
    } else {
        cluster.nodes[0].kill();
        None
    };
    let (mut lost_sources, mut lost_times, mut kept_times) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..6u32 {
        let (t, admitted, sources) = load(&s, "deny", lost[0], 1).await;
        assert_eq!(admitted, 0, "deny: the lost master's ops are refused");
        lost_times.extend(t);
        lost_sources.extend(sources);
        for v in &kept {
            let (t, r) = timed(&s, "chaos", ("deny", v)).await;
            let r = r.expect("answered");
            assert!(t < HANG, "{v}: answered in {t:?}");
            assert_eq!(source(&r), "store", "{v}: still decided by its master");
            assert_eq!(overall(&r), Code::Ok);
            assert_eq!(r.statuses[0].limit_remaining, 28 - round, "{v}");
            kept_times.push(t);
        }
    }
    let (closed, open) = policy_then_breaker(&lost_times, &lost_sources, "failure_policy");
    report(fault, "breaker closed", &closed);
    report(fault, "breaker open", &open);
    report(fault, "other masters", &kept_times);
    assert_eq!(target_transitions(&s, &lost_addr, "opened"), 1);
    for n in &cluster.nodes[1..] {
        assert_eq!(
            target_transitions(&s, &n.addr(), "opened"),
            0,
            "{}",
            n.addr()
        );
    }
    let text = s.scrape().await;
    let gauge = format!("ratelimitd_redis_breaker_state{{target=\"{lost_addr}\"}} 2");
    assert!(text.contains(&gauge), "{text}");

    // Back (restarted empty, no persistence: it still owns its slots in the cluster's view).
    match paused {
        Some(p) => p.resume(),
        None => cluster.nodes[0].restart(),
    }
    // A restarted master serves its slots only once it sees the cluster state as ok again
    // (gossip); until then Redis is not reachable for those keys, whatever the client does.
    let watch = Stopwatch::start();
    while !cluster.nodes[0]
        .cli(&["CLUSTER", "INFO"])
        .contains("cluster_state:ok")
    {
        assert!(
            watch.elapsed() < Duration::from_secs(20),
            "the master rejoins"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    report(fault, "master serving again", &[watch.elapsed()]);
    let recovery = until_decided_within(&s, ("deny", lost[0]), Duration::from_secs(20)).await;
    report(fault, "recovery", &[recovery]);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_failover_moves_the_slots_to_the_promoted_replica_and_its_breaker() {
    require!(Redis);
    // A master is declared failed after 1 s; its replica then takes its slots.
    let extra = [
        "--cluster-node-timeout",
        "1000",
        "--cluster-require-full-coverage",
        "no",
    ];
    let mut cluster = RedisCluster::with_replicas(3, &extra);
    let s = start(cluster.env()).await;
    let values: Vec<String> = (0..30).map(|i| format!("v{i:02}")).collect();
    for v in &values {
        assert_eq!(load(&s, "deny", v, 1).await.2, ["store"]);
    }
    let nodes = by_node(&cluster, &values);
    let lost = (0..nodes.len())
        .find(|&i| cluster.nodes[i].cli(&["ROLE"]).starts_with("master") && !nodes[i].is_empty())
        .expect("a master holds some of the keys");
    let value = nodes[lost][0];
    let lost_addr = cluster.nodes[lost].addr();
    // Its replica may still be in its first sync after the cluster was made.
    let watch = ratelimitd_core::clock::Stopwatch::start();
    while cluster.nodes[lost].cli(&["WAIT", "1", "500"]) != "1" {
        assert!(
            watch.elapsed() < Duration::from_secs(15),
            "replica never synced"
        );
    }

    cluster.nodes[lost].kill();
    let (times, admitted, sources) = load(&s, "deny", value, 5).await;
    assert_eq!(admitted, 0, "deny while its slots have no master");
    assert!(
        sources
            .iter()
            .all(|s| s == "failure_policy" || s == "breaker"),
        "{sources:?}"
    );
    report("cl-failover", "no master", &times);
    let recovery = until_decided_within(&s, ("deny", value), Duration::from_secs(20)).await;
    report("cl-failover", "recovery", &[recovery]);
    // The promoted replica decides, on the replicated count (back in the warm-up's window). A
    // call in the seconds after the first success can still meet the client refreshing its slot
    // map and be answered by the policy (which counts nothing); the next one the store decides.
    s.set_time(crate::support::T0);
    let watch = ratelimitd_core::clock::Stopwatch::start();
    let r = loop {
        let r = timed(&s, "chaos", ("deny", value)).await.1.unwrap();
        if source(&r) == "store" {
            break r;
        }
        assert_eq!(source(&r), "failure_policy");
        assert!(
            watch.elapsed() < Duration::from_secs(20),
            "the promoted replica never decided again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        r.statuses[0].limit_remaining, 28,
        "the warm-up hit was kept"
    );
    let now = by_node(&cluster, &values);
    let promoted = (0..now.len())
        .find(|&i| i != lost && now[i].contains(&value))
        .map(|i| cluster.nodes[i].addr())
        .expect("the key lives on the promoted replica");
    // Within a few health checks the slot map names the promoted replica: it has its own
    // breaker, closed, and the dead master's breaker is gone from the metrics.
    let (new, old) = (
        format!("ratelimitd_redis_breaker_state{{target=\"{promoted}\"}} 0"),
        format!("target=\"{lost_addr}\""),
    );
    let watch = ratelimitd_core::clock::Stopwatch::start();
    loop {
        let text = s.scrape().await;
        if text.contains(&new) && !text.contains(&old) {
            break;
        }
        assert!(watch.elapsed() < Duration::from_secs(5), "{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.shutdown().await;
}
