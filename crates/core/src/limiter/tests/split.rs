//! A split limit through the limiter on the memory store: three limiters sharing one store admit
//! at most the limit in total, every request counts once in Go's stats, a concurrency release
//! reaches the sub-key that holds the slot, and a plan lists every sub-key for explain and reset.

use std::sync::Mutex;

use super::*;
use crate::random::SeededRandom;

const SPLIT: &str = r#"
domain: d
descriptors:
  - {key: fw, rate_limit: {unit: hour, requests_per_unit: 100, split: 3}}
  - {key: tb, rate_limit: {unit: hour, requests_per_unit: 60, algorithm: token_bucket, burst: 30, split: 6}}
  - {key: c, rate_limit: {unit: hour, requests_per_unit: 4, algorithm: concurrency, split: 2}}
"#;

fn config() -> RateLimitConfig {
    let files = [ConfigFile {
        name: "d.yaml".into(),
        contents: SPLIT.into(),
    }];
    config::compile(&files, &CompileOptions::default()).unwrap()
}

/// Per stats key, the sum of every increment.
#[derive(Debug, Default)]
struct Totals(Mutex<LimitIncrements>);

impl StatsSink for Totals {
    fn limit(&self, _: &str, inc: &LimitIncrements) {
        let mut t = self.0.lock().unwrap();
        t.total_hits += inc.total_hits;
        t.over_limit += inc.over_limit;
        t.within_limit += inc.within_limit;
        t.near_limit += inc.near_limit;
    }
    fn domain_not_found(&self, _: &str) {}
    fn global_shadow_mode(&self) {}
    fn error(&self, _: ErrorKind) {}
    fn store_call(&self, _: std::time::Duration, _: bool) {}
    fn decision(&self, _: Code, _: Source) {}
}

fn three(store: &Arc<MemoryStore>, stats: &Arc<Totals>) -> Vec<RateLimiter> {
    (0..3)
        .map(|seed| {
            let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_000)));
            let store: Arc<dyn Store> = Arc::clone(store) as Arc<dyn Store>;
            RateLimiter::with_stats(store, clock, LimiterOptions::default(), stats.clone())
                .with_random(Arc::new(SeededRandom::new(seed)))
        })
        .collect()
}

#[tokio::test]
async fn three_limiters_admit_at_most_the_limit_and_count_every_request_once() {
    let cfg = config();
    for (key, limit) in [("fw", 100), ("tb", 30)] {
        let store = Arc::new(MemoryStore::new(1000));
        let stats = Arc::new(Totals::default());
        let limiters = three(&store, &stats);
        let mut admitted = 0u64;
        // Skewed: the first limiter sends half of everything.
        for n in 0..400u64 {
            let l = &limiters[if n % 2 == 0 { 0 } else { (n % 3) as usize }];
            let r = l
                .should_rate_limit(Some(&cfg), &req(&[&[(key, "hot")]]))
                .await
                .unwrap();
            admitted += u64::from(r.overall_code == Code::Ok);
        }
        assert!(admitted <= limit, "{key}: {admitted} > {limit}");
        // Random sub-keys fill evenly: all but a few of the limit are admitted.
        assert!(
            admitted >= limit * 9 / 10,
            "{key}: only {admitted} of {limit}"
        );
        let t = *stats.0.lock().unwrap();
        assert_eq!(t.total_hits, 400, "{key}");
        assert_eq!(
            (t.within_limit, t.over_limit),
            (admitted, 400 - admitted),
            "{key}"
        );
    }
}

#[tokio::test]
async fn a_concurrency_release_frees_the_slot_of_its_sub_key() {
    let cfg = config();
    let store = Arc::new(MemoryStore::new(1000));
    let stats = Arc::new(Totals::default());
    let limiters = three(&store, &stats);
    let call = |i: usize, holder: &str, refund: bool| {
        let mut d = Descriptor::of(&[("c", "x")]);
        d.holder = Some(holder.to_string());
        d.refund = refund;
        let r = Request::new("d", vec![d]);
        let l = &limiters[i];
        let cfg = &cfg;
        async move {
            l.should_rate_limit(Some(cfg), &r)
                .await
                .unwrap()
                .overall_code
        }
    };
    let mut held = Vec::new();
    for n in 0..20 {
        let holder = format!("h{n}");
        if call(n % 3, &holder, false).await == Code::Ok {
            held.push(holder);
        }
    }
    assert!(held.len() <= 4 && !held.is_empty(), "{held:?}");
    // Released from another instance, each slot frees: its holder takes it again.
    for (n, holder) in held.iter().enumerate() {
        assert_eq!(call((n + 1) % 3, holder, true).await, Code::Ok);
        assert_eq!(call((n + 2) % 3, holder, false).await, Code::Ok, "{holder}");
    }
}

#[test]
fn a_plan_lists_every_sub_key_with_its_share() {
    let cfg = config();
    let r = req(&[&[("fw", "hot")], &[("tb", "hot")]]);
    let plans = plan::plan(
        cfg.domain("d"),
        &OverrideIndex::default(),
        &r,
        &KeyBuilder::default(),
        Timestamp::from_secs(1_000),
        &SeededRandom::new(1),
        FailureMode::default(),
    )
    .unwrap();
    for (at, (n, limit)) in [(3, 100), (6, 30)].into_iter().enumerate() {
        let subs = plans.sub_ops(at).unwrap();
        assert_eq!(subs.len(), n);
        let keys: std::collections::HashSet<&str> = subs.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys.len(), n);
        assert!(keys.contains(plans.ops[at].key.as_str()));
        let shares: u64 = subs
            .iter()
            .map(|o| if at == 0 { o.spec.limit } else { o.spec.burst })
            .sum();
        assert_eq!(shares, limit);
    }
}
