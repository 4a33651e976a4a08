//! Tests of the memory store: counting, expiry, the key bound, and exactness under concurrency.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::*;
use crate::algorithm::{Algorithm, LimitSpec};

fn op(key: &str, limit: u64, window_secs: u64) -> Op {
    Op {
        key: key.to_string(),
        spec: LimitSpec {
            algorithm: Algorithm::FixedWindow,
            limit,
            window: crate::algorithm::Window::from_secs(window_secs).unwrap(),
            burst: 0,
        },
        hits: 1,
        refund: false,
        max_wait: std::time::Duration::ZERO,
        lease: None,
    }
}

fn at(secs: u64) -> Timestamp {
    Timestamp::from_secs(secs)
}

#[tokio::test]
async fn same_key_twice_in_one_batch_counts_twice_in_order() {
    let s = MemoryStore::new(10);
    let d = s
        .apply(&[op("k", 5, 60), op("k", 5, 60)], at(0))
        .await
        .unwrap();
    assert_eq!(
        (
            d[0].decision().unwrap().after,
            d[1].decision().unwrap().after
        ),
        (1, 2)
    );
    assert_eq!(s.len(), 1);
}

#[tokio::test]
async fn expired_entries_are_swept_and_reset() {
    let s = MemoryStore::new(10);
    s.apply(&[op("a", 1, 60), op("b", 1, 1)], at(0))
        .await
        .unwrap();
    assert_eq!(s.sweep_at(at(59)), 1, "only the 1-second key has expired");
    assert_eq!(s.len(), 1);
    assert_eq!(s.sweep_at(at(60)), 1);
    assert!(s.is_empty());
}

#[tokio::test]
async fn full_store_refuses_new_keys_but_keeps_counting_old_ones() {
    let s = MemoryStore::new(2);
    s.apply(&[op("a", 5, 60), op("b", 5, 60)], at(0))
        .await
        .unwrap();
    let err = s.apply(&[op("c", 5, 60)], at(1)).await.unwrap_err();
    assert!(matches!(err, StoreError::Full { keys: 2, .. }), "{err}");
    let d = s.apply(&[op("a", 5, 60)], at(1)).await.unwrap();
    assert_eq!(
        d[0].decision().unwrap().after,
        2,
        "a live counter survives the refusal"
    );
    assert_eq!(s.len(), 2);
}

#[tokio::test]
async fn full_store_makes_room_from_expired_keys() {
    let s = MemoryStore::new(64 * 4);
    for i in 0..(64 * 4) {
        s.apply(&[op(&format!("k{i}"), 5, 1)], at(0)).await.unwrap();
    }
    assert!(s.apply(&[op("new", 5, 1)], at(0)).await.is_err());
    // Everything expired at t=1: the shard that needs room, or else every shard (the refusal at
    // t=0 swept everything, and a second later that may happen again), is swept on demand.
    s.apply(&[op("new", 5, 1)], at(1)).await.unwrap();
    assert!(s.len() <= 64 * 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_hits_on_one_key_admit_exactly_the_limit() {
    let s = Arc::new(MemoryStore::new(100));
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut admitted = 0u64;
            for _ in 0..50 {
                let d = s.apply(&[op("hot", 500, 60)], at(120)).await.unwrap();
                admitted += u64::from(!d[0].decision().unwrap().over_limit);
            }
            admitted
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(
        total, 500,
        "1600 hits on a 500/window key admit exactly 500"
    );
}

#[tokio::test]
async fn a_full_store_sweeps_other_shards_at_most_once_a_second() {
    let s = MemoryStore::new(2);
    s.apply(&[op("a", 5, 60), op("b", 5, 60)], at(0))
        .await
        .unwrap();
    assert!(s.apply(&[op("c", 5, 60)], at(30)).await.is_err());
    // a and b expire at 60; whatever shards they live in, the full sweep finds them.
    s.apply(&[op("c", 5, 60)], at(60)).await.unwrap();
    s.apply(&[op("d", 5, 60)], at(60)).await.unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s.last_full_sweep.load(Ordering::Relaxed), 60_000_000);
    // Full again with live keys: a refusal does not sweep everything again within the second.
    assert!(s.apply(&[op("e", 5, 60)], at(60)).await.is_err());
    assert_eq!(s.last_full_sweep.load(Ordering::Relaxed), 60_000_000);
}

#[tokio::test]
async fn the_byte_budget_refuses_new_keys_and_sweeping_gives_the_bytes_back() {
    // Room for two keys of this length, not three.
    let s = MemoryStore::with_limits(100, 2 * cost("a") + 1);
    s.apply(&[op("a", 5, 60), op("b", 5, 1)], at(0))
        .await
        .unwrap();
    assert_eq!(s.bytes(), 2 * cost("a"));
    let err = s.apply(&[op("c", 5, 60)], at(0)).await.unwrap_err();
    assert!(matches!(err, StoreError::Full { keys: 2, .. }), "{err}");
    // "b" expired at 1: the shard sweep on a full store makes room, and the bytes follow.
    s.apply(&[op("c", 5, 60)], at(1)).await.unwrap();
    s.sweep_at(at(60));
    assert_eq!((s.len(), s.bytes()), (0, 0));
}
