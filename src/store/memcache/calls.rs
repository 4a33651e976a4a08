//! One server's part of a request: the `incr`/`decr` of its ops in one write, an `add` for each
//! key that does not exist yet, and the `decr` that takes back the hits a limit that sheds
//! refused, all on one pooled connection, behind the server's breaker and within
//! `MEMCACHE_TIMEOUT`.

use super::conn::{Conn, Counted};
use super::{ADD_RACES, MemcacheStore, RELATIVE_EXPIRY_MAX, Server, keys};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::resilience::Permit;
use ratelimitd_core::store::Op;

impl MemcacheStore {
    /// The `add` expiry of a key created at `now` to live `key_ttl_secs` (the window's length, or
    /// what is left of a calendar window) plus jitter, as an absolute time when memcached would
    /// otherwise misread it (above 30 days).
    fn exptime(&self, key_ttl_secs: u64, now: Timestamp) -> u64 {
        let jitter = match self.jitter_max_secs {
            0 => 0,
            max => fastrand::u64(0..max),
        };
        let ttl = key_ttl_secs + jitter;
        if ttl > RELATIVE_EXPIRY_MAX {
            now.as_secs() + ttl
        } else {
            ttl
        }
    }

    /// Runs the ops at `indices` (all on `server`) on one connection: their `incr`/`decr` in
    /// one write, then an `add` for each new key. Returns the count before and after each op;
    /// `None` for an op memcached refused for its key's data (a value that is not a number).
    async fn run(
        &self,
        conn: &mut Conn,
        ops: &[Op],
        indices: &[usize],
        now: Timestamp,
    ) -> std::io::Result<Vec<Option<(u64, u64)>>> {
        let wire: Vec<_> = indices
            .iter()
            .map(|&i| keys::wire_key(&ops[i].key))
            .collect();
        let (incr, decr): (Vec<_>, Vec<_>) =
            (0..indices.len()).partition(|&j| !ops[indices[j]].refund);
        let mut counts = vec![None; indices.len()];
        for (cmd, js) in [("incr", &incr), ("decr", &decr)] {
            if js.is_empty() {
                continue;
            }
            let batch: Vec<_> = js
                .iter()
                .map(|&j| (&*wire[j], ops[indices[j]].hits))
                .collect();
            for (&j, reply) in js.iter().zip(conn.count(cmd, &batch).await?) {
                let hits = ops[indices[j]].hits;
                counts[j] = Some(match (reply, cmd) {
                    (Counted::Refused, _) => {
                        tracing::warn!(key = %wire[j], "memcached refused to count the key (its value is not a number?); answered by the failure mode");
                        continue;
                    }
                    // decr stops at 0: what was there before is at least what came off.
                    (Counted::Value(after), "decr") => (after.saturating_add(hits), after),
                    (Counted::Value(after), _) => (after.saturating_sub(hits), after),
                    // A refund or a check (0 hits) never creates a key.
                    (Counted::NotFound, _) if cmd == "decr" || hits == 0 => (0, 0),
                    (Counted::NotFound, _) => {
                        self.create(conn, &wire[j], &ops[indices[j]], now).await?
                    }
                });
            }
        }
        self.take_back(conn, ops, indices, &wire, &counts).await?;
        Ok(counts)
    }

    /// Takes back, in one `decr` write on the same connection, the hits of every op that counts
    /// only when admitted ([`Op::only_admitted`]: a limit that sheds) and that its `incr` put over
    /// the request's limit: memcached has no conditional increment, so a refused request is
    /// counted and then uncounted. Until the `decr` lands the counter reads too high by the
    /// refused hits in flight, which can only refuse more (never admit more); if it fails, the
    /// server's ops answer as unavailable and those hits stay counted until the window ends
    /// (`docs/stores.md#memcached`).
    async fn take_back(
        &self,
        conn: &mut Conn,
        ops: &[Op],
        indices: &[usize],
        wire: &[std::borrow::Cow<'_, str>],
        counts: &[Option<(u64, u64)>],
    ) -> std::io::Result<()> {
        let batch: Vec<(&str, u64)> = indices
            .iter()
            .zip(counts)
            .zip(wire)
            .filter_map(|((&i, counted), key)| {
                let op = &ops[i];
                let (_, after) = (*counted)?;
                let refused = op.only_admitted && !op.refund && op.hits > 0;
                (refused && after > op.spec.limit).then_some((&**key, op.hits))
            })
            .collect();
        if !batch.is_empty() {
            conn.count("decr", &batch).await?;
        }
        Ok(())
    }

    /// Creates a missing key with `op.hits`, or counts on the key another instance created first.
    async fn create(
        &self,
        conn: &mut Conn,
        key: &str,
        op: &Op,
        now: Timestamp,
    ) -> std::io::Result<(u64, u64)> {
        for _ in 0..ADD_RACES {
            if conn
                .add(
                    key,
                    op.hits,
                    self.exptime(op.spec.window.key_ttl_secs(now), now),
                )
                .await?
            {
                return Ok((0, op.hits));
            }
            if let [Counted::Value(after)] = conn.count("incr", &[(key, op.hits)]).await?[..] {
                return Ok((after.saturating_sub(op.hits), after));
            }
        }
        Err(std::io::Error::other(format!(
            "key {key} was created and evicted {ADD_RACES} times in one request (memcached out of memory?)"
        )))
    }

    /// Calls `server` for the ops at `indices`, behind its breaker and within the timeout.
    pub(super) async fn call(
        &self,
        server: &Server,
        ops: &[Op],
        indices: &[usize],
        now: Timestamp,
    ) -> Result<Vec<Option<(u64, u64)>>, bool> {
        let permit = match &server.breaker {
            Some(b) => b.permit(),
            None => Permit::Call { epoch: 0 },
        };
        if permit == Permit::Rejected {
            return Err(true);
        }
        let attempt = async {
            let mut conn = server.pool.take(self.timeout).await?;
            let counts = self.run(&mut conn, ops, indices, now).await?;
            server.pool.give_back(conn);
            Ok::<_, std::io::Error>(counts)
        };
        let result = match tokio::time::timeout(self.timeout, attempt).await {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {:?}", self.timeout),
            )),
        };
        if let Some(b) = &server.breaker {
            b.record(permit, result.is_ok());
        }
        result.map_err(|e| {
            tracing::warn!(server = server.pool.addr, error = %e, "memcached call failed");
            false
        })
    }
}
