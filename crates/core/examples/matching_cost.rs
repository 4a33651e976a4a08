//! What expressive matching costs the limiter, in instructions per decision under callgrind: the
//! same decisions on the memory store against an exact-match domain (100 values) and a domain of
//! 100 `value_regex` entries and 10 `when:` conditions, where each decision tries every pattern
//! and evaluates all 10 conditions (9 false, then 1 true) before its limit. Run by
//! `bench/matching.sh`, which runs this twice under callgrind (N and 2N decisions) and takes the
//! difference, so start-up and config compilation cancel out; the figures are in
//! `docs/performance.md`.
//!
//! `matching_cost exact|regex|rules N` makes N decisions over 10 000 distinct descriptors on a manual
//! clock that moves one second every 10 000 decisions (each counter takes about one hit a
//! second, under its limit).

use std::sync::Arc;
use std::time::Duration;

use ratelimitd_core::{
    CompileOptions, ConfigFile, Descriptor, LimiterOptions, ManualClock, MemoryStore, RateLimiter,
    Request, Timestamp, compile,
};

const KEYS: usize = 10_000;

/// 100 exact values of `k`, each with its limit.
fn exact() -> String {
    let mut yaml = String::from("domain: bench\ndescriptors:\n");
    for i in 0..100 {
        yaml.push_str(&format!(
            "  - key: k\n    value: v{i}\n    rate_limit: {{unit: second, requests_per_unit: 10}}\n"
        ));
    }
    yaml
}

/// 90 patterns no request value matches, then 10 that every one does, each with a condition:
/// the first 9 false (`hits_addend` is 1), the last true, so every decision tests 100 patterns
/// and evaluates 10 conditions. Without the conditions (`regex`), the first of the 10 matches:
/// 91 patterns tested, nothing evaluated.
fn rules(conditions: bool) -> String {
    let mut yaml = String::from("domain: bench\ndescriptors:\n");
    for j in 0..90 {
        yaml.push_str(&format!(
            "  - key: k\n    value_regex: 'x{j}-[0-9]+'\n    rate_limit: {{unit: second, requests_per_unit: 10}}\n"
        ));
    }
    for j in 0..10 {
        let when = if j < 9 {
            format!("hits_addend > {} && descriptor.k.startsWith(\"v\")", 10 + j)
        } else {
            "domain == \"bench\" && \"k\" in descriptor".to_owned()
        };
        let when = if conditions {
            format!("    when: '{when}'\n")
        } else {
            String::new()
        };
        yaml.push_str(&format!(
            "  - key: k\n    value_regex: 'v[0-9]{{1,{}}}'\n{when}    rate_limit: {{unit: second, requests_per_unit: 10}}\n",
            5 + j
        ));
    }
    yaml
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "exact".into());
    let decisions: usize = args.next().map_or(Ok(20_000), |n| n.parse())?;
    let (contents, values) = match mode.as_str() {
        "exact" => (exact(), 100),
        "rules" => (rules(true), KEYS),
        "regex" => (rules(false), KEYS),
        other => {
            return Err(format!("unknown mode {other} (expected exact, regex or rules)").into());
        }
    };
    let file = ConfigFile {
        name: "bench.yaml".into(),
        contents,
    };
    let config = compile(&[file], &CompileOptions::default())?;
    let reqs: Vec<Request> = (0..KEYS)
        .map(|i| {
            let value = format!("v{}", i % values);
            Request::new("bench", vec![Descriptor::of(&[("k", value.as_str())])])
        })
        .collect();
    let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_700_000_000)));
    let store = Arc::new(MemoryStore::new(1_000_000));
    let limiter = RateLimiter::new(store, clock.clone(), LimiterOptions::default());
    let mut limited = 0usize;
    for n in 0..decisions {
        if n % KEYS == 0 {
            clock.advance(Duration::from_secs(1));
        }
        let r = limiter
            .should_rate_limit(Some(&config), &reqs[n % KEYS])
            .await?;
        limited += usize::from(r.statuses[0].current_limit.is_some());
    }
    // Every decision must have met its limit, or the figures measure something else.
    assert_eq!(limited, decisions, "a decision found no limit");
    println!("{mode}: {decisions} decisions");
    Ok(())
}
