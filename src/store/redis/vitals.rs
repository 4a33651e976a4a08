//! How full and busy each Redis is ([`crate::store::vitals`]): per target — `main`,
//! `per_second`, or each Cluster master by address — a timed `PING`, then one `INFO` whose
//! `memory`, `stats`, `clients` and `keyspace` sections give `used_memory`, `maxmemory`,
//! `evicted_keys`, `connected_clients` and the keys of every database. Two calls per node, all
//! nodes at once, each bounded by the response timeout (at least half a second).

use std::time::Duration;

use futures_util::future::join_all;
use ratelimitd_core::clock::Stopwatch;

use super::RedisStore;
use super::conn::RedisConn;
use super::targets::name;
use crate::store::vitals::NodeVitals;

/// The figures `INFO` gives, by field; the keys summed over every `dbN:keys=…` line.
pub(crate) fn parse_info(info: &str, v: &mut NodeVitals) {
    let mut keys = None::<u64>;
    for line in info.lines() {
        let Some((field, value)) = line.trim_end().split_once(':') else {
            continue;
        };
        let number = || value.parse::<u64>().ok();
        match field {
            "used_memory" => v.used_bytes = number(),
            "maxmemory" => v.max_bytes = number(),
            "evicted_keys" => v.evictions = number(),
            "connected_clients" => v.clients = number(),
            db if db.starts_with("db") && db[2..].bytes().all(|b| b.is_ascii_digit()) => {
                let n = (value.split(','))
                    .find_map(|kv| kv.strip_prefix("keys="))
                    .and_then(|n| n.parse::<u64>().ok());
                keys = Some(keys.unwrap_or(0) + n.unwrap_or(0));
            }
            _ => {}
        }
    }
    // An empty Redis lists no database.
    v.keys = Some(keys.unwrap_or(0));
}

impl RedisStore {
    /// The figures of every Redis node this store calls.
    pub(crate) async fn vitals(&self) -> Vec<NodeVitals> {
        let bound = self.response_timeout.max(Duration::from_millis(500));
        let mut asks = Vec::new();
        let targets = if self.per_second.is_some() {
            vec![false, true]
        } else {
            vec![false]
        };
        for per_second in targets {
            let conn = self.conn(per_second);
            let masters = match conn {
                RedisConn::Cluster(_) => self.slots[usize::from(per_second)].masters(),
                _ => Vec::new(),
            };
            if masters.is_empty() {
                asks.push(node_vitals(conn, None, name(per_second), bound));
            } else {
                for m in masters {
                    asks.push(node_vitals(conn, Some(m), m, bound));
                }
            }
        }
        join_all(asks).await
    }
}

/// `PING` (timed) and `INFO` on one node.
async fn node_vitals(
    conn: &RedisConn,
    node: Option<&str>,
    target: &str,
    bound: Duration,
) -> NodeVitals {
    let mut v = NodeVitals::new("redis", target);
    let watch = Stopwatch::start();
    let ping = tokio::time::timeout(bound, conn.query_on(node, redis::cmd("PING"))).await;
    if !matches!(ping, Ok(Ok(_))) {
        return v;
    }
    v.round_trip = Some(watch.elapsed());
    let info = tokio::time::timeout(bound, conn.query_on(node, redis::cmd("INFO"))).await;
    let text = match info {
        Ok(Ok(reply)) => redis::from_redis_value::<String>(reply).ok(),
        _ => None,
    };
    if let Some(text) = text {
        parse_info(&text, &mut v);
        v.up = true;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_and_every_database_s_keys_are_read() {
        let info = "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:2097152\r\n\
                    # Stats\r\nevicted_keys:7\r\n# Clients\r\nconnected_clients:3\r\n\
                    # Keyspace\r\ndb0:keys=10,expires=9,avg_ttl=0\r\ndb3:keys=5,expires=0,avg_ttl=0\r\n";
        let mut v = NodeVitals::new("redis", "main");
        parse_info(info, &mut v);
        assert_eq!(
            (v.used_bytes, v.max_bytes, v.evictions, v.clients, v.keys),
            (Some(1_048_576), Some(2_097_152), Some(7), Some(3), Some(15))
        );
        let mut empty = NodeVitals::new("redis", "main");
        parse_info("# Keyspace\r\n", &mut empty);
        assert_eq!(empty.keys, Some(0));
    }
}
