//! A concurrency limit is exact across instances: three real ratelimitd processes share one Redis
//! (and then one Redis Cluster); 64 concurrent holders take, hold and release slots of a cap of
//! 10. Each holder records itself as in flight only between its admission and its release call,
//! so the records can only under-count what Redis holds: their maximum never passes 10. Afterwards
//! every slot is free again (nothing leaked): exactly 10 new holders are admitted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::process;
use crate::support::redis::RedisServer;
use crate::support::stores::shared_cluster;
use crate::support::*;
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

const CAP: u32 = 10;
const CFG: &str = "domain: x\ndescriptors:\n  - {key: pool, rate_limit: {unit: hour, requests_per_unit: 10, algorithm: concurrency}}\n";

fn slot(holder: &str, release: bool) -> RateLimitRequest {
    let mut req = request("x", &[&[("pool", "p"), ("ratelimitd.holder", holder)]]);
    req.descriptors[0].is_negative_hits = release;
    req
}

async fn call(client: &mut RateLimitServiceClient<Channel>, req: RateLimitRequest) -> Code {
    overall(&client.should_rate_limit(req).await.unwrap().into_inner())
}

/// What the holders recorded.
#[derive(Default)]
struct Records {
    in_flight: AtomicU32,
    most: AtomicU32,
    admitted: AtomicU32,
    refused: AtomicU32,
}

/// Three binaries on `env`; 64 holders spread over them, 8 attempts each.
async fn hold_across_three_instances(env: Vec<(String, String)>) {
    // One fixed instant: no lease can end during the test, every slot is freed by its release.
    let mut three = process::three_instances(env, CFG).await;
    let clients = &mut three.clients;
    let records = Arc::new(Records::default());
    let mut tasks = Vec::new();
    for i in 0..64 {
        let mut client = clients[i % 3].clone();
        let records = records.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..8 {
                let holder = format!("t{i}-{n}");
                if call(&mut client, slot(&holder, false)).await != Code::Ok {
                    records.refused.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
                records.admitted.fetch_add(1, Ordering::SeqCst);
                let now = records.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                records.most.fetch_max(now, Ordering::SeqCst);
                // Hold the slot a moment so that holders overlap (bounded: 8 × 3 ms per task).
                tokio::time::sleep(Duration::from_millis(3)).await;
                records.in_flight.fetch_sub(1, Ordering::SeqCst);
                assert_eq!(call(&mut client, slot(&holder, true)).await, Code::Ok);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let most = records.most.load(Ordering::SeqCst);
    let (admitted, refused) = (
        records.admitted.load(Ordering::SeqCst),
        records.refused.load(Ordering::SeqCst),
    );
    assert!(most <= CAP, "{most} holders in flight at once, cap {CAP}");
    assert!(refused > 0, "64 holders against 10 slots must contend");
    assert_eq!(admitted + refused, 512);
    // Every slot was released: exactly the cap is admitted again, over all three instances.
    let mut again = 0;
    for n in 0..(CAP + 5) {
        let client = &mut clients[n as usize % 3];
        again += u32::from(call(client, slot(&format!("after-{n}"), false)).await == Code::Ok);
    }
    assert_eq!(again, CAP, "no slot leaked, none was made up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_one_redis_never_exceed_the_cap() {
    require!(Redis);
    let r = RedisServer::start();
    hold_across_three_instances(r.env()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_a_redis_cluster_never_exceed_the_cap() {
    require!(Redis);
    let c = shared_cluster();
    let mut env = c.env();
    env.push(("CACHE_KEY_PREFIX".into(), "concurrency_exact:".into()));
    hold_across_three_instances(env).await;
}
