//! One script call for a group of operations (one connection, one hash slot, one algorithm), shared
//! by the algorithm runners: every runner sends the keys of its operations with a fixed number of
//! arguments each, gets back a fixed number of integers per operation, and turns each slice into a
//! decision with its algorithm's `decide`. Also how operations are split into slots.

use redis::{RedisError, Script};

use super::conn::RedisConn;
use crate::algorithm::Decision;
use crate::clock::Timestamp;
use crate::store::Op;

/// The operations of one script call: one algorithm, one connection, one hash slot.
#[derive(Debug, Clone, Copy)]
pub(super) struct Group<'a> {
    /// Where the call goes.
    pub(super) conn: &'a RedisConn,
    /// Every operation of the request.
    pub(super) ops: &'a [Op],
    /// The operations of this group, as indices into `ops`.
    pub(super) indices: &'a [usize],
    /// ARGV[1] of the fixed window script: 0 adds, 1 adds only to keys going over, 2 adds nothing
    /// (another key of the request is already known to be over its limit).
    pub(super) mode: u64,
    /// The time of the request.
    pub(super) now: Timestamp,
}

impl Group<'_> {
    /// The operations of the group, in order.
    pub(super) fn ops(&self) -> impl Iterator<Item = &Op> {
        self.indices.iter().map(|&i| &self.ops[i])
    }

    /// The hits to add for `op`: none in mode 2, where algorithms other than fixed windows only
    /// check (they have no "increment only the keys going over" mode). Refunds are always given
    /// back: they can only make room.
    pub(super) fn hits(&self, op: &Op) -> u64 {
        if self.mode == 2 && !op.refund {
            0
        } else {
            op.hits
        }
    }

    /// Calls `script` with the group's keys and `args`, checks that it returned `width` values per
    /// operation, and decides each operation from its values.
    pub(super) async fn eval(
        &self,
        script: &Script,
        args: &[u64],
        width: usize,
        decide: impl Fn(&Op, &[i64]) -> Decision,
    ) -> Result<Vec<(usize, Decision)>, RedisError> {
        let keys: Vec<&str> = self.ops().map(|op| op.key.as_str()).collect();
        let out = self.conn.eval(script, &keys, args).await?;
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

/// The Redis Cluster hash tag of a key (the text inside the first `{…}`), or the key itself:
/// operations with the same tag live in one slot and can share one script call.
pub(super) fn slot_group(key: &str) -> &str {
    if let Some(open) = key.find('{')
        && let Some(len) = key[open + 1..].find('}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

#[cfg(test)]
mod tests {
    use super::slot_group;

    #[test]
    fn slot_groups_follow_redis_hash_tags() {
        assert_eq!(slot_group("{1:d|1:k=1:v}:fw:60:0"), "1:d|1:k=1:v");
        assert_eq!(slot_group("prefix:{x}:fw"), "x");
        assert_eq!(slot_group("d_k_v_1200"), "d_k_v_1200");
        assert_eq!(slot_group("a{}b"), "a{}b");
    }
}
