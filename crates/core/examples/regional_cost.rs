//! What a regional limit costs on the request path: decisions per second of one thread on the
//! memory store for the same limit global, with static region shares, and following demand
//! (whose hits are recorded for the sync), over 10 000 distinct keys. Run with
//! `cargo run --release -p ratelimitd-core --example regional_cost`; figures go in
//! docs/performance.md, never in a test.

use std::sync::Arc;

use ratelimitd_core::clock::Stopwatch;
use ratelimitd_core::region::RegionShares;
use ratelimitd_core::{
    CompileOptions, ConfigFile, Descriptor, LimiterOptions, ManualClock, MemoryStore, RateLimiter,
    Request, Timestamp, compile,
};

const CONFIG: &str = "domain: d
descriptors:
  - {key: global, rate_limit: {unit: hour, requests_per_unit: 1000000}}
  - {key: static, rate_limit: {unit: hour, requests_per_unit: 1000000, regions: {shares: {eu: 0.6, us: 0.4}}}}
  - {key: demand, rate_limit: {unit: hour, requests_per_unit: 1000000, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: true}}}
";

const KEYS: usize = 10_000;
const DECISIONS: usize = 400_000;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [ConfigFile {
        name: "d.yaml".into(),
        contents: CONFIG.into(),
    }];
    let config = compile(&files, &CompileOptions::default())?;
    for key in ["global", "static", "demand"] {
        let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_700_000_000)));
        let store = Arc::new(MemoryStore::new(4 * KEYS));
        let limiter = RateLimiter::new(store, clock, LimiterOptions::default())
            .with_regions(Arc::new(RegionShares::new("eu")));
        let requests: Vec<Request> = (0..KEYS)
            .map(|i| Request::new("d", vec![Descriptor::of(&[(key, &i.to_string())])]))
            .collect();
        let watch = Stopwatch::start();
        for n in 0..DECISIONS {
            limiter
                .should_rate_limit(Some(&config), &requests[n % KEYS])
                .await?;
        }
        let secs = watch.elapsed().as_secs_f64();
        println!("{key:>7}: {:>9.0} decisions/s", DECISIONS as f64 / secs);
    }
    Ok(())
}
