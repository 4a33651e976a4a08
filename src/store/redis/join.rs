//! Joining the script calls of concurrent requests into one. A request's ops of one algorithm go
//! to Redis as one script call; requests that reach the store within one pass of a runtime
//! thread's scheduler, for the same script on the same single or Sentinel-managed Redis, are sent
//! as one `EVALSHA` of the algorithm's joined script (`lua/join.lua`), which runs each request's
//! ops through the algorithm's own script, request after request. The script runs atomically, so
//! the counters end exactly as with one call per request, in the order the requests joined.
//!
//! The first request to open a batch spawns its sender, which yields once (tokio runs it again
//! after the tasks already runnable on that thread, and so after the requests that arrived with
//! it), closes the batch and sends it; each request then awaits its own reply under its own
//! `REDIS_RESPONSE_TIMEOUT`, breaker and failure mode, as before. The call belongs to no
//! request's future, so a request that is cancelled or times out cannot take the others' replies
//! with it; a request gone before its batch is sent is left out of it. What the joined call
//! shares is its fate: when it fails (no connection, no reply in time, the deadline passed, Redis
//! unable to work), every request in it fails and answers by its own limits' failure modes; Redis
//! refusing one request's data fails that request alone (`pcall` in `lua/join.lua`). The call's
//! deadline is the earliest of its requests' (`call.rs`). A batch holds at most [`MAX_OPS`] ops
//! and about [`MAX_BYTES`] of keys and numbers; a full one is sent as it is and the next request
//! opens another.
//!
//! Not joined: Redis Cluster (a script's keys must share a hash slot; each request keeps its own
//! call per slot), requests under `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` whose fixed windows
//! decide together which of them to increment, token lease reservations, concurrency slots, and a
//! connection not made yet.

use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

use parking_lot::Mutex;
use redis::{Cmd, RedisError, Script, Value};
use tokio::sync::oneshot;

use super::conn::{RedisConn, ScriptConn};
use ratelimitd_core::stripe;

/// The most ops one joined call carries.
pub(super) const MAX_OPS: usize = 128;
/// About the most bytes of keys and numbers one joined call carries.
pub(super) const MAX_BYTES: usize = 64 * 1024;

/// The joined script of an algorithm whose script text is `body`: the deadline check, the body as
/// a function of its own KEYS and ARGV, and the loop over the requests (`lua/join.lua`).
pub(super) fn script(body: &str) -> Script {
    Script::new(&format!(
        "{}local function body(KEYS, ARGV)\n{body}\nend\n{}",
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/join.lua")
    ))
}

/// A joined script made once, on first use.
pub(super) type Joined = LazyLock<Script>;

/// What the requests of one joined call share: where it goes, the script and its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct JoinKey {
    per_second: bool,
    /// The joined script, by address (each is a `static`).
    script: usize,
    /// The algorithm's header argument, the same for every request of the call.
    header: Option<u64>,
}

/// One request's part of a joined call.
struct Member {
    keys: Vec<String>,
    /// The ops' arguments (without the header and the deadline).
    args: Vec<u64>,
    /// The request's deadline ([`super::call::Deadlines::next`]).
    deadline: u64,
    reply: oneshot::Sender<Result<Vec<i64>, RedisError>>,
}

/// The requests of one joined call, until it is sent.
#[derive(Default)]
struct Batch {
    members: Vec<Member>,
    ops: usize,
    bytes: usize,
}

/// A batch still open to requests.
struct Open {
    key: JoinKey,
    batch: Arc<Mutex<Batch>>,
}

/// The open batches of each runtime thread ([`stripe::mine`]).
pub(super) struct Joiner {
    stripes: Arc<[Mutex<Vec<Open>>]>,
    /// `REDIS_RESPONSE_TIMEOUT`: the longest a joined call is awaited.
    timeout: Duration,
}

impl std::fmt::Debug for Joiner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Joiner").finish_non_exhaustive()
    }
}

/// One request's call, as [`Joiner::submit`] takes it.
pub(super) struct Call<'a> {
    /// The main (false) or per-second (true) Redis.
    pub(super) per_second: bool,
    /// Where a new batch is sent.
    pub(super) conn: &'a RedisConn,
    /// The algorithm's joined script.
    pub(super) script: &'static Script,
    /// The header argument (at most one).
    pub(super) header: Option<u64>,
    /// The ops' keys.
    pub(super) keys: Vec<String>,
    /// The ops' arguments, `stride` per op.
    pub(super) args: &'a [u64],
    /// The number of arguments of each op.
    pub(super) stride: usize,
    /// The call's deadline.
    pub(super) deadline: u64,
}

/// The reply a request awaits: its own part of the joined call's reply.
pub(super) type Reply = oneshot::Receiver<Result<Vec<i64>, RedisError>>;

impl Joiner {
    /// Batches for calls bounded by `timeout`.
    pub(super) fn new(timeout: Duration) -> Joiner {
        Joiner {
            stripes: (0..stripe::count()).map(|_| Mutex::default()).collect(),
            timeout,
        }
    }

    /// Adds `call` to the open batch of its kind on this thread, or opens one and spawns its
    /// sender; `None` when no batch can be opened (the connection cannot join calls).
    pub(super) fn submit(&self, call: Call<'_>) -> Option<Reply> {
        let key = JoinKey {
            per_second: call.per_second,
            script: std::ptr::from_ref(call.script) as usize,
            header: call.header,
        };
        let keys = call.keys;
        let bytes = keys.iter().map(|k| k.len() + 8).sum::<usize>() + 12 * call.args.len();
        let ops = keys.len();
        let (tx, rx) = oneshot::channel();
        let member = Member {
            keys,
            args: call.args.to_vec(),
            deadline: call.deadline,
            reply: tx,
        };
        let at = stripe::mine();
        let mut open = self.stripes[at].lock();
        if let Some(i) = open.iter().position(|o| o.key == key) {
            let full = open[i].batch.lock().add(member, ops, bytes);
            if full {
                open.swap_remove(i);
            }
            return Some(rx);
        }
        let conn = call.conn.script_conn()?;
        let mut batch = Batch::default();
        let full = batch.add(member, ops, bytes);
        let batch = Arc::new(Mutex::new(batch));
        if !full {
            open.push(Open {
                key,
                batch: batch.clone(),
            });
        }
        drop(open);
        let sender = Sender {
            stripes: self.stripes.clone(),
            at,
            batch,
            conn,
            script: call.script,
            header: call.header,
            stride: call.stride,
            timeout: self.timeout,
        };
        tokio::spawn(sender.run());
        Some(rx)
    }
}

impl Batch {
    /// Adds `member` (`ops` ops, about `bytes` bytes); true when the batch is now full.
    fn add(&mut self, member: Member, ops: usize, bytes: usize) -> bool {
        self.members.push(member);
        self.ops += ops;
        self.bytes += bytes;
        self.ops >= MAX_OPS || self.bytes >= MAX_BYTES
    }
}

/// The sender of one batch.
struct Sender {
    stripes: Arc<[Mutex<Vec<Open>>]>,
    at: usize,
    batch: Arc<Mutex<Batch>>,
    conn: ScriptConn,
    script: &'static Script,
    header: Option<u64>,
    stride: usize,
    timeout: Duration,
}

impl Sender {
    /// Waits for the requests runnable with the first one, then sends the batch and hands each
    /// request its reply.
    async fn run(self) {
        tokio::task::yield_now().await;
        self.stripes[self.at]
            .lock()
            .retain(|o| !Arc::ptr_eq(&o.batch, &self.batch));
        let mut members = std::mem::take(&mut self.batch.lock().members);
        // A request that gave up (timed out, cancelled) is not applied.
        members.retain(|m| !m.reply.is_closed());
        if members.is_empty() {
            return;
        }
        let cmd = self.command(&members);
        let replied =
            match tokio::time::timeout(self.timeout, self.conn.run(self.script, &cmd)).await {
                Ok(r) => r,
                Err(_) => Err(RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no reply to the joined script call in time",
                ))),
            };
        match replied.and_then(|v| split(v, members.len())) {
            Ok(replies) => {
                for (m, r) in members.into_iter().zip(replies) {
                    let _ = m.reply.send(r);
                }
            }
            Err(e) => {
                for m in members {
                    let _ = m.reply.send(Err(e.clone()));
                }
            }
        }
    }

    /// The `EVALSHA` of `members` (`lua/join.lua`'s arguments), built directly into one command.
    fn command(&self, members: &[Member]) -> Cmd {
        let keys: usize = members.iter().map(|m| m.keys.len()).sum();
        let args: usize = members.iter().map(|m| m.args.len()).sum();
        let bytes: usize = members.iter().flat_map(|m| &m.keys).map(String::len).sum();
        let mut cmd = Cmd::with_capacity(8 + keys + members.len() + args, 64 + bytes + 8 * args);
        cmd.arg("EVALSHA").arg(self.script.get_hash()).arg(keys);
        for k in members.iter().flat_map(|m| &m.keys) {
            cmd.arg(k.as_str());
        }
        cmd.arg(members.len())
            .arg(usize::from(self.header.is_some()))
            .arg(self.stride);
        for m in members {
            cmd.arg(m.keys.len());
        }
        if let Some(h) = self.header {
            cmd.arg(h);
        }
        for m in members {
            cmd.arg(m.args.as_slice());
        }
        // The earliest deadline of the requests (0: none known).
        let deadline = members
            .iter()
            .map(|m| m.deadline)
            .filter(|d| *d > 0)
            .min()
            .unwrap_or(0);
        cmd.arg(deadline);
        cmd
    }
}

/// The joined call's reply, one part per request: its numbers, or the error Redis raised for it.
fn split(reply: Value, members: usize) -> Result<Vec<Result<Vec<i64>, RedisError>>, RedisError> {
    let wrong = |what: String| {
        RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "joined script call returned the wrong shape",
            what,
        ))
    };
    let Value::Array(parts) = reply else {
        return Err(wrong(format!("{reply:?}")));
    };
    if parts.len() != members {
        return Err(wrong(format!(
            "{} parts for {members} requests",
            parts.len()
        )));
    }
    Ok(parts
        .into_iter()
        .map(|part| match part {
            Value::ServerError(e) => Err(e.into()),
            part => redis::from_redis_value::<Vec<i64>>(part).map_err(RedisError::from),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::split;
    use redis::Value;

    #[test]
    fn a_joined_reply_splits_into_each_requests_own_reply_or_error() {
        let reply = redis::parse_redis_value(
            b"*2\r\n*2\r\n:5\r\n:1\r\n-WRONGTYPE no (script of a joined call)\r\n",
        )
        .unwrap();
        let parts = split(reply, 2).unwrap();
        assert_eq!(parts[0].as_ref().unwrap(), &vec![5, 1]);
        let e = parts[1].as_ref().unwrap_err();
        assert_eq!(e.code(), Some("WRONGTYPE"));
        assert!(super::super::call::refused_for_its_data(e));
        assert!(split(Value::Array(vec![]), 1).is_err(), "a part missing");
        assert!(split(Value::Int(3), 1).is_err(), "not an array");
    }
}
