//! Memory per key of the embedded store: fills a [`MemoryStore`] with N distinct keys of one
//! algorithm, through the store's own `apply`, and prints the process's resident memory per key.
//!
//! ```sh
//! cargo run --release --example memory_per_key -- fixed_window 1000000
//! cargo run --release --example memory_per_key -- sliding_log 1000000 4
//! ```
//! Arguments: the algorithm (`fixed_window`, `token_bucket`, `sliding_window`, `leaky_bucket`,
//! `sliding_log`, `concurrency`), N keys (default 1 000 000, at most 50 000 000) and E entries per
//! key (default 1, at most 64): a sliding log logs E requests a microsecond apart on each key, a
//! concurrency limit takes E holders on each; a counter algorithm is hit E times. Bytes per entry
//! are printed too (bytes per key / E): what a sliding log or a concurrency limit costs per
//! logged request or holder. Run once with E = 1 and once with a larger E, the difference divided
//! by N × (E − 1) is the cost of one more entry.
//!
//! Keys are built by the service's own key builder (domain `example`, one entry
//! `remote_address=10.<a>.<b>.<c>`, a one-minute limit of 1 000, burst 1 000 for the buckets),
//! so their length is that of a real key. The allocator is the server's (mimalloc). RSS is read
//! from `/proc/self/statm` before and after the fill; the store's own byte estimate
//! (`MEMORY_MAX_BYTES` accounting) is printed beside it. The fill runs in batches of 64 ops, as a
//! request would; then every key is hit once more (the steady state: a key the store holds).
//! The instructions the store spends per op (a new key and a held one, half each) are counted
//! by callgrind inside the store's `apply` alone, key building left out:
//!
//! ```sh
//! valgrind --tool=callgrind --toggle-collect='*Store>::apply*' \
//!   target/release/examples/memory_per_key token_bucket 50000   # summary / 100 000 ops
//! ```

use std::time::Duration;

use ratelimitd_core::KeyFormat;
use ratelimitd_core::MemoryStore;
use ratelimitd_core::algorithm::{Algorithm, LimitSpec, Window};
use ratelimitd_core::clock::{Stopwatch, Timestamp};
use ratelimitd_core::limiter::key::KeyBuilder;
use ratelimitd_core::store::{Op, Store};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Resident set size of this process in bytes (Linux).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm's second field");
    pages * 4096
}

/// What the example fills: N keys of one limit, E entries each.
struct Fill {
    store: MemoryStore,
    keys: KeyBuilder,
    spec: LimitSpec,
    n: u64,
    entries: u64,
    now: Timestamp,
}

impl Fill {
    /// The op of entry `e` on key `i`; returns the key's length too.
    fn op(&self, i: u64, e: u64) -> Op {
        let value = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
        let key = self.keys.build(
            "example",
            [("remote_address", value.as_str())].into_iter(),
            &self.spec,
            self.now,
        );
        Op {
            key,
            spec: self.spec,
            hits: 1,
            refund: false,
            max_wait: Duration::ZERO,
            lease: None,
            // A concurrency limit's holders are told apart by name.
            holder: if self.spec.algorithm == Algorithm::Concurrency {
                format!("h{e}")
            } else {
                String::new()
            },
            only_admitted: false,
            report: false,
        }
    }

    /// Runs entry `e` of every key, 64 ops per call; returns the total length of the keys.
    async fn pass(&self, e: u64, at: Timestamp) -> u64 {
        let mut batch = Vec::with_capacity(64);
        let mut key_bytes = 0u64;
        for i in 0..self.n {
            let op = self.op(i, e);
            key_bytes += op.key.len() as u64;
            batch.push(op);
            if batch.len() == 64 || i + 1 == self.n {
                self.store
                    .apply(&batch, at)
                    .await
                    .expect("an unbounded store");
                batch.clear();
            }
        }
        key_bytes
    }
}

/// Creates every key and its E entries (a microsecond apart).
async fn fill(f: &Fill) -> u64 {
    let mut key_bytes = 0;
    for e in 0..f.entries {
        key_bytes = f
            .pass(e, f.now.saturating_add(Duration::from_micros(e)))
            .await;
    }
    key_bytes
}

/// Hits every key once more, as its first holder again for a concurrency limit (a renewal).
async fn hit_again(f: &Fill) {
    f.pass(0, f.now.saturating_add(Duration::from_micros(f.entries)))
        .await;
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let name = argv.first().map_or("fixed_window", String::as_str);
    let algorithm = Algorithm::parse(name).unwrap_or_else(|| panic!("unknown algorithm {name}"));
    let number = |i: usize, default: u64, max: u64| -> u64 {
        argv.get(i)
            .map_or(Ok(default), |v| v.parse())
            .expect("a number")
            .clamp(1, max)
    };
    let n = number(1, 1_000_000, 50_000_000);
    let entries = number(2, 1, 64);
    let f = Fill {
        store: MemoryStore::with_limits(usize::MAX, usize::MAX),
        keys: KeyBuilder::new("", KeyFormat::Safe),
        spec: LimitSpec {
            algorithm,
            limit: 1000,
            window: Window::from_secs(60).expect("a non-zero window"),
            burst: if algorithm.has_burst() { 1000 } else { 0 },
        },
        n,
        entries,
        now: Timestamp::from_secs(1_800_000_000),
    };
    let before = rss_bytes();
    let watch = Stopwatch::start();
    let key_bytes = fill(&f).await;
    let filled = watch.elapsed().as_secs_f64();
    let grown = rss_bytes().saturating_sub(before);
    // The estimate of the keys as filled (a sliding log hit again holds one more entry).
    let estimate = f.store.bytes();
    let watch = Stopwatch::start();
    hit_again(&f).await;
    let again = watch.elapsed().as_secs_f64();
    println!(
        "{name}: {n} keys × {entries} (mean key {:.0} B) in {filled:.1}s, hit again in {again:.1}s; \
         RSS +{:.1} MB = {:.0} B/key, {:.0} B/entry; store estimate {:.0} B/key",
        key_bytes as f64 / n as f64,
        grown as f64 / 1e6,
        grown as f64 / n as f64,
        grown as f64 / (n * entries) as f64,
        estimate as f64 / n as f64,
    );
}
