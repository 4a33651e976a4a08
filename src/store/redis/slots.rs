//! Which Redis Cluster master holds each key, so every master can have its own circuit breaker:
//! a lost master then fails only the ops of its slots. The client routes the calls itself (and
//! follows MOVED); this map only says which breaker a call belongs to. It is read with
//! `CLUSTER SLOTS` at connect and again once a second with the health check, off the request
//! path; a key whose slot is not in the map yet belongs to the target as a whole (`main`). Also
//! the two Cluster-only calls behind it: `CLUSTER SLOTS`, and a PING to one master by address.

use std::time::Duration;

use arc_swap::ArcSwap;
use ratelimitd_core::limiter::split::{SLOTS, key_slot};
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{RedisError, Value};

use super::addr::host_port;
use super::conn::RedisConn;
use super::targets::intern;

/// Slot ranges and their masters' `host:port`, sorted by first slot.
#[derive(Debug, Default)]
pub(super) struct SlotMap {
    ranges: ArcSwap<Vec<(u16, u16, &'static str)>>,
}

impl SlotMap {
    /// The master holding `key`, when the map knows its slot.
    pub(super) fn master(&self, key: &str) -> Option<&'static str> {
        let slot = key_slot(key);
        let ranges = self.ranges.load();
        let i = ranges.partition_point(|r| r.0 <= slot);
        let (start, end, addr) = *ranges.get(i.checked_sub(1)?)?;
        (start..=end).contains(&slot).then_some(addr)
    }

    /// Every master the map names (each once).
    pub(super) fn masters(&self) -> Vec<&'static str> {
        let mut all: Vec<&'static str> = self.ranges.load().iter().map(|r| r.2).collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Replaces the map with a `CLUSTER SLOTS` reply; a reply it cannot read leaves the map as
    /// it was (the calls still work, only the breakers are coarser) and says why.
    pub(super) fn update(&self, reply: &Value) -> Result<(), String> {
        let mut ranges = parse(reply)?;
        ranges.sort_unstable();
        self.ranges.store(ranges.into());
        Ok(())
    }
}

/// `[[start, end, [host, port, id, ...], replicas...], ...]` into `(start, end, "host:port")`.
fn parse(reply: &Value) -> Result<Vec<(u16, u16, &'static str)>, String> {
    let Value::Array(entries) = reply else {
        return Err(format!("CLUSTER SLOTS: expected an array, got {reply:?}"));
    };
    let num = |v: &Value| match v {
        Value::Int(n) => u16::try_from(*n).ok().filter(|n| *n < SLOTS),
        _ => None,
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    entries
        .iter()
        .map(|e| {
            let bad = || format!("CLUSTER SLOTS: unreadable entry {e:?}");
            let Value::Array(parts) = e else {
                return Err(bad());
            };
            let (Some(start), Some(end), Some(Value::Array(node))) = (
                parts.first().and_then(num),
                parts.get(1).and_then(num),
                parts.get(2),
            ) else {
                return Err(bad());
            };
            let host = node.first().and_then(text).ok_or_else(bad)?;
            let Some(Value::Int(port)) = node.get(1) else {
                return Err(bad());
            };
            Ok((start, end, intern(format!("{host}:{port}"))))
        })
        .collect()
}

/// The error of a call that did not answer within its bound.
fn timed_out(what: &'static str) -> RedisError {
    RedisError::from((redis::ErrorKind::Io, "no answer in time", what.to_string()))
}

impl RedisConn {
    /// `CLUSTER SLOTS` on a Cluster; `None` for the other kinds. Asked of every node in `nodes`
    /// at once (the masters last known), each within `bound`, and the first answer is taken: a
    /// random node could be the lost master, which would keep the map from ever moving on to
    /// its promoted replica. With no known node, any node is asked.
    pub(super) async fn cluster_slots(
        &self,
        nodes: &[&str],
        bound: Duration,
    ) -> Option<Result<redis::Value, RedisError>> {
        let RedisConn::Cluster(c) = self.resolved() else {
            return None;
        };
        let cmd = redis::cmd("CLUSTER").arg("SLOTS").clone();
        if nodes.is_empty() {
            let any = tokio::time::timeout(bound, cmd.query_async(&mut c.clone())).await;
            return Some(any.unwrap_or_else(|_| Err(timed_out("CLUSTER SLOTS"))));
        }
        let asks = nodes.iter().map(|n| {
            let (cmd, mut c) = (cmd.clone(), c.clone());
            Box::pin(async move {
                let (host, port) = host_port(n)?;
                let to = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
                match tokio::time::timeout(bound, c.route_command(cmd, to)).await {
                    Ok(r) => r,
                    Err(_) => Err(timed_out("CLUSTER SLOTS")),
                }
            })
        });
        Some(
            futures_util::future::select_ok(asks)
                .await
                .map(|(reply, _)| reply),
        )
    }

    /// PING to the Cluster node at `addr` (`host:port`), so each master's breaker hears about its
    /// own master; a plain PING for the other kinds.
    pub(super) async fn ping_node(&self, addr: &str) -> Result<(), RedisError> {
        let RedisConn::Cluster(c) = self.resolved() else {
            return self.ping().await;
        };
        let (host, port) = host_port(addr)?;
        let to = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
        c.clone()
            .route_command(redis::cmd("PING"), to)
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use redis::Value;

    use super::{SlotMap, key_slot};

    #[test]
    fn slots_match_redis_cluster_keyslot() {
        // Values from `CLUSTER KEYSLOT` on a real server.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("123456789"), 12739);
    }

    #[test]
    fn a_key_belongs_to_the_master_of_its_slot_range() {
        let node = |port| Value::Array(vec![Value::BulkString(b"127.0.0.1".to_vec()), port]);
        let range = |a, b, port| Value::Array(vec![Value::Int(a), Value::Int(b), node(port)]);
        let map = SlotMap::default();
        assert_eq!(map.master("foo"), None);
        let reply = Value::Array(vec![
            range(5461, 10922, Value::Int(7001)),
            range(0, 5460, Value::Int(7000)),
            range(10923, 16383, Value::Int(7002)),
        ]);
        map.update(&reply).unwrap();
        assert_eq!(map.master("foo"), Some("127.0.0.1:7002"));
        assert_eq!(map.master("123456789"), Some("127.0.0.1:7002"));
        assert_eq!(map.masters().len(), 3);
        let bad = Value::Array(vec![range(0, 5460, Value::Nil)]);
        assert!(map.update(&bad).unwrap_err().contains("unreadable entry"));
        assert_eq!(map.master("foo"), Some("127.0.0.1:7002"), "kept");
    }
}
