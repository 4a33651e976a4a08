//! Fleet members leaving and crashing, with the real binary as the third member of two
//! in-process ones: a member stopped with SIGTERM announces its leave and the others take back
//! its part of the limit within a few gossip intervals, keeping the hits it counted; a member
//! killed with SIGKILL goes the failure detector's way (the limit stays split while it is known)
//! and, restarted at its address, comes back as the same member, with the gossip state bounded
//! by the members and the key cap. The manual clocks stand still (one window); gossip runs on
//! real time, waited for by bounded polls.

use std::net::SocketAddr;
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use super::fleet::{OVER, PAUSE};
use crate::support::TestServer;
use crate::support::fleet::{
    INTERVAL, LIMIT, config_dir, env, free_udp, hit_spawned, member, spawn_member, spread,
    status_page, until_membership,
};
use crate::support::process::{signal, wait_exit};

/// The seeds of member `i` of `binds`: the others.
fn peers(binds: &[SocketAddr], i: usize) -> Vec<SocketAddr> {
    (0..binds.len())
        .filter(|j| *j != i)
        .map(|j| binds[j])
        .collect()
}

/// `n` distinct values of `k` starting with `prefix`.
fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_stopped_with_sigterm_gives_its_share_back_at_once() {
    let binds = free_udp(3);
    let a = member(&env(binds[0], binds[0], &peers(&binds, 0))).await;
    let b = member(&env(binds[1], binds[1], &peers(&binds, 1))).await;
    let dir = config_dir();
    let mut c = spawn_member(dir.path(), env(binds[2], binds[2], &peers(&binds, 2)));
    until_membership(&[&a, &b], (2, 3)).await;
    // Hits the leaving member counted stay in the fleet's count of the window.
    let before = hit_spawned(&c, &vec!["leave0".to_string(); 60]).await;
    assert_eq!(before, 60);

    let watch = Stopwatch::start();
    signal(&c.child, "-TERM");
    // The leave takes it out of the membership, not only out of the live members: with a
    // crash (below) the others would keep splitting the limit by three for FLEET_FORGET_AFTER.
    let noticed = until_membership(&[&a, &b], (1, 2)).await;
    let code = wait_exit(&mut c.child);
    let exited = watch.elapsed();
    let interval = Duration::from_millis(50);
    eprintln!(
        "fleet leave: the others took back the share in {noticed:?} ({:.1} intervals of {INTERVAL}); \
         the member exited {code:?} after {exited:?} (FLEET_FORGET_AFTER: 10 min)",
        noticed.as_secs_f64() / interval.as_secs_f64()
    );
    assert_eq!(code, Some(0), "a graceful stop");
    assert!(status_page(&a).await.contains("2 of 2 members alive"));

    // The whole limit again (not two thirds of it), less what the leaving member admitted.
    let after = spread(&[&a, &b], "leave0", 150, PAUSE).await;
    let total: u64 = after.iter().sum();
    eprintln!("fleet leave: the two members then admitted {after:?} = {total} of {LIMIT} - 60");
    assert!(
        (LIMIT - 60..=LIMIT - 60 + OVER).contains(&total),
        "{after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_member_splits_the_limit_until_it_is_back() {
    const MAX_KEYS: usize = 8;
    let binds = free_udp(3);
    let member_env = |i: usize| {
        let mut e = env(binds[i], binds[i], &peers(&binds, i));
        e.push(("FLEET_MAX_KEYS".into(), MAX_KEYS.to_string()));
        e
    };
    let a = member(&member_env(0)).await;
    let b = member(&member_env(1)).await;
    let dir = config_dir();
    let mut c = spawn_member(dir.path(), member_env(2));
    until_membership(&[&a, &b], (2, 3)).await;
    // More distinct keys than the cap: C publishes the last MAX_KEYS of them.
    assert_eq!(hit_spawned(&c, &values("first-life", 20)).await, 20);
    until_peer_keys(&a, MAX_KEYS as u64).await;

    c.child.kill().unwrap();
    c.child.wait().unwrap();
    // The failure detector's way: alive 2, still known 3.
    let noticed = until_membership(&[&a, &b], (1, 3)).await;
    let split = spread(&[&a, &b], "killed", 150, PAUSE).await;
    let split_total: u64 = split.iter().sum();
    assert!(
        (LIMIT * 2 / 3..=LIMIT * 2 / 3 + OVER).contains(&split_total),
        "{split:?}"
    );

    let c = spawn_member(dir.path(), member_env(2));
    // Back as the same member (a new generation of it), not a fourth one.
    let back = until_membership(&[&a, &b], (2, 3)).await;
    let whole = spread(&[&a, &b], "restarted", 200, PAUSE).await;
    let whole_total: u64 = whole.iter().sum();
    eprintln!(
        "fleet kill: noticed in {noticed:?}, two members admitted {split:?} = {split_total}; \
         restarted member back in {back:?}, then {whole:?} = {whole_total}"
    );
    assert!((LIMIT..=LIMIT + OVER).contains(&whole_total), "{whole:?}");

    // No unbounded growth: after another flood of keys on the restarted member, each member's
    // gossip state holds the three members and C's previous life (until FLEET_FORGET_AFTER),
    // each with at most MAX_KEYS published keys.
    assert_eq!(hit_spawned(&c, &values("second-life", 20)).await, 20);
    // A reads the new life's full cap and B's two keys.
    until_peer_keys(&a, MAX_KEYS as u64 + 2).await;
    let m = a.scrape().await;
    let states = m.value("ratelimitd_fleet_gossip_states");
    let entries = m.value("ratelimitd_fleet_gossip_entries");
    eprintln!("fleet kill: after the restart A holds {states} node states, {entries} key-values");
    assert_eq!(states, 4, "three members and one dead generation");
    // Both lives of C hold their cap (the first one's keys stay until FLEET_FORGET_AFTER).
    assert!(
        (2 * MAX_KEYS as u64..=states * (MAX_KEYS as u64 + 1)).contains(&entries),
        "{entries} key-values in {states} node states"
    );
    let published = b.scrape().await.value("ratelimitd_fleet_keys_published");
    assert!(published <= MAX_KEYS as u64, "{published}");
}

/// Waits (at most 10 s, polling) until `s` reads at least `n` keys from its live peers.
async fn until_peer_keys(s: &TestServer, n: u64) {
    let watch = Stopwatch::start();
    loop {
        let read = s.scrape().await.value("ratelimitd_fleet_peer_keys");
        if read >= n {
            return;
        }
        assert!(
            watch.elapsed() < Duration::from_secs(10),
            "{read} keys read from the peers, never {n}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
