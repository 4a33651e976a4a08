//! Chaos tests of the circuit breaker and the failure policy: ratelimitd instances under load while
//! their real redis-server is killed, hung (SIGSTOP) or slowed (`DEBUG SLEEP`), then back. Every
//! call is answered by its limit's failure policy within `REDIS_RESPONSE_TIMEOUT` while the breaker
//! is closed and at once once it is open; in `failure_mode: local` a fleet admits at most its
//! limit; after Redis returns, Redis decides again. The breaker's cool-down runs on the manual
//! clock, so recovery is driven by advancing it; real waits are bounded. Timings are printed for
//! the README (`bash tests/run.sh --test it redis::chaos_breaker -- --nocapture`).

use std::time::Duration;

use crate::support::chaos::{
    CFG, ENV, HANG, Paused, answered_at_once, load, redis_pid, report, target_transitions, timed,
    until_redis_decides,
};
use crate::support::redis::RedisServer;
use crate::support::require;
use crate::support::{Code, TestServer, overall};
use ratelimitd_core::clock::Stopwatch;

async fn start(redis: &RedisServer) -> TestServer {
    TestServer::start_on(&[("c.yaml", CFG)], &ENV, Some(redis)).await
}

/// The breaker transition counter `to` of the main Redis.
fn transitions(s: &TestServer, to: &str) -> u64 {
    target_transitions(s, "main", to)
}

/// Waits (bounded) until every instance of `fleet` has read the whole fleet from the instances'
/// set. A heartbeat adds its instance, scored by its clock's second, and then reads how many
/// there are: once all have announced themselves, each instance's clock moves on one second, and
/// a member scored with that second was written by a beat that read the whole set.
async fn every_instance_has_seen(redis: &RedisServer, fleet: &[TestServer]) {
    let key = "{ratelimitd_instances}";
    let n = fleet.len().to_string();
    let watch = Stopwatch::start();
    while redis.cli(&["ZCARD", key]) != n {
        assert!(watch.elapsed() < Duration::from_secs(30), "heartbeats");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for s in fleet {
        s.advance(Duration::from_secs(1));
    }
    let since = (crate::support::T0 + 1).to_string();
    while redis.cli(&["ZCOUNT", key, &since, "+inf"]) != n {
        assert!(
            watch.elapsed() < Duration::from_secs(30),
            "every instance beats again: {}",
            redis.cli(&["ZRANGE", key, "0", "-1", "WITHSCORES"])
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_redis_three_instances_fall_back_to_their_share_then_redis_decides_again() {
    require!(Redis);
    let mut redis = RedisServer::start();
    let fleet = [
        start(&redis).await,
        start(&redis).await,
        start(&redis).await,
    ];
    every_instance_has_seen(&redis, &fleet).await;
    let (before, _, sources) = load(&fleet[0], "local", "warm", 20).await;
    assert!(sources.iter().all(|s| s == "store"), "{sources:?}");
    answered_at_once("killed, before", &before);
    report("killed", "before", &before);

    redis.kill();
    let (mut closed, mut open, mut admitted) = (Vec::new(), Vec::new(), 0);
    for s in &fleet {
        let (times, ok, sources) = load(s, "local", "x", 15).await;
        assert!(sources.iter().all(|s| s == "local_fallback"), "{sources:?}");
        assert_eq!(ok, 10, "each instance admits its third of 30");
        admitted += ok;
        closed.extend_from_slice(&times[..3]);
        open.extend_from_slice(&times[3..]);
        assert_eq!(
            transitions(s, "opened"),
            1,
            "three failures open the breaker"
        );
    }
    assert!(
        admitted <= 30,
        "the fleet admits at most the limit: {admitted}"
    );
    answered_at_once("killed, breaker open", &open);
    report("killed", "breaker closed", &closed);
    report("killed", "breaker open", &open);

    let text = fleet[0].scrape().await;
    assert!(
        text.contains("ratelimitd_redis_breaker_state{target=\"main\"} 2"),
        "{text}"
    );
    let fallback =
        r#"ratelimit_service_rate_limit_local_fallback{domain="chaos",key1="local",key2=""} 15"#;
    assert!(text.contains(fallback), "fallback hits per limit: {text}");

    redis.restart();
    let mut recovery = Vec::new();
    for s in &fleet {
        recovery.push(until_redis_decides(s, "local").await);
        assert_eq!(transitions(s, "closed"), 1);
    }
    report("killed", "recovery", &recovery);
    let text = fleet[0].scrape().await;
    assert!(
        text.contains("ratelimitd_redis_breaker_state{target=\"main\"} 0"),
        "{text}"
    );
    for s in fleet {
        s.shutdown().await;
    }
}

/// How Redis was made unresponsive, so the test can end the fault.
enum Stall {
    /// SIGSTOP (resumed with SIGCONT, also on drop).
    Paused(Paused),
    /// `redis-cli DEBUG SLEEP` in flight (Redis answers again when it returns).
    Sleeping(std::process::Child),
}

/// Redis stops answering without closing connections (SIGSTOP) or is busy (`DEBUG SLEEP`): the
/// first calls wait out the timeout, then the open breaker answers at once.
async fn unresponsive(
    fault: &str,
    key: &str,
    expect: Code,
    policy: &str,
    stall: impl FnOnce(&RedisServer) -> Stall,
) {
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let s = start(&redis).await;
    let (before, _, _) = load(&s, key, "warm", 20).await;
    report(fault, "before", &before);
    let paused = stall(&redis);
    let (times, _, sources) = load(&s, key, "x", 20).await;
    let mut open = Vec::new();
    for ((t, src), i) in times.iter().zip(&sources).zip(0..) {
        if i < 3 {
            assert_eq!(
                src, policy,
                "closed: the call times out, the policy answers"
            );
        } else {
            assert_eq!(src, "breaker", "open: answered without a call");
            open.push(*t);
        }
    }
    let r = timed(&s, "chaos", (key, "x")).await.1.unwrap();
    assert_eq!(overall(&r), expect);
    answered_at_once(&format!("{fault}, breaker open"), &open);
    report(fault, "breaker closed", &times[..3]);
    report(fault, "breaker open", &open);
    assert_eq!(transitions(&s, "opened"), 1);
    let text = s.scrape().await;
    assert!(
        text.contains("ratelimitd_redis_breaker_state{target=\"main\"} 2"),
        "open breaker gauge: {text}"
    );
    match paused {
        Stall::Paused(p) => p.resume(),
        Stall::Sleeping(mut cli) => {
            // Redis answers again when its `DEBUG SLEEP` returns.
            tokio::task::spawn_blocking(move || cli.wait())
                .await
                .unwrap()
                .unwrap();
        }
    }
    let recovery = until_redis_decides(&s, key).await;
    report(fault, "recovery", &[recovery]);
    // Which of the calls that timed out Redis applied once it resumed: printed, not asserted
    // (`deadline.rs` asserts that none is).
    let counted: Vec<String> = redis
        .cli(&["--scan", "--pattern", "*"])
        .lines()
        .filter(|k| k.contains(key) && k.contains('x'))
        .map(|k| format!("{k}={}", redis.cli(&["GET", k])))
        .collect();
    eprintln!("chaos {fault:<10} applied later: {counted:?} (3 calls timed out)");
    s.shutdown().await;
}

/// Waits (bounded) until the redis-server `pid` sleeps in `DEBUG SLEEP`: its main thread is in
/// `nanosleep`, where an idle server waits in `epoll_wait` instead (Linux's `/proc/<pid>/wchan`).
fn until_asleep(pid: &str) {
    let wchan = format!("/proc/{pid}/wchan");
    let watch = Stopwatch::start();
    loop {
        let now = std::fs::read_to_string(&wchan).unwrap_or_default();
        if now.contains("nanosleep") {
            return;
        }
        assert!(
            watch.elapsed() < Duration::from_secs(30),
            "redis-server never started its DEBUG SLEEP (waits in {now:?})"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_redis_is_answered_by_the_breaker_then_decides_again() {
    require!(Redis);
    unresponsive("hung", "deny", Code::OverLimit, "failure_policy", |r| {
        Stall::Paused(Paused::stop(r))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_redis_is_answered_by_the_breaker_then_decides_again() {
    require!(Redis);
    unresponsive("slow", "deny", Code::OverLimit, "failure_policy", |r| {
        // `DEBUG SLEEP` blocks the server; the command itself returns when it wakes. Long
        // enough for the three calls that open the breaker on a loaded host, where each may take
        // several times its timeout.
        let (port, pid) = (r.port.to_string(), redis_pid(r));
        let cli = std::process::Command::new("redis-cli")
            .args(["-p", &port, "DEBUG", "SLEEP", "5"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-cli runs");
        until_asleep(&pid);
        Stall::Sleeping(cli)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_per_second_redis_does_not_fail_the_limits_of_the_main_one() {
    require!(Redis);
    let main = RedisServer::start();
    let mut per_second = RedisServer::start();
    let sock = per_second.socket().display().to_string();
    let mut env = ENV.to_vec();
    env.extend([
        ("REDIS_PERSECOND", "true"),
        ("REDIS_PERSECOND_SOCKET_TYPE", "unix"),
        ("REDIS_PERSECOND_URL", sock.as_str()),
    ]);
    let s = TestServer::start_on(&[("c.yaml", CFG)], &env, Some(&main)).await;
    per_second.kill();
    let mut times = Vec::new();
    for i in 1..=10u32 {
        let watch = Stopwatch::start();
        let r = s
            .call(crate::support::request(
                "chaos",
                &[&[("deny", "m")], &[("fast", "s")]],
            ))
            .await
            .expect("answered");
        times.push(watch.elapsed());
        assert!(watch.elapsed() < HANG, "call {i}: answered in {times:?}");
        assert_eq!(overall(&r), Code::Ok, "call {i}");
        // The main Redis decided its limit; the per-second one was not enforced (allow).
        assert_eq!(r.statuses[0].limit_remaining, 30 - i, "call {i}");
        assert!(r.statuses[1].current_limit.is_none(), "call {i}");
    }
    answered_at_once("a dead per-second Redis", &times);
    assert_eq!(target_transitions(&s, "per_second", "opened"), 1);
    assert_eq!(target_transitions(&s, "main", "opened"), 0);
    s.shutdown().await;
}
