//! Fault injection for the chaos tests: pausing a real redis-server (SIGSTOP) under a guard that
//! always resumes it, a TCP proxy whose connections can be cut, timing calls, and reading which
//! source decided a response; and what the
//! chaos tests share: their limits and settings, the breaker metrics, a bounded load loop and
//! a bounded wait for Redis to decide again.

use std::process::Command;
use std::time::Duration;

use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use ratelimitd_core::clock::Stopwatch;

use super::process::kill;
use super::redis::RedisServer;
use super::{Code, TestServer, overall};

/// A redis-server stopped with SIGSTOP; resumed (SIGCONT) on [`Paused::resume`] or on drop, so a
/// failing test never leaves a stopped Redis behind.
pub(crate) struct Paused {
    pid: Option<String>,
}

/// The redis-server's own pid (the test starts it under a shell guard).
pub(crate) fn redis_pid(r: &RedisServer) -> String {
    let info = r.cli(&["INFO", "server"]);
    info.lines()
        .find_map(|l| l.trim().strip_prefix("process_id:"))
        .expect("INFO server names the pid")
        .to_string()
}

impl Paused {
    /// Stops `r` (it keeps its connections open and answers nothing).
    pub(crate) fn stop(r: &RedisServer) -> Paused {
        let pid = redis_pid(r);
        kill("-STOP", &pid);
        Paused { pid: Some(pid) }
    }

    /// Lets it run again.
    pub(crate) fn resume(mut self) {
        if let Some(pid) = self.pid.take() {
            kill("-CONT", &pid);
        }
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            let _ = Command::new("kill").args(["-CONT", &pid]).status();
        }
    }
}

/// What decided a response, from its dynamic metadata (`store` when none is named).
pub(crate) fn source(r: &RateLimitResponse) -> String {
    use prost_types::value::Kind;
    let named = r.dynamic_metadata.as_ref().and_then(|md| {
        match md.fields.get("decisionSource")?.kind.as_ref()? {
            Kind::StringValue(s) => Some(s.clone()),
            _ => None,
        }
    });
    named.unwrap_or_else(|| "store".into())
}

/// One timed call of descriptor `(key, value)` in `domain`.
pub(crate) async fn timed(
    s: &TestServer,
    domain: &str,
    entry: (&str, &str),
) -> (Duration, Result<RateLimitResponse, tonic::Status>) {
    let watch = Stopwatch::start();
    let r = s.call(super::request(domain, &[&[entry]])).await;
    (watch.elapsed(), r)
}

/// p50, p99 and max of `times`, for the report lines the README quotes.
pub(crate) fn summary(times: &[Duration]) -> (Duration, Duration, Duration) {
    let mut t = times.to_vec();
    t.sort();
    if t.is_empty() {
        return Default::default();
    }
    let at = |q: f64| t[((t.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), t[t.len() - 1])
}

/// Prints one measurement line (`cargo test --test it redis::chaos -- --nocapture` shows them).
pub(crate) fn report(fault: &str, phase: &str, times: &[Duration]) {
    let (p50, p99, max) = summary(times);
    eprintln!(
        "chaos {fault:<10} {phase:<14} n={:<4} p50={p50:>10.3?} p99={p99:>10.3?} max={max:>10.3?}",
        times.len()
    );
}

/// The limits every chaos test uses: one per failure mode, and a per-second one.
pub(crate) const CFG: &str = r#"
domain: chaos
descriptors:
  - {key: local, rate_limit: {unit: minute, requests_per_unit: 30, failure_mode: local}}
  - {key: deny, rate_limit: {unit: minute, requests_per_unit: 30, failure_mode: deny}}
  - {key: allow, rate_limit: {unit: minute, requests_per_unit: 30, failure_mode: allow}}
  - {key: fast, rate_limit: {unit: second, requests_per_unit: 5, failure_mode: allow}}
"#;

/// `REDIS_RESPONSE_TIMEOUT` of [`ENV`].
pub(crate) const TIMEOUT: Duration = Duration::from_millis(250);
/// A chaos call taking this long hangs (eight response timeouts): far above what a loaded host
/// adds to a call answered within [`TIMEOUT`], far below the faults, which last until the test
/// ends them (a killed or stopped Redis) or for seconds (`DEBUG SLEEP`).
pub(crate) const HANG: Duration = TIMEOUT.saturating_mul(8);

/// Checks what a caller notices of an open breaker in `times`: most calls (the median) were
/// answered before one response timeout could have passed, so they did not wait for Redis. A
/// count, not a bound on every call: one call of a loaded host may be late, all of them not.
pub(crate) fn answered_at_once(what: &str, times: &[Duration]) {
    let (p50, _, max) = summary(times);
    assert!(
        p50 < TIMEOUT,
        "{what}: the median call took {p50:?} (max {max:?}), not less than REDIS_RESPONSE_TIMEOUT {TIMEOUT:?}"
    );
}

/// Short timeouts, a breaker opening after 3 failures with a 1 s cool-down, sources in metadata.
pub(crate) const ENV: [(&str, &str); 7] = [
    ("USE_PROMETHEUS", "true"),
    ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ("REDIS_RESPONSE_TIMEOUT", "250ms"),
    ("REDIS_TIMEOUT", "250ms"),
    ("REDIS_BREAKER_FAILURES", "3"),
    ("REDIS_BREAKER_COOLDOWN", "1s"),
    ("RESPONSE_DYNAMIC_METADATA", "true"),
];

/// The breaker transition counter `to` of Redis `target` (`main`, `per_second`, a Cluster
/// master's `host:port`, which StatsD names with `_` for `:` and `.`).
pub(crate) fn target_transitions(s: &TestServer, target: &str, to: &str) -> u64 {
    let target = target.replace([':', '.'], "_");
    let name = format!("ratelimitd.redis_breaker.{target}.{to}");
    let metrics = s.running().metrics.as_ref().expect("stats on");
    metrics
        .statsd_counters()
        .into_iter()
        .find_map(|(n, v)| (n == name).then_some(v))
        .unwrap_or(0)
}

/// Calls `key` until Redis decides again, advancing the manual clock by one cool-down before
/// each try so the breaker may probe; returns the real time it took. Bounded.
pub(crate) async fn until_redis_decides(s: &TestServer, key: &str) -> Duration {
    let watch = Stopwatch::start();
    for _ in 0..40 {
        s.advance(Duration::from_secs(1));
        if let (_, Ok(r)) = timed(s, "chaos", (key, "after")).await
            && source(&r) == "store"
        {
            return watch.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("Redis did not decide again within 40 probes");
}

/// Calls `key` `n` times on `s`: every call answered (never an error) and none hangs
/// ([`HANG`]); returns the times, how many were admitted and who decided each.
pub(crate) async fn load(
    s: &TestServer,
    key: &str,
    value: &str,
    n: usize,
) -> (Vec<Duration>, usize, Vec<String>) {
    let (mut times, mut admitted, mut sources) = (Vec::new(), 0, Vec::new());
    for _ in 0..n {
        let (t, r) = timed(s, "chaos", (key, value)).await;
        let r = r.expect("answered by Redis or the failure policy, not an error");
        assert!(t < HANG, "{key}: answered in {t:?}");
        times.push(t);
        admitted += usize::from(overall(&r) == Code::Ok);
        sources.push(source(&r));
    }
    (times, admitted, sources)
}

/// Calls `(key, value)` until Redis decides it, advancing the manual clock by one cool-down
/// before each try, for at most `limit` of real time (a failover takes seconds of real time:
/// the sentinels and cluster nodes run on their own clocks); returns the time it took.
pub(crate) async fn until_decided_within(
    s: &TestServer,
    (key, value): (&str, &str),
    limit: Duration,
) -> Duration {
    let watch = Stopwatch::start();
    for _ in 0..1_000 {
        s.advance(Duration::from_secs(1));
        if let (_, Ok(r)) = timed(s, "chaos", (key, value)).await
            && source(&r) == "store"
        {
            return watch.elapsed();
        }
        assert!(
            watch.elapsed() < limit,
            "Redis did not decide {key}={value} again within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("Redis did not decide {key}={value} again within 1000 tries");
}

/// Checks that the first three calls of a fault were answered by the policy after a failed call
/// and the rest by the open breaker; returns the times of the latter.
pub(crate) fn policy_then_breaker(
    times: &[Duration],
    sources: &[String],
    policy: &str,
) -> (Vec<Duration>, Vec<Duration>) {
    for (i, src) in sources.iter().enumerate() {
        let want = if i < 3 { policy } else { "breaker" };
        assert_eq!(src, want, "call {i} of {sources:?}");
    }
    (times[..3].to_vec(), times[3..].to_vec())
}

/// A loopback TCP proxy in front of a redis-server, whose connections can be cut: [`Proxy::cut`]
/// closes every open connection and drops new ones as soon as they are accepted (a network
/// partition as the client sees it), [`Proxy::restore`] lets them through again. Its tasks end
/// when it is dropped.
pub(crate) struct Proxy {
    /// The port to point the service at.
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tasks: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    /// A proxy on 127.0.0.1 to `upstream`'s TCP port.
    pub(crate) async fn start(upstream: &RedisServer) -> Proxy {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let to = format!("127.0.0.1:{}", upstream.port);
        let proxy = Proxy {
            port,
            cut: Default::default(),
            tasks: Default::default(),
        };
        let (cut, tasks) = (proxy.cut.clone(), proxy.tasks.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if cut.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let to = to.clone();
                let pipe = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&to).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                tasks.lock().unwrap().push(pipe.abort_handle());
            }
        });
        proxy.tasks.lock().unwrap().push(accept.abort_handle());
        proxy
    }

    /// Closes every connection through the proxy and refuses new ones until [`Proxy::restore`].
    pub(crate) fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut tasks = self.tasks.lock().unwrap();
        // The first task accepts; the others are connections.
        for pipe in tasks.drain(1..) {
            pipe.abort();
        }
    }

    /// Lets new connections through again.
    pub(crate) fn restore(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}
