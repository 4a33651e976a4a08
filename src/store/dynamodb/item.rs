//! The table's item layout: the attribute names, and the whole state of the algorithms updated
//! optimistically (`cas.rs`) as a short text of numbers. A key's algorithm is part of the cache
//! key, so the text needs no tag.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use ratelimitd_core::algorithm::leaky_bucket::LeakyBucketState;
use ratelimitd_core::algorithm::sliding_window::SlidingWindowState;
use ratelimitd_core::algorithm::token_bucket::TokenBucketState;
use ratelimitd_core::algorithm::{Algorithm, AlgorithmState};
use ratelimitd_core::clock::Timestamp;

/// The partition key: the cache key (string).
pub(super) const KEY: &str = "k";
/// A fixed window's count (number).
pub(super) const COUNT: &str = "n";
/// When the item may be deleted, in Unix seconds (number): the table's TTL attribute.
pub(super) const EXPIRES: &str = "e";
/// The version of an optimistically updated state (number).
pub(super) const VERSION: &str = "v";
/// An optimistically updated state (string, [`encode`]).
pub(super) const STATE: &str = "s";

/// An item as DynamoDB returns it.
pub(super) type Item = HashMap<String, AttributeValue>;

/// The number in `item`'s attribute `name`, if it holds one.
pub(super) fn number(item: &Item, name: &str) -> Option<u64> {
    item.get(name)?.as_n().ok()?.parse().ok()
}

/// A number as DynamoDB takes it.
pub(super) fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The TTL value of an item that may go at `at`: whole seconds, rounded up, so an item is never
/// deleted (nor read as gone) before its state stops mattering.
pub(super) fn expiry_secs(at: Timestamp) -> u64 {
    at.as_micros().div_ceil(1_000_000)
}

/// Whether `item` is past its expiry at `now`: DynamoDB deletes expired items up to days late,
/// and until then they must read as absent.
pub(super) fn expired(item: &Item, now: Timestamp) -> bool {
    number(item, EXPIRES).is_some_and(|e| e.saturating_mul(1_000_000) <= now.as_micros())
}

/// The text of a state, or `None` for an algorithm this store does not keep as a whole state.
pub(super) fn encode(state: &AlgorithmState) -> Option<String> {
    Some(match state {
        AlgorithmState::TokenBucket(s) => format!("{} {}", s.last, s.debt),
        AlgorithmState::LeakyBucket(s) => format!("{} {}", s.tat, s.frac),
        AlgorithmState::SlidingWindow(s) => {
            format!("{} {} {}", s.window_start, s.current, s.previous)
        }
        AlgorithmState::FixedWindow(_)
        | AlgorithmState::SlidingLog(_)
        | AlgorithmState::Concurrency(_) => return None,
    })
}

/// The state of `algorithm` in `text`, or `None` when the text is not one [`encode`] writes.
pub(super) fn decode(algorithm: Algorithm, text: &str) -> Option<AlgorithmState> {
    let numbers: Vec<u64> = text
        .split(' ')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    Some(match (algorithm, &numbers[..]) {
        (Algorithm::TokenBucket, &[last, debt]) => {
            AlgorithmState::TokenBucket(TokenBucketState { last, debt })
        }
        (Algorithm::LeakyBucket, &[tat, frac]) => {
            AlgorithmState::LeakyBucket(LeakyBucketState { tat, frac })
        }
        (Algorithm::SlidingWindow, &[window_start, current, previous]) => {
            AlgorithmState::SlidingWindow(SlidingWindowState {
                window_start,
                current,
                previous,
            })
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_back_as_written() {
        let states = [
            AlgorithmState::TokenBucket(TokenBucketState {
                last: 7,
                debt: u64::MAX,
            }),
            AlgorithmState::LeakyBucket(LeakyBucketState { tat: 1, frac: 0 }),
            AlgorithmState::SlidingWindow(SlidingWindowState {
                window_start: 1_700_000_000,
                current: 3,
                previous: 9,
            }),
        ];
        let algorithms = [
            Algorithm::TokenBucket,
            Algorithm::LeakyBucket,
            Algorithm::SlidingWindow,
        ];
        for (state, algorithm) in states.iter().zip(algorithms) {
            let text = encode(state).unwrap();
            assert_eq!(decode(algorithm, &text).as_ref(), Some(state), "{text}");
        }
        assert_eq!(decode(Algorithm::TokenBucket, "1 2 3"), None);
        assert_eq!(decode(Algorithm::SlidingWindow, "x y z"), None);
    }

    #[test]
    fn an_item_reads_as_gone_once_its_expiry_passed() {
        let item: Item = [(EXPIRES.to_string(), n(100))].into();
        assert!(!expired(&item, Timestamp::from_secs(99)));
        assert!(expired(&item, Timestamp::from_secs(100)));
        assert!(!expired(&Item::new(), Timestamp::from_secs(100)));
        assert_eq!(expiry_secs(Timestamp::from_micros(100_000_001)), 101);
    }
}
