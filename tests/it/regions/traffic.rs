//! What a key costs on the global store, counted on the global redis-server itself
//! (`INFO commandstats`): a key used in one region costs no call there once its share is whole
//! (and a key whose demand never presses on its share costs none at all), while a key used in two
//! regions is posted and its shares move. Every instance's round makes one call of its own (the
//! instance is alive: one `HSET` and one `PEXPIRE`), whatever its keys.

use super::world::{self, Region, calls, round};
use crate::support::redis::RedisServer;
use crate::support::require;

/// 200 a minute worldwide, following demand with a floor of 0.1 and a step of 0.1 per sync.
const MOVING: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 200, regions: {shares: {eu: 0.5, us: 0.5}, follow_demand: {floor: 0.1, max_step: 0.1}}}\n";

/// The demand boards on the global store.
fn boards(redis: &RedisServer) -> Vec<String> {
    let keys = redis.cli(&["--scan", "--pattern", "*:region:*"]);
    let mut keys: Vec<String> = keys.lines().map(str::to_string).collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_keys_used_in_two_regions_write_to_the_global_store() {
    require!(Redis);
    let global = RedisServer::start();
    let env = world::global(true, global.socket().display().to_string());
    let eu = Region::start("eu", 1, MOVING, &env).await;
    let us = Region::start("us", 1, MOVING, &env).await;
    // `solo`, hit hard in eu only, climbs from its floor to all it can hold (0.9), posting while
    // it climbs: two rounds on the board, then eight steps.
    for _ in 0..10 {
        eu.load("solo", 20).await;
        round(&[&eu, &us]).await;
    }
    assert!((eu.key_share("solo") - 0.9).abs() < 1e-9);
    // It left the board but keeps its entry there: the entry records the 0.9 it holds.
    let solo = boards(&global);
    assert_eq!(solo.len(), 1, "{solo:?}");
    let entry = global.cli(&["HVALS", &solo[0]]);
    assert!(entry.trim().ends_with(":900000"), "{entry}");
    // From now on: `solo` still hit hard, `quiet` lightly (never pressing on its floor).
    global.cli(&["CONFIG", "RESETSTAT"]);
    for _ in 0..5 {
        eu.load("solo", 20).await;
        eu.load("quiet", 1).await;
        round(&[&eu, &us]).await;
    }
    // Two instances, five rounds: one call each per round (its own line) and nothing else.
    let stats = global.cli(&["INFO", "commandstats"]);
    assert_eq!(calls(&global, "evalsha"), 10, "{stats}");
    assert_eq!(calls(&global, "hset"), 10, "{stats}");
    assert_eq!(calls(&global, "pexpire"), 10);
    assert_eq!(calls(&global, "hdel"), 0);
    assert_eq!(boards(&global), solo);
    assert!(
        (eu.key_share("solo") - 0.9).abs() < 1e-9,
        "solo keeps its share"
    );
    assert!(
        (eu.key_share("quiet") - 0.1).abs() < 1e-9,
        "quiet keeps its floor"
    );
    // `shared`, hit hard in both regions: both post it and both shares rise toward half.
    global.cli(&["CONFIG", "RESETSTAT"]);
    for _ in 0..5 {
        tokio::join!(eu.load("shared", 20), us.load("shared", 20));
        round(&[&eu, &us]).await;
    }
    assert!(
        calls(&global, "hset") > 10,
        "{}",
        global.cli(&["INFO", "commandstats"])
    );
    assert_eq!(boards(&global).len(), 3, "{:?}", boards(&global));
    for r in [&eu, &us] {
        let share = r.key_share("shared");
        assert!((share - 0.4).abs() < 1e-9, "{}: {share}", r.name);
        let line = r.sync_line().await;
        assert!(line.contains("(1 on the board)"), "{line}");
    }
}
