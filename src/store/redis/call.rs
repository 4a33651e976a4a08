//! One script call for a group of operations (one connection, one hash slot, one algorithm), shared
//! by the algorithm runners: every runner sends the keys of its operations with a fixed number of
//! arguments each, gets back a fixed number of integers per operation, and turns each slice into a
//! decision with its algorithm's `decide`; the algorithm scripts' calls of concurrent requests
//! are joined into one where they can be (`join.rs`). Also how operations are split into slots,
//! and each call's deadline (a joined call carries the earliest of its requests').
//!
//! The deadline: a call that times out is answered by the limit's failure policy, yet it may still
//! sit in Redis's input buffer (a hung Redis reads it when it resumes) and would be counted then,
//! long after the service reported it failed. So every call carries, as its last argument, the
//! time on Redis's clock after which it must not write (`lua/deadline.lua` checks it with `TIME`
//! first): half of `REDIS_RESPONSE_TIMEOUT` from now, minus the clock offset's error bound, so a
//! script that starts before the deadline still answers before the caller gives up even when Redis
//! works through a backlog (it writes replies after a whole batch of commands) and this host is
//! slow to read them (measured with a fifth as the margin: 88 of 25 000 calls after an 8 s hang
//! under 64 clients on a loaded 2-core machine were applied late; with half, none). Redis's
//! clock is this host's clock shifted by the offset measured once a second against the main
//! Redis's `TIME` (by the app, off the request path); before the first measurement calls carry no
//! deadline. The per-second Redis and Cluster masters are assumed to keep the same time as the
//! main Redis (NTP); a clock ahead by more than the margin refuses late-starting calls early, one
//! behind lets them through late.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{RedisError, Script};

use super::conn::RedisConn;
use super::join::{self, Joined, Joiner};
use ratelimitd_core::algorithm::{Algorithm, Decision};
use ratelimitd_core::clock::{Clock, OffsetClock, SystemClock, Timestamp};
use ratelimitd_core::store::Op;

/// Gives each script call its deadline on Redis's clock (see the module doc).
#[derive(Debug)]
pub(super) struct Deadlines {
    /// This host's wall clock shifted to the main Redis's `TIME`: the deadline bounds real time,
    /// so it is never the injected (possibly manual) clock of decisions.
    redis_clock: Arc<OffsetClock>,
    /// `REDIS_RESPONSE_TIMEOUT`.
    timeout: Duration,
}

impl Deadlines {
    /// Deadlines for calls bounded by `timeout`; none until the clock is first measured.
    pub(super) fn new(timeout: Duration) -> Deadlines {
        Deadlines {
            redis_clock: Arc::new(OffsetClock::new(Arc::new(SystemClock))),
            timeout,
        }
    }

    /// The clock to keep in sync with the main Redis's `TIME`.
    pub(super) fn redis_clock(&self) -> Arc<OffsetClock> {
        self.redis_clock.clone()
    }

    /// The deadline of a call sent now, in microseconds on Redis's clock; 0 (none) before the
    /// offset is known. Never less than a quarter of the timeout away, so one slow measurement (a
    /// large error bound) shortens calls but cannot refuse them all.
    pub(super) fn next(&self) -> u64 {
        let Some(uncertainty) = self.redis_clock.uncertainty() else {
            return 0;
        };
        let budget = (self.timeout / 2)
            .saturating_sub(uncertainty)
            .max(self.timeout / 4);
        self.redis_clock.now().saturating_add(budget).as_micros()
    }
}

/// Which of a request's hits Redis adds (`STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`). Refunds are
/// given back whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Increment {
    /// Every op adds its hits (the default).
    Every,
    /// If any fixed window would go over its limit, only those windows are incremented (the
    /// setting is on).
    OnlyOver,
    /// Nothing is added: another key of the request is already known to be over its limit (the
    /// setting is on and the local cache answered one of the request's ops).
    Nothing,
}

impl Increment {
    /// The increment of a request under the stop-increment setting `stop_when_over`, when
    /// `cached_over` says whether the local cache already found one of its keys over.
    pub(super) fn of(stop_when_over: bool, cached_over: bool) -> Increment {
        match (stop_when_over, cached_over) {
            (true, true) => Increment::Nothing,
            (true, false) => Increment::OnlyOver,
            (false, _) => Increment::Every,
        }
    }

    /// ARGV[1] of `lua/fixed_window.lua`.
    pub(super) fn argument(self) -> u64 {
        match self {
            Increment::Every => 0,
            Increment::OnlyOver => 1,
            Increment::Nothing => 2,
        }
    }
}

/// Which script the ops of one call run: their algorithm's, or for `leased` ops the reservation
/// script of token leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScriptKind {
    /// The ops' algorithm.
    pub(super) algorithm: Algorithm,
    /// True when the ops reserve a token lease ([`ratelimitd_core::store::lease::Serve::Reserve`]).
    pub(super) leased: bool,
}

/// The operations of one script call: one algorithm, one connection, one hash slot.
#[derive(Debug, Clone, Copy)]
pub(super) struct Group<'a> {
    /// Where the call goes.
    pub(super) conn: &'a RedisConn,
    /// Every operation of the request.
    pub(super) ops: &'a [Op],
    /// The operations of this group, as indices into `ops`.
    pub(super) indices: &'a [usize],
    /// Which of the request's hits are added.
    pub(super) increment: Increment,
    /// The time of the request.
    pub(super) now: Timestamp,
    /// The call's deadline ([`Deadlines::next`]), sent as the script's last argument.
    pub(super) deadline: u64,
    /// Where calls of concurrent requests are joined (`join.rs`); `None` where they cannot be.
    pub(super) join: Option<&'a Joiner>,
    /// True when the call goes to the per-second Redis.
    pub(super) per_second: bool,
}

impl Group<'_> {
    /// The operations of the group, in order.
    pub(super) fn ops(&self) -> impl Iterator<Item = &Op> {
        self.indices.iter().map(|&i| &self.ops[i])
    }

    /// The hits to add for `op`: none with [`Increment::Nothing`], where algorithms other than
    /// fixed windows only check (they have no "increment only the keys going over" mode). Refunds
    /// are always given back: they can only make room; reports always count: they are facts.
    pub(super) fn hits(&self, op: &Op) -> u64 {
        if self.increment == Increment::Nothing && !op.refund && !op.report {
            0
        } else {
            op.hits
        }
    }

    /// Calls `script` with the group's keys, `args` and the deadline, checks that it returned
    /// `width` values per operation, and decides each operation from its values. A call refused
    /// for its deadline fails like one that timed out (it did, on the caller's side).
    pub(super) async fn eval(
        &self,
        script: &Script,
        args: &[u64],
        width: usize,
        decide: impl Fn(&Op, &[i64]) -> Decision,
    ) -> Result<Vec<(usize, Decision)>, RedisError> {
        let args = [args, &[self.deadline]].concat();
        self.eval_args(script, &args, width, decide).await
    }

    /// [`Group::eval`] for a script that also takes text (`args` then the deadline, as strings).
    pub(super) async fn eval_text(
        &self,
        script: &Script,
        mut args: Vec<String>,
        width: usize,
        decide: impl Fn(&Op, &[i64]) -> Decision,
    ) -> Result<Vec<(usize, Decision)>, RedisError> {
        args.push(self.deadline.to_string());
        self.eval_args(script, &args, width, decide).await
    }

    /// [`Group::eval`], joined with the calls of concurrent requests when it can be (`join.rs`):
    /// `joined` is the algorithm's joined script, `args` start with `header` (0 or 1) arguments
    /// the script takes once, then the same number for every op. Calls whose fixed windows
    /// decide together which of them to increment (`Increment::OnlyOver`) stay on their own.
    pub(super) async fn eval_joined(
        &self,
        script: &Script,
        joined: &'static Joined,
        header: usize,
        args: &[u64],
        width: usize,
        decide: impl Fn(&Op, &[i64]) -> Decision,
    ) -> Result<Vec<(usize, Decision)>, RedisError> {
        if let Some(joiner) = self.join
            && self.increment != Increment::OnlyOver
            && header <= 1
            && !self.indices.is_empty()
        {
            let call = join::Call {
                per_second: self.per_second,
                conn: self.conn,
                script: LazyLock::force(joined),
                header: args[..header].first().copied(),
                keys: self.ops().map(|op| op.key.clone()).collect(),
                args: &args[header..],
                stride: (args.len() - header) / self.indices.len(),
                deadline: self.deadline,
            };
            if let Some(reply) = joiner.submit(call) {
                let out = match reply.await {
                    Ok(out) => out?,
                    Err(_) => return Err(join_dropped()),
                };
                return self.decide_all(&out, width, decide);
            }
        }
        self.eval(script, args, width, decide).await
    }

    /// Runs the call for [`Group::eval`] and [`Group::eval_text`] (whose args end with the
    /// deadline).
    async fn eval_args<A: redis::ToRedisArgs + Sync>(
        &self,
        script: &Script,
        args: &[A],
        width: usize,
        decide: impl Fn(&Op, &[i64]) -> Decision,
    ) -> Result<Vec<(usize, Decision)>, RedisError> {
        let keys: Vec<&str> = self.ops().map(|op| op.key.as_str()).collect();
        let out = self.conn.eval(script, &keys, args).await?;
        self.decide_all(&out, width, decide)
    }

    /// Checks that a call returned `width` values per operation, and decides each operation from
    /// its values.
    fn decide_all(
        &self,
        out: &[i64],
        width: usize,
        decide: impl Fn(&Op, &[i64]) -> Decision,
    ) -> Result<Vec<(usize, Decision)>, RedisError> {
        if out.len() != width * self.indices.len() {
            // A script of another version (or a proxy mangling replies): refuse rather than guess.
            return Err(RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "script returned the wrong number of values",
                format!("{} for {} operations", out.len(), self.indices.len()),
            )));
        }
        Ok(self
            .indices
            .iter()
            .zip(out.chunks(width))
            .map(|(&i, values)| (i, decide(&self.ops[i], values)))
            .collect())
    }
}

/// The error of a request whose joined call was dropped unanswered (the runtime shutting down).
fn join_dropped() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        "the joined script call ended without a reply",
    ))
}

/// Error codes that mean Redis cannot do the work now, whatever the call's data: out of memory,
/// a replica or a failing disk refusing writes, a script or a load keeping it busy, a cluster or a
/// master down, no permission; and this service's own deadline refusal (`lua/deadline.lua`: the
/// call reached Redis after its caller had given up, i.e. it timed out). Redis 7 keeps a command's
/// code when it fails inside a script; older versions wrap it in `ERR Error running script`, so
/// the codes are looked for in the text too.
const REDIS_UNABLE: [&str; 12] = [
    "OOM",
    "READONLY",
    "MISCONF",
    "BUSY",
    "LOADING",
    "MASTERDOWN",
    "NOREPLICAS",
    "CLUSTERDOWN",
    "TRYAGAIN",
    "NOPERM",
    "NOAUTH",
    "ratelimitd:",
];

/// Whether Redis refused a script call for its data: an `ERR` or `WRONGTYPE` reply from inside the
/// script (a counter holding a string that is not a number or a hash, `INCRBY` past 2^63) that
/// names none of the [`REDIS_UNABLE`] codes. Redis answered, and would answer the next call with
/// other keys: this is the calling request's error, never a failure of Redis (for the breaker or
/// for health). Everything else — no connection, no reply in time, an error reply about Redis
/// itself, a reply of the wrong shape — is.
pub(super) fn refused_for_its_data(e: &RedisError) -> bool {
    let code = e.code().unwrap_or_default();
    let detail = e.detail().unwrap_or_default();
    matches!(code, "ERR" | "WRONGTYPE")
        && detail.contains("script")
        && !REDIS_UNABLE.iter().any(|c| detail.contains(c))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::{Deadlines, refused_for_its_data};
    use ratelimitd_core::clock::{ManualClock, OffsetClock, Timestamp};

    #[test]
    fn deadlines_leave_a_margin_on_the_redis_clock_and_wait_for_a_measurement() {
        let base = Arc::new(ManualClock::new(Timestamp::from_secs(1_000)));
        let d = Deadlines {
            redis_clock: Arc::new(OffsetClock::new(base.clone())),
            timeout: Duration::from_millis(100),
        };
        assert_eq!(d.next(), 0, "no deadline before the clock is measured");
        // Redis is 5 s ahead; the reading took 2 ms (an error bound of 1 ms).
        let after = Timestamp::from_micros(1_000_002_000);
        d.redis_clock.sync(
            Timestamp::from_micros(1_005_001_000),
            Timestamp::from_secs(1_000),
            after,
        );
        base.set(after);
        // Redis now reads 1005.002 s; half of 100 ms minus the 1 ms error bound: 49 ms.
        assert_eq!(d.next(), 1_005_051_000);
        // A reading that took 300 ms: the call still gets a quarter of its timeout.
        let (before, after) = (
            Timestamp::from_secs(2_000),
            Timestamp::from_micros(2_000_300_000),
        );
        d.redis_clock
            .sync(Timestamp::from_secs(3_000), before, after);
        base.set(after);
        assert_eq!(d.next(), 3_000_150_000 + 25_000);
    }

    /// The error a Redis reply `line` (without its leading `-`) becomes.
    fn reply_error(line: &str) -> redis::RedisError {
        let value = redis::parse_redis_value(format!("-{line}\r\n").as_bytes()).unwrap();
        value.extract_error().unwrap_err()
    }

    #[test]
    fn only_errors_about_a_calls_data_are_not_failures_of_redis() {
        let data = [
            // Redis 7, from `INCRBY` inside the script on a string and on a hash.
            "ERR value is not an integer or out of range script: 5f2a, on @user_script:12.",
            "WRONGTYPE Operation against a key holding the wrong kind of value script: 5f2a, on @user_script:12.",
            // Redis 6 wraps the command's error.
            "ERR Error running script (call to f_5f2a): @user_script:12: @user_script: 12: -WRONGTYPE Operation against a key holding the wrong kind of value",
            "ERR increment or decrement would overflow script: 5f2a, on @user_script:12.",
        ];
        for line in data {
            assert!(refused_for_its_data(&reply_error(line)), "{line}");
        }
        let redis_unable = [
            "ratelimitd: deadline passed",
            "OOM command not allowed when used memory > 'maxmemory'. script: 5f2a, on @user_script:12.",
            "ERR Error running script (call to f_5f2a): @user_script:12: -OOM command not allowed when used memory > 'maxmemory'",
            "READONLY You can't write against a read only replica. script: 5f2a, on @user_script:12.",
            "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
            "LOADING Redis is loading the dataset in memory",
            "NOPERM User has no permissions to run the 'evalsha' command",
            // Not from a script: the command itself is refused (renamed, disabled).
            "ERR unknown command 'EVALSHA', with args beginning with: ",
        ];
        for line in redis_unable {
            assert!(!refused_for_its_data(&reply_error(line)), "{line}");
        }
        let io = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(!refused_for_its_data(&io));
    }
}
