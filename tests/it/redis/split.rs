//! A hot key split over the shared 3-master Redis Cluster (`split: N`): three services share one
//! split limit under skewed load and admit at most the limit in total (and all but a few of it),
//! Go's stats count every request once, the sub-keys sit on different masters, explain shows their
//! sum and each of them, and a descriptor's reset forgets them all; `ratelimitd validate` refuses
//! a `split` out of range naming the file, the path and the range.

use std::process::Command;

use crate::support::stores::shared_cluster;
use crate::support::*;
use serde_json::{Value, json};

const TOKEN: &str = "split-token";
/// The hot limit of 300 an hour in 3 sub-keys, and one of 6 (two per master).
const CFG: &str = "domain: s
descriptors:
  - {key: hot, rate_limit: {unit: hour, requests_per_unit: 300, split: 3}}
  - {key: six, rate_limit: {unit: hour, requests_per_unit: 60, algorithm: token_bucket, split: 6}}
";

/// Three services on the shared Cluster under one key prefix of their own.
async fn three(prefix: &str) -> Vec<TestServer> {
    let mut env = shared_cluster().env();
    env.extend([
        ("CACHE_KEY_PREFIX".to_string(), prefix.to_string()),
        ("ADMIN_TOKEN".into(), TOKEN.into()),
        ("USE_PROMETHEUS".into(), "true".into()),
        ("PROMETHEUS_ADDR".into(), "127.0.0.1:0".into()),
    ]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(TestServer::start(&[("s.yaml", CFG)], &env).await);
    }
    servers
}

/// `calls` requests on `key`=`hot`, 32 concurrent clients, skewed: half of the clients on the
/// first service, a quarter on each other. Returns how many were admitted.
async fn hammer(servers: &[TestServer], key: &'static str, calls: usize) -> u64 {
    let mut tasks = Vec::new();
    for client in 0..32 {
        let s = &servers[match client % 4 {
            0 | 1 => 0,
            2 => 1,
            _ => 2,
        }];
        let grpc = s.grpc.clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0u64;
            for _ in 0..calls / 32 {
                let r = grpc
                    .clone()
                    .should_rate_limit(request("s", &[&[(key, "t")]]))
                    .await
                    .unwrap()
                    .into_inner();
                ok += u64::from(st(&r, 0).0 == Code::Ok);
            }
            ok
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    admitted
}

/// The sum over the three services of one Go stat of `key`.
async fn stat(servers: &[TestServer], key: &str, name: &str) -> u64 {
    let mut total = 0;
    for s in servers {
        let m = s.scrape().await;
        let series =
            format!("ratelimit_service_rate_limit_{name}{{domain=\"s\",key1=\"{key}\",key2=\"\"}}");
        total += m.count(&series).unwrap_or(0);
    }
    total
}

/// (status, JSON) of an admin POST with the token.
async fn admin(s: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let r = (s.http.post(s.admin_url(path)))
        .bearer_auth(TOKEN)
        .body(body.to_string())
        .send()
        .await
        .expect("the admin listener answers");
    let status = r.status().as_u16();
    (status, r.json().await.expect("a JSON answer"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_key_spreads_over_the_masters_and_admits_at_most_the_limit() {
    require!(Redis);
    let cluster = shared_cluster();
    let servers = three("split_cluster:").await;
    let admitted = hammer(&servers, "hot", 640).await;
    // Never more than the limit; a request falls on a uniformly drawn sub-key, so with 640
    // requests every sub-key of 100 fills: at least 95 % of the limit is admitted.
    assert!(admitted <= 300, "{admitted} admitted, limit 300");
    assert!(admitted >= 285, "only {admitted} of 300 admitted");
    assert_eq!(stat(&servers, "hot", "total_hits").await, 640);
    assert_eq!(stat(&servers, "hot", "within_limit").await, admitted);
    assert_eq!(stat(&servers, "hot", "over_limit").await, 640 - admitted);

    // One sub-key on each master, each in a slot of its own, holding every hit between them.
    let per_node = cluster.keys_per_node("split_cluster:*");
    assert_eq!(per_node, [1, 1, 1], "one sub-key per master");
    let mut slots = Vec::new();
    let mut counted = 0u64;
    for node in &cluster.nodes {
        let key = node.cli(&["KEYS", "split_cluster:*"]);
        slots.push(node.cli(&["CLUSTER", "KEYSLOT", &key]));
        counted += node.cli(&["GET", &key]).parse::<u64>().unwrap();
    }
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), 3, "{slots:?}");
    assert_eq!(counted, 640, "every hit counted once, on one sub-key");

    // Explain reads every sub-key and shows their sum.
    let body = json!({"domain": "s", "descriptors": [{"entries": [{"key": "hot", "value": "t"}]}]});
    let (status, v) = admin(&servers[1], "/v1/explain", body).await;
    assert_eq!(status, 200, "{v}");
    let limit = &v["descriptors"][0]["limits"][0];
    assert_eq!(limit["split"], 3, "{v}");
    assert_eq!(limit["sub_keys"].as_array().map(Vec::len), Some(3), "{v}");
    assert_eq!(limit["counter"]["used"], 640, "{v}");
    assert_eq!(limit["counter"]["remaining"], 300 - admitted, "{v}");

    // A descriptor's reset forgets every sub-key: the next requests start fresh.
    let reset = json!({"domain": "s", "descriptor": [{"key": "hot", "value": "t"}]});
    let (status, v) = admin(&servers[2], "/v1/counters/reset", reset).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["keys"].as_array().map(Vec::len), Some(3), "{v}");
    assert_eq!(cluster.keys_per_node("split_cluster:*"), [0, 0, 0]);
    let r = servers[0].rl("s", &[&[("hot", "t")]]).await;
    assert_eq!(st(&r, 0).0, Code::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_token_bucket_puts_two_sub_keys_on_each_master() {
    require!(Redis);
    let cluster = shared_cluster();
    let servers = three("split_six:").await;
    let admitted = hammer(&servers, "six", 320).await;
    // The manual clock stands still: no refill, the burst of 60 (10 a sub-key) is all there is.
    assert!(admitted <= 60, "{admitted} admitted, burst 60");
    assert!(admitted >= 57, "only {admitted} of 60 admitted");
    assert_eq!(stat(&servers, "six", "total_hits").await, 320);
    assert_eq!(
        stat(&servers, "six", "within_limit").await + stat(&servers, "six", "over_limit").await,
        320
    );
    assert_eq!(cluster.keys_per_node("split_six:*"), [2, 2, 2]);
}

#[test]
fn validate_refuses_a_split_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let bad = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 100, split: 1}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 100, split: 65}\n";
    std::fs::write(dir.path().join("bad.yaml"), bad).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
        .arg("validate")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml"), "{err}");
    assert!(err.contains("descriptors[0].rate_limit.split"), "{err}");
    assert!(
        err.contains("invalid split 1: expected 2 to 64 sub-keys"),
        "{err}"
    );
    assert!(err.contains("descriptors[1].rate_limit.split"), "{err}");
    assert!(
        err.contains("invalid split 65: expected 2 to 64 sub-keys"),
        "{err}"
    );
}
