//! The slots-in-use gauge of a concurrency limit, scraped from the real Prometheus endpoint on
//! every store: it rises as holders take slots, does not count a refused holder, falls on each
//! release, stays one series per configured limit whatever the request values, and drops to 0
//! once the last lease it saw ends with no call after it (manual clock).

use std::time::Duration;

use crate::support::*;

/// Two slots per tenant, leases of one minute.
const CFG: &str = "domain: g
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: concurrency}
";

const GAUGE: &str = "ratelimitd_concurrency_slots_in_use{domain=\"g\",key1=\"tenant\",key2=\"\"}";

async fn slot(s: &TestServer, tenant: &str, holder: &str, release: bool) -> Code {
    let mut req = request("g", &[&[("tenant", tenant), ("ratelimitd.holder", holder)]]);
    req.descriptors[0].is_negative_hits = release;
    overall(&s.call(req).await.expect("ShouldRateLimit succeeds"))
}

/// The gauge now, and the number of its series (one whatever the tenants).
async fn in_use(s: &TestServer) -> (u64, usize) {
    let m = s.scrape().await;
    let series = m
        .lines()
        .filter(|l| l.starts_with("ratelimitd_concurrency_slots_in_use{"))
        .count();
    (m.value(GAUGE), series)
}

on_every_store!(the_gauge_follows_held_slots);
async fn the_gauge_follows_held_slots(store: StoreKind) {
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start_with_store(&[("g.yaml", CFG)], &env, store).await;
    assert_eq!(slot(&s, "a", "r1", false).await, Code::Ok);
    assert_eq!(in_use(&s).await, (1, 1));
    assert_eq!(slot(&s, "a", "r2", false).await, Code::Ok);
    assert_eq!(in_use(&s).await, (2, 1));
    assert_eq!(slot(&s, "a", "r3", false).await, Code::OverLimit);
    assert_eq!(in_use(&s).await, (2, 1), "a refused holder holds nothing");
    assert_eq!(slot(&s, "a", "r1", true).await, Code::Ok);
    assert_eq!(in_use(&s).await, (1, 1), "a release frees its slot");
    assert_eq!(slot(&s, "a", "r1", true).await, Code::Ok);
    assert_eq!(in_use(&s).await, (1, 1), "a second release frees nothing");
    // Another tenant's slots: still one series, the limit's.
    assert_eq!(slot(&s, "b", "r9", false).await, Code::Ok);
    assert_eq!(in_use(&s).await.1, 1, "one series per configured limit");
    assert_eq!(slot(&s, "b", "r9", true).await, Code::Ok);
    assert_eq!(slot(&s, "a", "r2", true).await, Code::Ok);
    assert_eq!(in_use(&s).await, (0, 1));
    // A holder that never releases: its slot shows until its lease ends, then 0 without a call.
    assert_eq!(slot(&s, "a", "crashed", false).await, Code::Ok);
    s.advance(Duration::from_millis(59_999));
    assert_eq!(in_use(&s).await, (1, 1));
    s.advance(Duration::from_millis(1));
    assert_eq!(in_use(&s).await, (0, 1), "the lease ended at 60 s");
}
