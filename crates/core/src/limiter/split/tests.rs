use super::*;
use crate::algorithm::{Algorithm, Window};
use crate::clock::Timestamp;
use crate::limiter::key::KeyBuilder;
use crate::random::SeededRandom;

fn spec(algorithm: Algorithm, limit: u64, burst: u64) -> LimitSpec {
    LimitSpec {
        algorithm,
        limit,
        window: Window::from_secs(60).unwrap(),
        burst,
    }
}

/// The shares of any limit add up to it exactly and differ by at most one, the larger first.
#[test]
fn shares_add_up_to_the_limit_and_differ_by_at_most_one() {
    for n in 2..=64u32 {
        for total in [
            0u64,
            1,
            2,
            5,
            63,
            64,
            65,
            100,
            1000,
            200_001,
            u64::from(u32::MAX),
        ] {
            let shares: Vec<u64> = (0..n).map(|i| share(total, n, i)).collect();
            assert_eq!(shares.iter().sum::<u64>(), total, "{total}/{n}");
            assert!(shares.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1));
        }
    }
    assert_eq!(
        (0..3).map(|i| share(10, 3, i)).collect::<Vec<_>>(),
        [4, 3, 3]
    );
}

/// A bucket's rate and burst are shared out alike; the window and algorithm stay.
#[test]
fn a_sub_keys_spec_shares_limit_and_burst() {
    let whole = spec(Algorithm::TokenBucket, 100, 7);
    let parts: Vec<LimitSpec> = (0..3).map(|i| SubKey { n: 3, i }.spec(&whole)).collect();
    assert_eq!(parts.iter().map(|s| s.limit).sum::<u64>(), 100);
    assert_eq!(parts.iter().map(|s| s.burst).collect::<Vec<_>>(), [3, 2, 2]);
    assert!(
        parts
            .iter()
            .all(|s| s.window == whole.window && s.algorithm == whole.algorithm)
    );
}

/// Redis's own examples of `CLUSTER KEYSLOT`.
#[test]
fn key_slots_are_those_redis_computes() {
    assert_eq!(key_slot("foo"), 12182);
    assert_eq!(key_slot("bar"), 5061);
    assert_eq!(key_slot("{foo}.anything"), 12182);
    assert_eq!(key_slot("x{foo}y{bar}"), 12182);
    // An empty tag hashes the whole key.
    assert_ne!(key_slot("{}foo"), key_slot("foo"));
}

/// A key's hash tag is the text in its first non-empty `{…}`, else the whole key: the keys a
/// Redis Cluster script call may share.
#[test]
fn hash_tags_follow_redis() {
    assert_eq!(hash_tag("{1:d|1:k=1:v}:fw:60:0"), "1:d|1:k=1:v");
    assert_eq!(hash_tag("prefix:{x}:fw"), "x");
    assert_eq!(hash_tag("d_k_v_1200"), "d_k_v_1200");
    assert_eq!(hash_tag("a{}b"), "a{}b");
}

/// Every sub-key of a limit lands in the middle half of its own run of slots, for every split
/// and for descriptors of every shape, so with three equal masters a split of 3 puts one
/// sub-key on each and a split of 6 two on each.
#[test]
fn sub_keys_land_in_their_own_runs_of_slots() {
    let keys = KeyBuilder::default();
    let fw = spec(Algorithm::FixedWindow, 1000, 1000);
    let values = [
        "tenant-a",
        "",
        "a-much-longer-tenant-name-with-digits-0123456789",
    ];
    for n in 2..=64u32 {
        for value in values {
            let mut slots = Vec::new();
            for i in 0..n {
                let sub = SubKey { n, i };
                let entries = [("tenant", value)].into_iter();
                let (key, _, marker) = keys.build_sub(
                    false,
                    Some(sub),
                    "api",
                    entries,
                    &fw,
                    Timestamp::from_secs(0),
                );
                assert!(marker.is_some());
                let slot = u32::from(key_slot(&key));
                let run = u32::from(SLOTS) / n;
                let lo = i * u32::from(SLOTS) / n;
                assert!((lo..lo + run + 1).contains(&slot), "{key}: slot {slot}");
                slots.push(slot);
            }
            slots.dedup();
            assert_eq!(slots.len(), n as usize, "{n} {value}");
        }
    }
    let master = |slot: u16| match slot {
        0..=5460 => 0,
        5461..=10922 => 1,
        _ => 2,
    };
    for n in [3u32, 6] {
        let mut per_master = [0; 3];
        for i in 0..n {
            let entries = [("tenant", "hot")].into_iter();
            let (key, _, _) = keys.build_sub(
                false,
                Some(SubKey { n, i }),
                "api",
                entries,
                &fw,
                Timestamp::from_secs(0),
            );
            per_master[master(key_slot(&key))] += 1;
        }
        assert_eq!(per_master, [n / 3; 3], "split {n}");
    }
}

/// A sub-key's key differs from the unsplit key and from the other sub-keys, keeps its window
/// start outside the tag, and is of the default format even when Go keys are asked for.
#[test]
fn sub_keys_are_distinct_default_format_keys() {
    let go = KeyBuilder::new("p:", crate::limiter::key::KeyFormat::Go);
    let fw = spec(Algorithm::FixedWindow, 10, 10);
    let now = Timestamp::from_secs(120);
    let plain = go.build("d", [("k", "v")].into_iter(), &fw, now);
    assert_eq!(plain, "p:d_k_v_120");
    let (key, _, marker) = go.build_sub(
        false,
        Some(SubKey { n: 3, i: 1 }),
        "d",
        [("k", "v")].into_iter(),
        &fw,
        now,
    );
    let marker = marker.unwrap();
    assert!(key.starts_with("p:{1:d|1:k=1:v#3.1."), "{key}");
    assert!(key.ends_with("}:fw:60:120"), "{key}");
    assert!(key[marker].starts_with("#3.1."));
}

/// A holder always reaches the same sub-key (its release finds its slot); draws spread evenly.
#[test]
fn holders_hash_to_one_sub_key_and_draws_spread_evenly() {
    let random = SeededRandom::new(11);
    for holder in ["req-1", "req-2", "anon-x-7"] {
        let first = SubKey::choose(6, Some(holder), &random);
        for _ in 0..10 {
            assert_eq!(SubKey::choose(6, Some(holder), &random), first);
        }
    }
    let mut counts = [0u32; 4];
    for _ in 0..40_000 {
        counts[SubKey::choose(4, None, &random).i as usize] += 1;
    }
    assert!(
        counts.iter().all(|&c| (9_000..11_000).contains(&c)),
        "{counts:?}"
    );
}
