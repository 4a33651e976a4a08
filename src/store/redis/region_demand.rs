//! The regions' demand exchange on the global store (`lua/region_demand.lua`,
//! `lua/region_members.lua`): one script call per key over the key's boards of every listed region,
//! the calls of one sync round sent together (one pipeline per [`CHUNK`] keys; on Redis Cluster,
//! where a pipeline must stay in one hash slot, one call per key, 32 at a time), and
//! one call per round that says which instances of each region are alive and which keys an
//! instance started posting (only those, and the keys an instance is on the board of, cost
//! calls). Off the request path;
//! each pipeline or call is bounded by the global store's response timeout.

use std::sync::LazyLock;
use std::time::Duration;

use futures_util::StreamExt;
use redis::{RedisError, Script, ScriptInvocation};

use super::conn::RedisConn;
use super::{RedisStore, unavailable};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::store::StoreError;

/// Keys per pipeline.
pub(crate) const CHUNK: usize = 512;
/// Calls in flight at once on Cluster.
const CONCURRENT: usize = 32;

static BOARD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/region_demand.lua")
    ))
});

static MEMBERS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/region_members.lua")
    ))
});

/// What one instance does on a key's own board in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoardMode {
    /// Only read the boards.
    Read,
    /// Write this instance's demand and the share it holds (and asks to hold).
    Post,
    /// Write them only if another region's board holds a demand (the key is contested).
    PostIfContested,
    /// Remove this instance's entry, then read.
    Leave,
}

impl BoardMode {
    fn code(self) -> u64 {
        match self {
            BoardMode::Read => 0,
            BoardMode::Post => 1,
            BoardMode::PostIfContested => 2,
            BoardMode::Leave => 3,
        }
    }
}

/// One key's turn in a round: its boards (one per listed region, by name), which one is this
/// instance's region, this instance's demand and what to do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardTurn {
    /// The key's board of every listed region.
    pub boards: Vec<String>,
    /// The index of this instance's region in `boards`.
    pub own: usize,
    /// This instance's demand, in thousandths of a request per second.
    pub milli: u64,
    /// What to do with it.
    pub mode: BoardMode,
    /// The share this instance holds now, in parts per million (what a post records at least).
    pub held: u64,
    /// The share it asks to hold, in parts per million (a post grants at most what the other
    /// regions leave).
    pub want: u64,
    /// The limit's floor, in parts per million: what a region that shows nothing may hold.
    pub floor: u64,
}

/// Live entries: (instance, value) per region, in the order of the call's keys.
pub(crate) type Entries = Vec<Vec<(u64, u64)>>;

/// How one key's turn went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardReply {
    /// Whether this instance's demand and share were written.
    pub posted: bool,
    /// With a post, the share granted, in parts per million: at most what the other regions'
    /// shares leave.
    pub granted: u64,
    /// Every region's live entries: (instance, demand in thousandths).
    pub regions: Entries,
}

/// The board of `key` for `region`: the key in a hash tag, so that a key's boards share a slot.
pub(crate) fn board_name(key: &str, region: &str) -> String {
    format!("{{{key}}}:region:{region}")
}

/// The hash of `region`'s live instances (one hash tag for all regions).
pub(crate) fn members_name(region: &str) -> String {
    format!("{{ratelimitd_regions}}:members:{region}")
}

/// The keys instances started posting, by when (in the members' hash slot).
const ASKING: &str = "{ratelimitd_regions}:asking";

impl RedisStore {
    /// Runs every turn of a round as instance `member` at `now`, entries living `ttl`, the
    /// entries of the instances `stale` holding no share; one reply per turn, in order.
    pub async fn exchange_boards(
        &self,
        member: u64,
        (now, ttl): (Timestamp, Duration),
        stale: &[u64],
        turns: &[BoardTurn],
    ) -> Result<Vec<BoardReply>, StoreError> {
        let (now_ms, ttl_ms) = (now.as_micros() / 1000, millis(ttl));
        let stale: Vec<String> = stale.iter().map(u64::to_string).collect();
        let stale = stale.join(",");
        let calls = turns.iter().map(|t| {
            let args = [
                member,
                t.milli,
                now_ms,
                ttl_ms,
                t.own as u64 + 1,
                t.mode.code(),
                t.held,
                t.want,
                t.floor,
            ];
            let mut args: Vec<String> = args.iter().map(u64::to_string).collect();
            args.extend([stale.clone(), "0".to_string()]);
            (t.boards.clone(), args)
        });
        let replies = self.invoke_all(&BOARD, calls.collect(), "demand").await?;
        replies
            .into_iter()
            .map(|r| {
                let bad = || StoreError::Unavailable(format!("the global store answered {r:?}"));
                let posted = r.first().is_some_and(|p| p == "1");
                let granted = r.get(1).and_then(|g| g.parse().ok()).ok_or_else(bad)?;
                let regions = entries(r.get(2..).unwrap_or_default())?;
                Ok(BoardReply {
                    posted,
                    granted,
                    regions,
                })
            })
            .collect()
    }

    /// Records that instance `member` of region `regions[own]` runs a round at `now` and starts
    /// posting the keys `announce`; reads the keys announced since `since` and every region's
    /// live instances (instance, last round in ms). Instances silent for `hold`, and keys
    /// announced longer ago, are dropped.
    pub async fn region_members(
        &self,
        (regions, own): (&[String], usize),
        member: u64,
        (now, since, hold): (Timestamp, Timestamp, Duration),
        announce: &[String],
    ) -> Result<(Vec<String>, Entries), StoreError> {
        let mut keys: Vec<String> = regions.iter().map(|r| members_name(r)).collect();
        keys.push(ASKING.to_string());
        let ms = |t: Timestamp| (t.as_micros() / 1000).to_string();
        let mut args = vec![
            (own + 1).to_string(),
            member.to_string(),
            ms(now),
            millis(hold).to_string(),
            ms(since),
        ];
        args.extend(announce.iter().cloned());
        args.push("0".into());
        let mut replies = (self.invoke_all(&MEMBERS, vec![(keys, args)], "members")).await?;
        let flat = replies.pop().unwrap_or_default();
        let bad = || StoreError::Unavailable(format!("the global store answered {flat:?}"));
        let n: usize = flat.first().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
        let asked = flat.get(1..=n).ok_or_else(bad)?.to_vec();
        Ok((asked, entries(&flat[n + 1..])?))
    }

    /// Runs `script` once per (keys, args): pipelined in chunks, or on Cluster one call each.
    async fn invoke_all(
        &self,
        script: &'static Script,
        calls: Vec<(Vec<String>, Vec<String>)>,
        what: &str,
    ) -> Result<Vec<Vec<String>>, StoreError> {
        let conn = self.main.resolved();
        let bound = self.response_timeout;
        let timed_out = || {
            StoreError::Unavailable(format!(
                "the global store did not answer the {what} exchange within {bound:?}"
            ))
        };
        let failed = |e: RedisError| unavailable(&format!("{what} exchange"), &e);
        if let RedisConn::Cluster(c) = conn {
            let each = calls.into_iter().map(|(keys, args)| {
                let mut c = c.clone();
                async move {
                    let inv = invocation(script, &keys, &args);
                    tokio::time::timeout(bound, inv.invoke_async::<Vec<String>>(&mut c)).await
                }
            });
            let replies: Vec<_> = futures_util::stream::iter(each)
                .buffered(CONCURRENT)
                .collect()
                .await;
            return replies
                .into_iter()
                .map(|r| r.map_err(|_| timed_out())?.map_err(failed))
                .collect();
        }
        let mut out = Vec::with_capacity(calls.len());
        for chunk in calls.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            pipe.load_script(script).ignore();
            for (keys, args) in chunk {
                pipe.invoke_script(&invocation(script, keys, args));
            }
            let reply = tokio::time::timeout(bound, conn.pipeline::<Vec<Vec<String>>>(&pipe));
            out.extend(reply.await.map_err(|_| timed_out())?.map_err(failed)?);
        }
        Ok(out)
    }
}

/// One call of `script` with `keys` and `args`.
fn invocation<'s>(script: &'s Script, keys: &[String], args: &[String]) -> ScriptInvocation<'s> {
    let mut inv = script.prepare_invoke();
    for k in keys {
        inv.key(k);
    }
    for a in args {
        inv.arg(a);
    }
    inv
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Reads `n, (member, value) × n` per region from a script's flat answer.
fn entries(flat: &[String]) -> Result<Entries, StoreError> {
    let bad = || StoreError::Unavailable(format!("the global store answered {flat:?}"));
    let mut out = Vec::new();
    let mut rest = flat.iter();
    while let Some(n) = rest.next() {
        let n: usize = n.parse().map_err(|_| bad())?;
        let mut region = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            let (Some(m), Some(v)) = (rest.next(), rest.next()) else {
                return Err(bad());
            };
            // A member written by something else than an instance is not one; skip it.
            if let (Ok(m), Ok(v)) = (m.parse(), v.parse()) {
                region.push((m, v));
            }
        }
        out.push(region);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_per_region_and_a_key_s_boards_share_a_hash_tag() {
        let flat = ["2", "7", "1500", "9", "0", "0", "1", "3", "250"].map(String::from);
        let got = entries(&flat).unwrap();
        assert_eq!(got, vec![vec![(7, 1500), (9, 0)], vec![], vec![(3, 250)]]);
        assert!(entries(&["2", "7"].map(String::from)).is_err());
        let (eu, us) = (board_name("a{b}c", "eu"), board_name("a{b}c", "us"));
        assert_eq!(eu, "{a{b}c}:region:eu");
        let tag = |s: &str| s[1..s.find('}').unwrap()].to_string();
        assert_eq!(tag(&eu), tag(&us));
    }
}
