//! Grouping a request's ops into script calls ([`GroupKey`]), and awaiting the calls. A request holds a handful
//! of descriptors (`MAX_DESCRIPTORS_PER_REQUEST` bounds them), and one descriptor, so one call, is
//! the usual case: a linear scan over the few groups costs less than hashing into a map built for
//! each request, and one call is awaited as it is, without `join_all`'s allocation.

use std::future::Future;

use futures_util::FutureExt;
use futures_util::future::{Either, join_all};
use smallvec::{Array, SmallVec};

use super::call::ScriptKind;
use super::conn::RedisConn;
use super::targets::{self, Indices, Target, TargetGroups};
use super::{PER_SECOND_BELOW_SECS, RedisStore};
use ratelimitd_core::limiter::split::hash_tag;
use ratelimitd_core::store::Op;

/// A request's script calls per target: the main Redis, the per-second one, or each Cluster
/// master its keys live on.
pub(super) type PerTarget = SmallVec<[(Target, TargetGroups); 2]>;

/// What the ops of one script call share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GroupKey<'k> {
    /// Where the call goes.
    pub(super) target: Target,
    /// On Cluster, the hash slot group of the ops' keys ([`hash_tag`]): a script call's keys
    /// must share a slot. Empty elsewhere.
    pub(super) slot: &'k str,
    /// The script the call runs.
    pub(super) script: ScriptKind,
}

impl RedisStore {
    /// The script calls of `to_call` (an index into `ops` and the script it runs), per target:
    /// grouped by target (on Cluster: each master), then by hash slot, then by script, so a
    /// request makes one call per group.
    pub(super) fn group_calls(&self, ops: &[Op], to_call: &[(usize, ScriptKind)]) -> PerTarget {
        let mut groups: SmallVec<[(GroupKey, Indices); 2]> = SmallVec::new();
        for &(i, script) in to_call {
            group_of(&mut groups, self.group_key(&ops[i], script)).push(i);
        }
        let mut per_target = PerTarget::new();
        for (key, idx) in groups {
            group_of(&mut per_target, key.target).push((key.script, idx));
        }
        per_target
    }

    /// The group of `op`, run by `script`. Short windows go to the per-second Redis when there
    /// is one.
    fn group_key<'k>(&self, op: &'k Op, script: ScriptKind) -> GroupKey<'k> {
        let per_second = self.per_second.is_some() && op.spec.window.secs() < PER_SECOND_BELOW_SECS;
        let (name, slot) = match self.conn(per_second) {
            RedisConn::Cluster(_) => (self.master_of(per_second, op), hash_tag(&op.key)),
            _ => (targets::name(per_second), ""),
        };
        GroupKey {
            target: Target { per_second, name },
            slot,
            script,
        }
    }
}

/// The group of `key` in `groups` (opened empty at the end when new; groups keep the order their
/// first member came in).
pub(super) fn group_of<'g, K: PartialEq + 'g, V: Default + 'g, A: Array<Item = (K, V)>>(
    groups: &'g mut SmallVec<A>,
    key: K,
) -> &'g mut V {
    let at = match groups.iter().position(|(k, _)| *k == key) {
        Some(at) => at,
        None => {
            groups.push((key, V::default()));
            groups.len() - 1
        }
    };
    &mut groups[at].1
}

/// Awaits all of `calls` at once, their outputs in their order. (A plain function, not an
/// `async fn`: nested in the store's own futures, one more generator layer overflows rustc's
/// layout depth.)
pub(super) fn join_calls<F: Future>(
    mut calls: impl ExactSizeIterator<Item = F>,
) -> impl Future<Output = Vec<F::Output>> {
    match calls.len() {
        1 => match calls.next() {
            Some(one) => Either::Left(one.map(|out| vec![out])),
            None => Either::Right(join_all(calls)),
        },
        _ => Either::Right(join_all(calls)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_of_one_key_share_its_group_in_first_come_order() {
        let mut groups: SmallVec<[(&str, Vec<usize>); 2]> = SmallVec::new();
        for (i, key) in ["a", "b", "a", "c", "b"].into_iter().enumerate() {
            group_of(&mut groups, key).push(i);
        }
        assert_eq!(
            groups.into_vec(),
            vec![("a", vec![0, 2]), ("b", vec![1, 4]), ("c", vec![3])]
        );
    }

    #[tokio::test]
    async fn calls_answer_in_their_order_one_or_many() {
        assert_eq!(join_calls([async { 7 }].into_iter()).await, vec![7]);
        let many = (0..3).map(|i| async move { i * 2 });
        assert_eq!(join_calls(many).await, vec![0, 2, 4]);
        let none = (0..0).map(|i| async move { i });
        assert!(join_calls(none).await.is_empty());
    }
}
