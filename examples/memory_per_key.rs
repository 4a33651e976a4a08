//! Memory per key of the embedded store: fills a [`MemoryStore`] with N distinct keys of one
//! algorithm, through the store's own `apply`, and prints the process's resident memory per key.
//!
//! ```sh
//! cargo run --release --example memory_per_key -- fixed_window 1000000
//! ```
//! Keys are built by the service's own key builder (domain `example`, one entry
//! `remote_address=10.<a>.<b>.<c>`, a one-minute limit), so their length is that of a real key.
//! The allocator is the server's (mimalloc). RSS is read from `/proc/self/statm` before and after
//! the fill; the store's own byte estimate (`MEMORY_MAX_BYTES` accounting) is printed beside it.
//! The fill is bounded by N (at most 50 000 000) and runs in batches of 64 ops, as a request would.

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

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let name = argv.first().map_or("fixed_window", String::as_str);
    let algorithm = Algorithm::parse(name).unwrap_or_else(|| panic!("unknown algorithm {name}"));
    let n: u64 = argv
        .get(1)
        .map_or(Ok(1_000_000), |v| v.parse())
        .expect("N is a number")
        .min(50_000_000);
    let spec = LimitSpec {
        algorithm,
        limit: 1000,
        window: Window::from_secs(60).expect("a non-zero window"),
        burst: if algorithm.has_burst() { 1000 } else { 0 },
    };
    let store = MemoryStore::with_limits(usize::MAX, usize::MAX);
    let keys = KeyBuilder::new("", KeyFormat::Safe);
    let now = Timestamp::from_secs(1_800_000_000);
    let before = rss_bytes();
    let watch = Stopwatch::start();
    let mut batch = Vec::with_capacity(64);
    let mut key_bytes = 0u64;
    for i in 0..n {
        let value = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
        let key = keys.build(
            "example",
            [("remote_address", value.as_str())].into_iter(),
            &spec,
            now,
        );
        key_bytes += key.len() as u64;
        batch.push(Op {
            key,
            spec,
            hits: 1,
            refund: false,
            max_wait: std::time::Duration::ZERO,
            lease: None,
            holder: String::new(),
            only_admitted: false,
            report: false,
        });
        if batch.len() == 64 || i + 1 == n {
            store.apply(&batch, now).await.expect("an unbounded store");
            batch.clear();
        }
    }
    let fill = watch.elapsed().as_secs_f64();
    let grown = rss_bytes().saturating_sub(before);
    println!(
        "{name}: {n} keys (mean key {:.0} B) in {fill:.1}s; RSS +{:.1} MB = {:.0} B/key; store estimate {:.0} B/key",
        key_bytes as f64 / n.max(1) as f64,
        grown as f64 / 1e6,
        grown as f64 / n.max(1) as f64,
        store.bytes() as f64 / n.max(1) as f64,
    );
}
