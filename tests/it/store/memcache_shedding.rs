//! Priority shedding on the memcached backend against a real `memcached`: a refused request's
//! hits are taken back, so shed traffic never uses up the capacity left to the classes above it,
//! and after concurrent load the counter holds exactly the admitted hits.

use futures_util::future::join_all;

use crate::grpc::shedding::SHOP;
use crate::support::memcached::Memcached;
use crate::support::require;
use crate::support::*;

/// Go's key of the shop's counter in the minute window of `T0` (1200): the class entry is not
/// part of it.
const KEY: &str = "shed_shop_service_api_1200";

async fn start(m: &Memcached) -> TestServer {
    let env = m.env(&[
        ("CACHE_KEY_PREFIX", "shed_"),
        // The over-limit cache must not remember a class's refusal for the others.
        ("LOCAL_CACHE_SIZE_IN_BYTES", "1000000"),
    ]);
    TestServer::start(&[("shop.yaml", SHOP)], &env).await
}

async fn hit(s: &TestServer, class: &str) -> Code {
    overall(
        &s.rl("shop", &[&[("service", "api"), ("priority", class)]])
            .await,
    )
}

#[tokio::test]
async fn refused_hits_are_taken_back_on_memcached() {
    require!(Memcached);
    let m = Memcached::start();
    let s = start(&m).await;
    for n in 0..7 {
        assert_eq!(hit(&s, "test").await, Code::Ok, "test hit {}", n + 1);
    }
    // Shed from 7 on: ten refused test hits leave the counter at the 7 admitted.
    for _ in 0..10 {
        assert_eq!(hit(&s, "test").await, Code::OverLimit);
    }
    assert_eq!(m.get(KEY).as_deref(), Some("7"));
    assert_eq!(hit(&s, "read").await, Code::Ok);
    assert_eq!(hit(&s, "read").await, Code::OverLimit);
    assert_eq!(hit(&s, "write").await, Code::Ok);
    assert_eq!(hit(&s, "write").await, Code::OverLimit);
    // Critical traffic keeps the top of the capacity, up to exactly 10.
    assert_eq!(hit(&s, "critical").await, Code::Ok);
    assert_eq!(hit(&s, "critical").await, Code::OverLimit);
    assert_eq!(m.get(KEY).as_deref(), Some("10"));
    s.shutdown().await;
}

/// 40 concurrent test-class hits on a share of 7: at most 7 are admitted (a refused hit counted
/// for a moment may refuse another, never admit one), and once all answered memcached holds
/// exactly the admitted ones, so critical traffic gets all the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_concurrent_shedding_the_counter_holds_only_admitted_hits() {
    require!(Memcached);
    let m = Memcached::start();
    let s = start(&m).await;
    let calls = (0..40).map(|_| hit(&s, "test"));
    let admitted = join_all(calls)
        .await
        .into_iter()
        .filter(|c| *c == Code::Ok)
        .count();
    assert!((1..=7).contains(&admitted), "{admitted} test hits admitted");
    assert_eq!(m.get(KEY), Some(admitted.to_string()));
    let mut critical = 0;
    while critical < 20 && hit(&s, "critical").await == Code::Ok {
        critical += 1;
    }
    assert_eq!(critical, 10 - admitted);
    assert_eq!(m.get(KEY).as_deref(), Some("10"));
    s.shutdown().await;
}
