//! Operator resets on Redis: forget the keys of a descriptor's limits (`DEL`), or every key under a
//! prefix, found with `SCAN … MATCH` on each target (every master of a Cluster, by address), a
//! bounded number of keys and `SCAN` calls per reset. Every algorithm keeps a limit's whole state
//! in the op's one key (see `lua/`), so deleting the key resets the window, bucket, log or
//! concurrency slots, and a lease's reservation with it; this instance's lease and local
//! over-limit cache entry on the key are dropped too (other instances' leases run out on their
//! own: a lease never outlives its window or TTL).

use std::time::Duration;

use futures_util::future::join_all;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, RedisError, Value};

use super::addr::host_port;
use super::conn::RedisConn;
use super::{PER_SECOND_BELOW_SECS, RedisStore, unavailable};
use crate::store::{Op, PrefixReset, ResetError, StoreError};

/// Keys one `SCAN` call examines (its `COUNT` hint).
const SCAN_COUNT: u64 = 1000;
/// Most `SCAN` calls one prefix reset makes on one target: with [`SCAN_COUNT`], about 200 000
/// keys examined; a larger keyspace answers `more` and the next call goes on.
const MAX_SCANS: usize = 200;
/// Most keys in one `DEL` on a single server or Sentinel primary.
const DEL_CHUNK: usize = 500;

/// `prefix` as a `SCAN MATCH` pattern: its glob characters escaped, then `*`.
pub(super) fn pattern(prefix: &str) -> String {
    let mut p = String::with_capacity(prefix.len() + 8);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('*');
    p
}

impl RedisConn {
    /// Runs `cmd` on the Cluster node `node` (`host:port`), or on the connection when `node` is
    /// `None` (the client routes a one-key command to its slot's master).
    pub(super) async fn query_on(&self, node: Option<&str>, cmd: Cmd) -> Result<Value, RedisError> {
        match (self.resolved(), node) {
            (RedisConn::Cluster(c), Some(node)) => {
                let (host, port) = host_port(node)?;
                let to = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
                c.clone().route_command(cmd, to).await
            }
            (RedisConn::Cluster(c), None) => cmd.query_async(&mut c.clone()).await,
            (RedisConn::Single { conns }, _) => cmd.query_async(&mut conns[0].clone()).await,
            (RedisConn::Sentinel(s), _) => cmd.query_async(&mut s.connection().await?).await,
            (RedisConn::Pending(p), _) => Err(p.not_connected()),
        }
    }

    /// Deletes `keys`: how many existed. One `DEL` per key on a Cluster (keys of several slots
    /// cannot share one), all in flight at once; chunks of [`DEL_CHUNK`] elsewhere.
    async fn delete(&self, keys: &[Vec<u8>]) -> Result<u64, RedisError> {
        let cluster = matches!(self.resolved(), RedisConn::Cluster(_));
        let chunk = if cluster { 1 } else { DEL_CHUNK };
        let calls = keys.chunks(chunk).map(|part| async move {
            let mut cmd = redis::cmd("DEL");
            for k in part {
                cmd.arg(k.as_slice());
            }
            let v = self.query_on(None, cmd).await?;
            Ok::<u64, RedisError>(redis::from_redis_value(v).unwrap_or(0))
        });
        let mut n = 0;
        for r in join_all(calls).await {
            n += r?;
        }
        Ok(n)
    }
}

impl RedisStore {
    /// Every reset is bounded by this: a few response timeouts, at least two seconds.
    fn reset_bound(&self) -> Duration {
        (self.response_timeout * 4).max(Duration::from_secs(2))
    }

    /// [`crate::store::Store::reset`] on Redis: `DEL` of each op's key on its target.
    pub(super) async fn reset_keys(&self, ops: &[Op]) -> Result<u64, StoreError> {
        let mut main = Vec::new();
        let mut per_second = Vec::new();
        for op in ops {
            self.forget_locally(&op.key);
            let short = self.per_second.is_some() && op.spec.window.secs() < PER_SECOND_BELOW_SECS;
            let list = if short { &mut per_second } else { &mut main };
            list.push(op.key.as_bytes().to_vec());
        }
        let calls = [(false, main), (true, per_second)]
            .into_iter()
            .filter(|(_, keys)| !keys.is_empty())
            .map(|(ps, keys)| async move { self.conn(ps).delete(&keys).await });
        let bound = self.reset_bound();
        match tokio::time::timeout(bound, join_all(calls)).await {
            Ok(results) => results.into_iter().try_fold(0, |n, r| {
                r.map(|k| n + k).map_err(|e| unavailable("DEL failed", &e))
            }),
            Err(_) => Err(StoreError::Unavailable(format!(
                "redis did not finish the reset within {bound:?}"
            ))),
        }
    }

    /// Drops what this instance holds for `key`: its over-limit cache entry and its lease.
    fn forget_locally(&self, key: &str) {
        if let Some(cache) = &self.local_cache {
            cache.remove(key);
        }
        self.leases.forget(key);
    }

    /// [`crate::store::Store::reset_prefix`] on Redis: `SCAN` each target (each master of a
    /// Cluster) for keys under `prefix`, at most `max_keys` of them, then `DEL` them.
    pub(super) async fn reset_keys_under(
        &self,
        prefix: &str,
        max_keys: usize,
    ) -> Result<PrefixReset, ResetError> {
        let bound = self.reset_bound();
        let found = tokio::time::timeout(bound, self.scan_all(prefix, max_keys.saturating_add(1)))
            .await
            .map_err(|_| {
                StoreError::Unavailable(format!("redis did not finish the scan within {bound:?}"))
            })??;
        let mut more = found.more;
        let mut reset = 0;
        let mut left = max_keys;
        for (ps, mut keys) in found.keys {
            if keys.len() > left {
                keys.truncate(left);
                more = true;
            }
            left -= keys.len();
            for k in &keys {
                self.forget_locally(&String::from_utf8_lossy(k));
            }
            let deleted = tokio::time::timeout(bound, self.conn(ps).delete(&keys))
                .await
                .map_err(|_| {
                    StoreError::Unavailable(format!("redis did not finish DEL within {bound:?}"))
                })?
                .map_err(|e| unavailable("DEL failed", &e))?;
            reset += deleted;
        }
        self.leases.forget_prefix(prefix);
        Ok(PrefixReset { reset, more })
    }

    /// The keys under `prefix` on every target, at most `want` in all.
    async fn scan_all(&self, prefix: &str, want: usize) -> Result<Found, StoreError> {
        let pattern = pattern(prefix);
        let mut found = Found::default();
        let mut total = 0;
        let targets = if self.per_second.is_some() {
            vec![false, true]
        } else {
            vec![false]
        };
        for ps in targets {
            let conn = self.conn(ps);
            let nodes = self.scan_nodes(ps).await?;
            let mut keys = Vec::new();
            for node in &nodes {
                let (node_keys, node_more) =
                    scan_node(conn, node.as_deref(), &pattern, want - total).await?;
                total += node_keys.len();
                keys.extend(node_keys);
                found.more |= node_more;
                if total >= want {
                    break;
                }
            }
            found.keys.push((ps, keys));
            if total >= want {
                break;
            }
        }
        Ok(found)
    }

    /// The nodes to scan on a target: every master of a Cluster (the slot map read again
    /// first), else the connection itself (`None`).
    async fn scan_nodes(&self, per_second: bool) -> Result<Vec<Option<String>>, StoreError> {
        let conn = self.conn(per_second);
        let slots = &self.slots[usize::from(per_second)];
        let Some(reply) = conn
            .cluster_slots(&slots.masters(), self.reset_bound())
            .await
        else {
            return Ok(vec![None]);
        };
        reply
            .map_err(|e| e.to_string())
            .and_then(|r| slots.update(&r))
            .map_err(|e| StoreError::Unavailable(format!("redis CLUSTER SLOTS failed: {e}")))?;
        let masters = slots.masters();
        if masters.is_empty() {
            return Err(StoreError::Unavailable(
                "the Redis Cluster names no master".into(),
            ));
        }
        Ok(masters.into_iter().map(|m| Some(m.to_string())).collect())
    }
}

/// What the scans found: the keys per target (per-second or main), and whether a scan stopped
/// at its budget before the end.
#[derive(Default)]
struct Found {
    keys: Vec<(bool, Vec<Vec<u8>>)>,
    more: bool,
}

/// `SCAN` on one node for keys matching `pattern`, until `want` are found, the cursor is back
/// at 0, or [`MAX_SCANS`] calls were made; the keys and whether the scan stopped early.
async fn scan_node(
    conn: &RedisConn,
    node: Option<&str>,
    pattern: &str,
    want: usize,
) -> Result<(Vec<Vec<u8>>, bool), StoreError> {
    let mut keys = Vec::new();
    let mut cursor = 0u64;
    for _ in 0..MAX_SCANS {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        let reply = conn
            .query_on(node, cmd)
            .await
            .map_err(|e| unavailable("SCAN failed", &e))?;
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::from_redis_value(reply)
            .map_err(|e| StoreError::Unavailable(format!("redis SCAN answered {e}")))?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 || keys.len() >= want {
            return Ok((keys, cursor != 0));
        }
    }
    Ok((keys, true))
}

#[cfg(test)]
mod tests {
    #[test]
    fn glob_characters_of_a_prefix_match_only_themselves() {
        assert_eq!(super::pattern("{3:api|4:user="), "{3:api|4:user=*");
        assert_eq!(super::pattern("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\*");
    }
}
