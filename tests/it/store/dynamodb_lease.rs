//! Token leases on the DynamoDB store, against dynalite: grants come out of the shared item by
//! the same rule as on Redis and are served without a call, so two stores (or three processes)
//! on one table still admit exactly the limit while most decisions cost no DynamoDB call;
//! unspent bucket tokens go back when a lease's TTL passes, on reload and on SIGTERM.

use futures_util::future::join_all;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd::testing::DynamoStore;
use ratelimitd_core::algorithm::{Algorithm, LimitSpec, Window};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::store::{Answer, Op, Store};

use super::dynamodb::{fleet_env, op};
use crate::support::dynalite::{ACCESS_KEY, Dynalite, SECRET};
use crate::support::process::{self, Spawned, spawn};
use crate::support::require;
use crate::support::scrape::scrape_addr;
use crate::support::*;

/// Two stores on `d`'s table: two instances of the service.
async fn two_stores(d: &Dynalite) -> (DynamoStore, DynamoStore) {
    let endpoint = d.endpoint();
    let one = || DynamoStore::local(&endpoint, &d.table, ACCESS_KEY, SECRET);
    (one().await.unwrap(), one().await.unwrap())
}

/// The one answer of `op` on `store`.
async fn one(store: &DynamoStore, op: &Op, now: Timestamp) -> Answer {
    store.apply(std::slice::from_ref(op), now).await.unwrap()[0]
}

/// A fixed window of 100 leased 10 at a time: the first hit is counted with a grant of 10 in the
/// item (another instance's count includes it), the next 10 are answered from the lease; two
/// instances taking turns then admit exactly 100, the last hits of the window one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_window_grants_are_counted_in_the_item_and_the_fleet_admits_exactly_the_limit() {
    require!(Dynalite);
    let d = Dynalite::start("lease_fixed");
    let (a, b) = two_stores(&d).await;
    let now = Timestamp::from_secs(1_000_000_000);
    let spec = LimitSpec {
        algorithm: Algorithm::FixedWindow,
        limit: 100,
        window: Window::from_secs(3600).unwrap(),
        burst: 0,
    };
    let leased = op("fw", spec, 10, now);
    let first = one(&a, &leased, now).await;
    assert!(
        matches!(first, Answer::Decided(d) if d.after == 1 && !d.over_limit),
        "{first:?}"
    );
    assert_eq!(a.leased(), 10, "a grant of min(10, 99 / 4)");
    for n in 0..10 {
        let r = one(&a, &leased, now).await;
        assert!(
            matches!(r, Answer::Leased(d) if !d.over_limit),
            "hit {n}: {r:?}"
        );
    }
    assert_eq!(a.leased(), 0);
    assert_eq!(a.lease_totals().served, 10);
    // The other instance's plain hit sees the grant counted: 1 + 10 + its own.
    let plain = op("fw", spec, 0, now);
    let seen = one(&b, &plain, now).await;
    assert!(
        matches!(seen, Answer::Decided(d) if d.after == 12),
        "{seen:?}"
    );

    // Both instances, leasing, take turns until both refuse.
    let mut admitted = 12;
    let mut refusals_in_a_row = 0;
    let mut turn = 0;
    while refusals_in_a_row < 2 {
        let store = [&a, &b][turn % 2];
        turn += 1;
        match one(store, &leased, now).await {
            Answer::Decided(d) | Answer::Leased(d) if !d.over_limit => {
                admitted += 1;
                refusals_in_a_row = 0;
            }
            Answer::Decided(_) => refusals_in_a_row += 1,
            other => panic!("{other:?}"),
        }
        assert!(turn < 1000, "the window ends");
    }
    assert_eq!(admitted, 100, "exactly the limit");
    let served = a.lease_totals().served + b.lease_totals().served;
    assert!(served >= 60, "most hits were served from leases: {served}");
    assert_eq!(a.leased() + b.leased(), 0, "nothing left held");
}

/// A token bucket of 10 000 (refilled 100 an hour) leased 10 at a time: the grant comes out of
/// the bucket with the hit, unspent tokens go back on release (a reload), and a lease whose TTL
/// passed (10 tokens refill in 360 s) gives its tokens back at the next sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_grants_come_out_of_the_bucket_and_unspent_tokens_go_back() {
    require!(Dynalite);
    let d = Dynalite::start("lease_bucket");
    let (a, b) = two_stores(&d).await;
    let t0 = Timestamp::from_secs(1_000_000_000);
    let spec = LimitSpec {
        algorithm: Algorithm::TokenBucket,
        limit: 100,
        window: Window::from_secs(3600).unwrap(),
        burst: 10_000,
    };
    let tokens = |at: Timestamp| {
        let check = Op {
            hits: 0,
            ..op("tb", spec, 0, at)
        };
        let b = &b;
        async move {
            match one(b, &check, at).await {
                Answer::Decided(d) => d.remaining,
                other => panic!("{other:?}"),
            }
        }
    };
    // Half the bucket taken by the other instance, so refills and give-backs show.
    let half = Op {
        hits: 5_000,
        ..op("tb", spec, 0, t0)
    };
    assert!(matches!(one(&b, &half, t0).await, Answer::Decided(d) if !d.over_limit));
    let leased = op("tb", spec, 10, t0);
    let first = one(&a, &leased, t0).await;
    assert!(
        matches!(first, Answer::Decided(d) if d.remaining == 4_999),
        "{first:?}"
    );
    assert_eq!(tokens(t0).await, 4_989, "the grant of 10 left the bucket");
    for _ in 0..4 {
        assert!(matches!(one(&a, &leased, t0).await, Answer::Leased(_)));
    }
    assert_eq!(tokens(t0).await, 4_989, "served without a call");
    assert_eq!(a.release_leases(t0).await, 6, "the unspent 6 go back");
    assert_eq!(tokens(t0).await, 4_995);
    assert_eq!(a.leased(), 0);

    // A new lease of 10, then its TTL (360 s) passes: the sweep gives the 10 back.
    assert!(matches!(one(&a, &leased, t0).await, Answer::Decided(_)));
    assert_eq!(tokens(t0).await, 4_984);
    let t1 = Timestamp::from_secs(1_000_000_000 + 359);
    assert_eq!(a.expire_leases(t1).await, 0, "still live");
    let t2 = Timestamp::from_secs(1_000_000_000 + 361);
    assert_eq!(a.expire_leases(t2).await, 10);
    // 361 s refilled 10.03 tokens: 4 984 + 10 + 10 back.
    assert_eq!(tokens(t2).await, 5_004);
    let totals = a.lease_totals();
    assert_eq!(
        (totals.taken, totals.granted, totals.served, totals.returned),
        (2, 20, 4, 16)
    );
}

/// `ratelimitd_lease_served_hits_total` of the process listening for Prometheus on `port`.
async fn served(p: &Spawned) -> u64 {
    let scrape = scrape_addr(&reqwest::Client::new(), &p.metrics_addr).await;
    scrape.value("ratelimitd_lease_served_hits_total")
}

/// `per_client` requests on `domain`'s `k` from each of 4 clients per process, each client one
/// request at a time; how many were admitted.
async fn load(fleet: &[Spawned], domain: &str, per_client: usize) -> usize {
    let mut clients = Vec::new();
    for p in fleet {
        let client = RateLimitServiceClient::connect(format!("http://{}", p.grpc_addr))
            .await
            .unwrap();
        for _ in 0..4 {
            let (mut c, domain) = (client.clone(), domain.to_string());
            clients.push(async move {
                let mut ok = 0;
                for _ in 0..per_client {
                    let r = c.should_rate_limit(request(&domain, &[&[("k", "v")]]));
                    if overall(r.await.unwrap().get_ref()) == Code::Ok {
                        ok += 1;
                    }
                }
                ok
            });
        }
    }
    join_all(clients).await.into_iter().sum()
}

/// Requests on `domain`'s `k` to each process in turn until all refuse in a row; how many were
/// admitted (what the processes' leases still held).
async fn rest(fleet: &[Spawned], domain: &str) -> usize {
    let mut clients = Vec::new();
    for p in fleet {
        let url = format!("http://{}", p.grpc_addr);
        clients.push(RateLimitServiceClient::connect(url).await.unwrap());
    }
    let (mut admitted, mut refused_in_a_row, mut turn) = (0, 0, 0);
    while refused_in_a_row < clients.len() {
        let c = &mut clients[turn % fleet.len()];
        turn += 1;
        let r = c.should_rate_limit(request(domain, &[&[("k", "v")]]));
        if overall(r.await.unwrap().get_ref()) == Code::Ok {
            admitted += 1;
            refused_in_a_row = 0;
        } else {
            refused_in_a_row += 1;
        }
        assert!(turn < 10_000, "the leases run out");
    }
    admitted
}

/// Three ratelimitd processes on one table, a hot key leased 20 at a time, 4 clients per process:
/// a fixed window of 600 and a token bucket of 600 (the manual clock stands still, so nothing
/// refills) each admit at most 600 under 900 requests, and exactly 600 once what the leases still
/// held is asked for; within the limit, a lease of 100 answers all but a few of 1 200 requests
/// without a DynamoDB call (each decision that calls makes at most two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_with_leases_admit_exactly_the_limit_at_a_fraction_of_the_calls() {
    require!(Dynalite);
    let d = Dynalite::start("lease_fleet");
    let config = "domain: fw\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 600, lease: 20}\n";
    // A request that loses every optimistic race answers by `deny`, taking nothing.
    let bucket = "domain: tb\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 600, algorithm: token_bucket, lease: 20, failure_mode: deny}\n";
    let roomy = "domain: big\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100000, lease: 100}\n";
    let (dir, env) = fleet_env(&d, config, &[("DYNAMODB_RESPONSE_TIMEOUT", "20s")]);
    std::fs::write(dir.path().join("b.yaml"), bucket).unwrap();
    std::fs::write(dir.path().join("r.yaml"), roomy).unwrap();
    let mut env = env;
    env.push(("USE_PROMETHEUS".into(), "true".into()));
    env.push(("PROMETHEUS_ADDR".into(), "127.0.0.1:0".into()));
    let fleet: Vec<Spawned> = (0..3).map(|_| spawn(&env)).collect();
    for domain in ["fw", "tb"] {
        let admitted = load(&fleet, domain, 75).await;
        assert!(admitted <= 600, "{domain}: {admitted} of 600 admitted");
        let held = rest(&fleet, domain).await;
        assert_eq!(admitted + held, 600, "{domain}: exactly the limit");
    }
    let mut before = 0;
    for p in &fleet {
        before += served(p).await;
    }
    assert!(
        before > 600,
        "most of the limits' hits were served from leases: {before}"
    );
    assert_eq!(load(&fleet, "big", 100).await, 1_200, "within the limit");
    let mut after = 0;
    for p in &fleet {
        after += served(p).await;
    }
    let called = 1_200 - (after - before);
    assert!(
        called * 20 <= 1_200,
        "{called} of 1 200 decisions called DynamoDB"
    );
}

/// The real binary, stopped with SIGTERM, gives its unspent hits and tokens back before it exits:
/// a process started afterwards on the same table (at the same instant of the manual clock)
/// admits exactly what the first one did not use, on a fixed window and on a token bucket.
#[test]
fn sigterm_gives_the_unspent_hits_and_tokens_back() {
    require!(Dynalite);
    let d = Dynalite::start("lease_sigterm");
    let leased = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100, lease: 20}\n  - key: b\n    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: token_bucket, lease: 20}\n";
    let (_dir, env) = fleet_env(&d, leased, &[]);
    let mut first = spawn(&env);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ask = |p: &Spawned, key: &'static str, max: usize| {
        let url = format!("http://{}", p.grpc_addr);
        rt.block_on(async move {
            let mut c = RateLimitServiceClient::connect(url).await.unwrap();
            let mut ok = 0;
            while ok < max {
                let r = c.should_rate_limit(request("d", &[&[(key, "hot")]]));
                if overall(r.await.unwrap().get_ref()) != Code::Ok {
                    break;
                }
                ok += 1;
            }
            ok
        })
    };
    for key in ["k", "b"] {
        assert_eq!(ask(&first, key, 30), 30, "{key}");
    }
    process::signal(&first.child, "-TERM");
    assert_eq!(process::wait_exit(&mut first.child), Some(0));
    // Without the leases' give-back, the next process would find up to 2 × 20 fewer.
    let plain = leased.replace(", lease: 20", ", lease: 0");
    let (_dir, env) = fleet_env(&d, &plain, &[]);
    let second = spawn(&env);
    for key in ["k", "b"] {
        assert_eq!(ask(&second, key, 1_000), 70, "{key}: the rest of the 100");
    }
}
