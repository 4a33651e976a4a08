//! Concurrency limits while their real redis-server is killed with slots held, then restarted
//! from its last snapshot. While Redis is down every call is answered by the limit's failure
//! mode within the response timeout (`allow` admits and holds nothing, `deny` refuses, `local`
//! keeps this instance's share of the slots in process and its releases free them there); a
//! release is never refused. After Redis returns, the holders it persisted are counted again
//! until their leases end: a lease that ended during the outage is gone, one still running is
//! counted, and a release lost in the outage leaves its slot only until that slot's lease ends.
//! The lease timeouts run on the manual clock; the only real waits are the restart and the
//! breaker's probe, both bounded.

use std::time::Duration;

use crate::support::chaos::{ENV, source};
use crate::support::redis::RedisServer;
use crate::support::{Code, T0, TestServer, overall, request, require};
use ratelimitd_core::clock::Stopwatch;

/// Four slots with leases of one minute under each failure mode; a plain limit to probe Redis.
const CFG: &str = "domain: o
descriptors:
  - {key: allow, rate_limit: {unit: minute, requests_per_unit: 4, algorithm: concurrency, failure_mode: allow}}
  - {key: deny, rate_limit: {unit: minute, requests_per_unit: 4, algorithm: concurrency, failure_mode: deny}}
  - {key: local, rate_limit: {unit: minute, requests_per_unit: 4, algorithm: concurrency, failure_mode: local, local_share: 0.5}}
  - {key: probe, rate_limit: {unit: second, requests_per_unit: 1000}}
";

const MODES: [&str; 3] = ["allow", "deny", "local"];

/// `REDIS_RESPONSE_TIMEOUT` here: longer than the chaos tests' so that calls after the restart
/// are not timed out by a loaded machine; the outage's calls fail at once (nothing listens).
const TIMEOUT: Duration = Duration::from_secs(1);

/// The chaos settings (breaker after 3 failures, 1 s cool-down, sources in metadata) with
/// [`TIMEOUT`] and one Redis connection.
fn env() -> Vec<(&'static str, &'static str)> {
    let mut env: Vec<_> = (ENV.iter())
        .filter(|(k, _)| !["REDIS_RESPONSE_TIMEOUT", "REDIS_TIMEOUT"].contains(k))
        .copied()
        .collect();
    env.extend([("REDIS_RESPONSE_TIMEOUT", "1s"), ("REDIS_TIMEOUT", "1s")]);
    // One connection: once the probe is decided by Redis, every later call is too (a pool's
    // other connections would each fail once more as they reconnect).
    env.push(("REDIS_POOL_SIZE", "1"));
    env
}

/// Acquires (or releases) `holder`'s slot of the limit of `mode`: the answer, what decided it.
async fn slot(s: &TestServer, mode: &str, holder: &str, release: bool) -> (Code, String) {
    let mut req = request("o", &[&[(mode, "x"), ("ratelimitd.holder", holder)]]);
    req.descriptors[0].is_negative_hits = release;
    let watch = Stopwatch::start();
    let r = s.call(req).await.expect("answered, never an error");
    let took = watch.elapsed();
    assert!(
        took < TIMEOUT.saturating_mul(8),
        "{mode} {holder}: answered in {took:?}, as if it waited for Redis"
    );
    (overall(&r), source(&r))
}

/// Acquires `holders` in turn on the limit of `mode`; their answers.
async fn acquire(s: &TestServer, mode: &str, holders: &[&str]) -> Vec<Code> {
    let mut out = Vec::new();
    for h in holders {
        let (code, from) = slot(s, mode, h, false).await;
        assert_eq!(from, "store", "{mode} {h}: Redis decides");
        out.push(code);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_held_through_a_redis_crash_end_with_their_leases() {
    require!(Redis);
    let mut redis = RedisServer::start();
    let s = TestServer::start_on(&[("o.yaml", CFG)], &env(), Some(&redis)).await;
    let (ok, over) = (Code::Ok, Code::OverLimit);
    for mode in MODES {
        assert_eq!(acquire(&s, mode, &["old"]).await, [ok]);
    }
    s.set_time(T0 + 50);
    for mode in MODES {
        assert_eq!(acquire(&s, mode, &["young", "lost"]).await, [ok, ok]);
    }

    // Redis crashes after a snapshot of the held slots (it restarts from it).
    assert_eq!(redis.cli(&["SAVE"]), "OK");
    redis.kill();
    for mode in MODES {
        let (code, from) = slot(&s, mode, "lost", true).await;
        assert_eq!(code, ok, "{mode}: a release is never refused ({from})");
    }
    // `allow` admits and takes nothing; `deny` refuses. (An unenforced answer names no source
    // in its metadata: the decision counters below say what decided.)
    for h in ["a1", "a2", "a3", "a4", "a5"] {
        assert_eq!(slot(&s, "allow", h, false).await.0, ok, "allow admits");
    }
    for h in ["d1", "d2"] {
        let (code, from) = slot(&s, "deny", h, false).await;
        assert_eq!(code, over, "deny refuses");
        assert!(
            ["failure_policy", "breaker"].contains(&from.as_str()),
            "{from}"
        );
    }
    // `local`: this instance's half of the four slots, kept in process.
    let mut local = Vec::new();
    for h in ["l1", "l2", "l3"] {
        local.push(slot(&s, "local", h, false).await);
    }
    let codes: Vec<Code> = local.iter().map(|(c, _)| *c).collect();
    assert_eq!(codes, [ok, ok, over], "{local:?}");
    assert!(
        local.iter().all(|(_, f)| f == "local_fallback"),
        "{local:?}"
    );
    assert_eq!(slot(&s, "local", "l1", true).await.0, ok);
    assert_eq!(
        slot(&s, "local", "l4", false).await,
        (ok, "local_fallback".into()),
        "a local release frees a local slot"
    );

    // Every call of the outage was answered without Redis: by the failure policy (the open
    // breaker's included) or the local fallback.
    let m = s.scrape().await;
    let decided = |code: &str, sources: &[&str]| -> u64 {
        let series =
            |src| format!("ratelimitd_decisions_total{{code=\"{code}\",source=\"{src}\"}}");
        sources
            .iter()
            .map(|src| m.count(&series(src)).unwrap_or(0))
            .sum()
    };
    let policy = ["failure_policy", "breaker"];
    assert_eq!(
        decided("ok", &policy),
        2 + 5,
        "two releases, five allowed: {m}"
    );
    assert_eq!(decided("over_limit", &policy), 2, "two denied: {m}");
    assert_eq!(decided("ok", &["local_fallback"]), 5, "{m}");
    assert_eq!(decided("over_limit", &["local_fallback"]), 1, "{m}");

    redis.restart();
    // Probe until Redis decides again; the breaker's cool-down (1 s) runs on the manual clock.
    let watch = Stopwatch::start();
    let mut at = T0 + 50;
    loop {
        at += 1;
        assert!(
            at < T0 + 60,
            "Redis decides again before the first lease ends"
        );
        s.set_time(at);
        // The probe limit has the default failure mode (`error`) until Redis answers.
        let r = s.call(request("o", &[&[("probe", "p")]])).await;
        if r.is_ok_and(|r| source(&r) == "store") {
            break;
        }
        assert!(
            watch.elapsed() < Duration::from_secs(10),
            "recovery is bounded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // At 60 s the lease of `old` has ended; `young` and `lost` (whose release was lost with
    // Redis) are still held: two of the four slots are free, whatever the outage admitted.
    s.set_time(T0 + 60);
    for mode in MODES {
        let got = acquire(&s, mode, &["n1", "n2", "n3"]).await;
        assert_eq!(
            got,
            [ok, ok, over],
            "{mode}: old gone, young and lost counted"
        );
    }
    // At 110 s the leases of `young` and `lost` end too: the lost release leaked nothing.
    s.set_time(T0 + 110);
    for mode in MODES {
        let got = acquire(&s, mode, &["m1", "m2", "m3"]).await;
        assert_eq!(got, [ok, ok, over], "{mode}: only n1 and n2 are still held");
    }
    let m = s.scrape().await;
    for mode in MODES {
        let gauge = format!(
            "ratelimitd_concurrency_slots_in_use{{domain=\"o\",key1=\"{mode}\",key2=\"\"}}"
        );
        assert_eq!(m.value(&gauge), 4, "{mode}");
    }
    s.shutdown().await;
}
