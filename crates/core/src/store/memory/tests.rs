//! Tests of the memory store: counting, expiry, the key bound, and exactness under concurrency.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::*;
use crate::algorithm::{Algorithm, LimitSpec};

fn op(key: &str, limit: u64, window_secs: u64) -> Op {
    let spec = LimitSpec {
        algorithm: Algorithm::FixedWindow,
        limit,
        window: crate::algorithm::Window::from_secs(window_secs).unwrap(),
        burst: 0,
    };
    Op::new(key, spec, 1)
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
    // Room for two fixed window keys, not three.
    let fw = cost(Algorithm::FixedWindow);
    let s = MemoryStore::with_limits(100, 2 * fw + 1);
    s.apply(&[op("a", 5, 60), op("b", 5, 1)], at(0))
        .await
        .unwrap();
    assert_eq!(s.bytes(), 2 * fw);
    let err = s.apply(&[op("c", 5, 60)], at(0)).await.unwrap_err();
    assert!(matches!(err, StoreError::Full { keys: 2, .. }), "{err}");
    // "b" expired at 1: the shard sweep on a full store makes room, and the bytes follow.
    s.apply(&[op("c", 5, 60)], at(1)).await.unwrap();
    s.sweep_at(at(60));
    assert_eq!((s.len(), s.bytes()), (0, 0));
}

#[tokio::test]
async fn distinct_keys_never_share_a_counter() {
    // Every key is held as a 128-bit hash of its text: 200 000 keys, one hit each, are 200 000
    // counters at 1 (a merged pair would answer 2).
    let s = MemoryStore::new(1_000_000);
    let ops: Vec<Op> = (0..200_000).map(|i| op(&format!("k{i}"), 5, 60)).collect();
    for chunk in ops.chunks(1000) {
        for a in s.apply(chunk, at(0)).await.unwrap() {
            assert_eq!(a.decision().unwrap().after, 1);
        }
    }
    assert_eq!(s.len(), 200_000);
}

/// The limit of key `i` of the model test: each algorithm twice, with short windows.
fn spec_of(i: usize) -> LimitSpec {
    let algorithm = Algorithm::ALL[i % Algorithm::ALL.len()];
    LimitSpec {
        algorithm,
        limit: 3,
        window: crate::algorithm::Window::from_secs(1 + i as u64 / 6).unwrap(),
        burst: if algorithm.has_burst() { 4 } else { 0 },
    }
}

proptest::proptest! {
    /// The compact slots decide exactly as the algorithms on their full state kept forever: on
    /// every algorithm, through expiry, sweeps, refunds (releases) and shaping; sliding logs and
    /// concurrency limits move between one entry inline and more in full. (An expired state
    /// decides as a fresh one, so the store may forget it; the model never does.)
    #[test]
    fn decides_as_the_algorithms_on_their_full_state(
        events in proptest::collection::vec(
            (0usize..12, 0u64..4, proptest::bool::weighted(0.2), 0u64..700_000, proptest::bool::weighted(0.1), proptest::bool::ANY),
            1..300,
        ),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let s = MemoryStore::new(100);
        let mut model: std::collections::HashMap<usize, Option<crate::algorithm::AlgorithmState>> =
            Default::default();
        let mut t = 1_700_000_000_000_000u64;
        for (i, hits, refund, dt, sweep, shaping) in events {
            t += dt;
            let now = Timestamp::from_micros(t);
            if sweep {
                s.sweep_at(now);
            }
            let o = Op {
                key: format!("key{i}"),
                spec: spec_of(i),
                hits,
                refund,
                max_wait: std::time::Duration::from_millis(if shaping { 900 } else { 0 }),
                lease: None,
                // Four holders take turns on a concurrency limit of three; ignored by the others.
                holder: format!("h{}", dt % 4),
                only_admitted: false,
                report: false,
            };
            let (got, want) = store_and_model(&rt, &s, &mut model, i, &o, now);
            proptest::prop_assert_eq!(got, want, "key{} at {}", i, t);
        }
    }
}

#[tokio::test]
async fn a_reset_key_starts_fresh_and_frees_its_room() {
    let s = MemoryStore::new(2);
    s.apply(&[op("a", 2, 60), op("a", 2, 60), op("b", 2, 60)], at(0))
        .await
        .unwrap();
    let over = s.apply(&[op("a", 2, 60)], at(1)).await.unwrap();
    assert!(over[0].decision().unwrap().over_limit);
    assert_eq!(
        s.reset(&[op("a", 2, 60), op("c", 2, 60)], at(1)).await,
        Ok(1)
    );
    assert_eq!(s.len(), 1, "only b is left");
    let fresh = s.apply(&[op("a", 2, 60)], at(2)).await.unwrap();
    assert_eq!(fresh[0].decision().unwrap().after, 1);
    assert!(!fresh[0].decision().unwrap().over_limit);
    let prefix = s.reset_prefix("a", 10, at(2)).await.unwrap_err();
    assert!(prefix.to_string().contains("hash of each key"), "{prefix}");
}

/// The store's decision for `o` (on key `i`) and the algorithm's own on the model's state of that
/// key; a refund of a key the model never saw runs on no state, as the store's does.
pub(crate) fn store_and_model(
    rt: &tokio::runtime::Runtime,
    s: &MemoryStore,
    model: &mut std::collections::HashMap<usize, Option<crate::algorithm::AlgorithmState>>,
    i: usize,
    o: &Op,
    now: Timestamp,
) -> (Decision, Decision) {
    let got = *rt.block_on(s.apply(std::slice::from_ref(o), now)).unwrap()[0]
        .decision()
        .unwrap();
    let want = if o.refund && !model.contains_key(&i) {
        shard::run(&mut None, o, now)
    } else {
        shard::run(model.entry(i).or_default(), o, now)
    };
    (got, want)
}
