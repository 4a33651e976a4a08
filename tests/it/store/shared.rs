//! The harness that runs scenarios on every store (`support/stores.rs`) shares one Redis and one
//! Redis Cluster per test run. Checked here against those shared servers: services sharing one
//! never see each other's counters, and on the Cluster the per-service key prefix leaves each
//! limit's key in the slot of its `{…}` hash tag.

use crate::support::redis::RedisServer;
use crate::support::stores::{shared_cluster, shared_redis};
use crate::support::*;

/// A domain of its own: other tests share these servers, and the check counts keys by their tag.
const CFG: &str = "domain: shared_stores\ndescriptors:\n  - {key: k2, rate_limit: {unit: minute, requests_per_unit: 20}}\n";

#[tokio::test]
async fn services_on_a_shared_store_keep_their_own_counters() {
    require!(Redis);
    let tag = "{13:shared_stores|2:k2=1:R}";
    for store in [StoreKind::Redis, StoreKind::Cluster] {
        let a = TestServer::start_with_store(&[("b.yaml", CFG)], &[], store).await;
        let b = TestServer::start_with_store(&[("b.yaml", CFG)], &[], store).await;
        for s in [&a, &b] {
            let r = s.rl("shared_stores", &[&[("k2", "R")]]).await;
            assert_eq!(st(&r, 0).2, 19, "{store:?}: a counter of its own");
        }
        let nodes: Vec<&RedisServer> = match store {
            StoreKind::Cluster => shared_cluster().nodes.iter().collect(),
            _ => vec![shared_redis()],
        };
        let pattern = format!("*{tag}*");
        let keys: Vec<String> = nodes
            .iter()
            .flat_map(|n| {
                let out = n.cli(&["KEYS", &pattern]);
                out.lines().map(str::to_string).collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(keys.len(), 2, "{store:?}: {keys:?}");
        assert_ne!(keys[0], keys[1], "{store:?}");
        if store == StoreKind::Cluster {
            let slot = |key: &str| nodes[0].cli(&["CLUSTER", "KEYSLOT", key]);
            for key in &keys {
                assert_eq!(slot(key), slot(tag), "{key}");
            }
        }
    }
}
