//! Per-core stripes for state every request writes (stat counters, hot-key sketches). A memory
//! location written by two cores moves between their caches on every write, so one shared counter
//! bumped by every request costs each core a cache miss per decision and keeps two cores from
//! doing twice the work of one (measured with `examples/cores.rs`). Striped state keeps one copy
//! per stripe, each thread writes only its own, and readers (scrapes, the admin API) add the
//! stripes up.
//!
//! A thread gets its stripe the first time it asks, round-robin, so the runtime's worker threads
//! (one per core) land on different stripes; there are as many stripes as cores (at most
//! [`MAX`]). Threads beyond that share stripes, which is still correct, only slower.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most stripes, whatever the core count (bounds the memory of striped state).
pub const MAX: usize = 16;

/// How many stripes striped state should have: the cores this process may use, 1 to [`MAX`].
pub fn count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .clamp(1, MAX)
    })
}

/// The calling thread's number: 0, 1, 2, ... in the order threads first ask, fixed for the
/// thread's life. Pools that spread threads over their own members (the Redis connections) take
/// it modulo their size.
pub fn thread_number() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|n| *n)
}

/// The calling thread's stripe, below [`count`].
pub fn mine() -> usize {
    thread_number() % count()
}

/// `T` alone on its cache lines (128 bytes: two 64-byte lines, as adjacent-line prefetch pairs
/// them), so stripes next to each other in memory do not share a line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Padded<T>(pub T);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_keeps_its_stripe_and_stripes_are_in_range() {
        let here = mine();
        assert_eq!(mine(), here, "stable within a thread");
        assert!(here < count());
        let others: Vec<usize> = (0..count())
            .map(|_| std::thread::spawn(mine).join().unwrap())
            .collect();
        assert!(others.iter().all(|&i| i < count()), "{others:?}");
        let number = thread_number();
        assert_eq!(thread_number(), number, "a thread keeps its number");
        let there = std::thread::spawn(thread_number).join().unwrap();
        assert_ne!(there, number, "another thread gets another number");
        assert_eq!(std::mem::align_of::<Padded<u64>>(), 128);
    }
}
