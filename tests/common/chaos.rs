//! Fault injection for the chaos tests: pausing a real redis-server (SIGSTOP) under a guard that
//! always resumes it, timing calls, and reading which source decided a response.

use std::process::Command;
use std::time::Duration;

use ratelimitd::clock::Stopwatch;
use ratelimitd::grpc::pb::envoy::service::ratelimit::v3::RateLimitResponse;

use super::TestServer;
use super::redis::RedisServer;

/// A redis-server stopped with SIGSTOP; resumed (SIGCONT) on [`Paused::resume`] or on drop, so a
/// failing test never leaves a stopped Redis behind.
pub struct Paused {
    pid: Option<String>,
}

/// The redis-server's own pid (the test starts it under a shell guard).
pub fn redis_pid(r: &RedisServer) -> String {
    let info = r.cli(&["INFO", "server"]);
    info.lines()
        .find_map(|l| l.trim().strip_prefix("process_id:"))
        .expect("INFO server names the pid")
        .to_string()
}

fn signal(sig: &str, pid: &str) {
    let ok = Command::new("kill").args([sig, pid]).status().unwrap();
    assert!(ok.success(), "kill {sig} {pid}");
}

impl Paused {
    /// Stops `r` (it keeps its connections open and answers nothing).
    pub fn stop(r: &RedisServer) -> Paused {
        let pid = redis_pid(r);
        signal("-STOP", &pid);
        Paused { pid: Some(pid) }
    }

    /// Lets it run again.
    pub fn resume(mut self) {
        if let Some(pid) = self.pid.take() {
            signal("-CONT", &pid);
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
pub fn source(r: &RateLimitResponse) -> String {
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
pub async fn timed(
    s: &TestServer,
    domain: &str,
    entry: (&str, &str),
) -> (Duration, Result<RateLimitResponse, tonic::Status>) {
    let watch = Stopwatch::start();
    let r = s.call(super::request(domain, &[&[entry]])).await;
    (watch.elapsed(), r)
}

/// p50, p99 and max of `times`, for the report lines the README quotes.
pub fn summary(times: &[Duration]) -> (Duration, Duration, Duration) {
    let mut t = times.to_vec();
    t.sort();
    if t.is_empty() {
        return Default::default();
    }
    let at = |q: f64| t[((t.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), t[t.len() - 1])
}

/// Prints one measurement line (`cargo test --test chaos_breaker -- --nocapture` shows them).
pub fn report(fault: &str, phase: &str, times: &[Duration]) {
    let (p50, p99, max) = summary(times);
    eprintln!(
        "chaos {fault:<10} {phase:<14} n={:<4} p50={p50:>10.3?} p99={p99:>10.3?} max={max:>10.3?}",
        times.len()
    );
}
