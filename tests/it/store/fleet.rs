//! The fleet mode with real members on 127.0.0.1 gossiping over UDP: load spread over three
//! members stays within the documented bound of the limit (fixed and sliding windows); a 2 | 1
//! partition (UDP relays that drop the traffic between the groups) makes each side enforce its
//! membership share and the counts converge after it heals; a member killed (the real binary,
//! SIGKILL) and restarted changes the others' shares and back without adding a member. Each
//! test's manual clocks stand still, so all its hits fall in one window; only gossip runs on real
//! time, waited for by bounded polls. Authentication and refusals: `fleet_security`.

use std::net::SocketAddr;
use std::time::Duration;

use ratelimitd::clock::Stopwatch;

use crate::support::fleet::{
    Groups, INTERVAL, LIMIT, Relay, env, free_udp, member, spread, spread_on, status_page,
    until_membership,
};
use crate::support::{Code, T0, TestServer, process};

/// Hits over the limit allowed by the bound of docs/fleet.md at these tests' rates: with a
/// total rate R, peers' counts at most D old and N members, at most R × D × (N − 1) / N extra
/// hits. Here R ≤ 60 hits/s (three members, one hit each 50 ms), D ≤ 3 × 50 ms (publish, gossip,
/// view rebuild), so about 6 hits; 5 % of the limit (15) leaves room for a loaded machine.
const OVER: u64 = LIMIT / 20;

/// Paced hits of the load tests: 20 a second per member.
const PAUSE: Duration = Duration::from_millis(50);

async fn three(binds: &[SocketAddr], advertised: &[SocketAddr]) -> Vec<TestServer> {
    let mut members = Vec::new();
    for (i, bind) in binds.iter().enumerate() {
        let peers: Vec<SocketAddr> = (0..advertised.len())
            .filter(|j| *j != i)
            .map(|j| advertised[j])
            .collect();
        members.push(member(&env(*bind, advertised[i], &peers)).await);
    }
    members
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_admit_the_limit_within_the_gossip_bound() {
    let binds = free_udp(3);
    let m = three(&binds, &binds).await;
    let all: Vec<&TestServer> = m.iter().collect();
    let settled = until_membership(&all, (2, 3)).await;
    let watch = Stopwatch::start();
    let admitted = spread(&all, "bound", 130, PAUSE).await;
    let total: u64 = admitted.iter().sum();
    eprintln!(
        "fleet bound: membership settled in {settled:?}; {admitted:?} admitted = {total} of 390 hits \
         in {:?} for a limit of {LIMIT} ({:+.1} %)",
        watch.elapsed(),
        (total as f64 - LIMIT as f64) * 100.0 / LIMIT as f64
    );
    assert!(
        total >= LIMIT,
        "the fleet admitted less than its limit: {admitted:?}"
    );
    assert!(total <= LIMIT + OVER, "over the bound: {admitted:?}");
    assert!(
        admitted.iter().all(|n| *n > 0),
        "every member admitted some: {admitted:?}"
    );
}

/// The same with sliding windows: the members exchange their current and previous counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_windows_are_shared_within_the_same_bound() {
    let binds = free_udp(3);
    let m = three(&binds, &binds).await;
    let all: Vec<&TestServer> = m.iter().collect();
    until_membership(&all, (2, 3)).await;
    let admitted = spread_on(&all, "s", "bound", 130, PAUSE).await;
    let total: u64 = admitted.iter().sum();
    eprintln!(
        "fleet sliding window: {admitted:?} admitted = {total} of 390 for a limit of {LIMIT}"
    );
    assert!((LIMIT..=LIMIT + OVER).contains(&total), "{admitted:?}");
}

/// Sends one hit on `k=value` to `s`; its code and the remaining hits it reports.
pub(super) async fn hit(s: &TestServer, value: &str) -> (Code, u32) {
    let r = s.rl("fleet", &[&[("k", value)]]).await;
    (
        Code::try_from(r.overall_code).unwrap(),
        r.statuses[0].limit_remaining,
    )
}

/// Hits `s` once at a time until it reports the fleet's count of `k=value` as `counted` (before
/// this call's hits); panics after 15 s. Returns the hits it took.
async fn until_counted(s: &TestServer, value: &str, counted: u64) -> u64 {
    let watch = Stopwatch::start();
    let mut own = 0;
    loop {
        own += 1;
        let (_, remaining) = hit(s, value).await;
        if u64::from(remaining) == LIMIT - counted - own {
            return own;
        }
        assert!(
            watch.elapsed() < Duration::from_secs(15),
            "counts never converged: {remaining} remaining after {own} own hits, {counted} counted elsewhere"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_enforces_each_sides_share_and_heals() {
    let binds = free_udp(3);
    let groups = Groups::default();
    let mut relays = Vec::new();
    for b in &binds {
        relays.push(Relay::start(*b, groups.clone()).await);
    }
    let advertised: Vec<SocketAddr> = relays.iter().map(|r| r.addr).collect();
    let m = three(&binds, &advertised).await;
    let (a, b, c) = (&m[0], &m[1], &m[2]);
    until_membership(&[a, b, c], (2, 3)).await;

    groups.set(binds[2], 1);
    let detected = until_membership(&[a, b], (1, 3)).await;
    until_membership(&[c], (0, 3)).await;
    let page = status_page(a).await;
    assert!(
        page.contains("2 of 3 members alive"),
        "the status page shows the split"
    );
    // Counts made during the partition on another key, for the convergence check below.
    for _ in 0..40 {
        assert_eq!(hit(a, "heal").await.0, Code::Ok);
        assert_eq!(hit(c, "heal").await.0, Code::Ok);
    }
    let two = spread(&[a, b], "split", 150, PAUSE).await;
    let one = spread(&[c], "split", 150, Duration::from_millis(5)).await;
    let (two_total, one_total) = (two.iter().sum::<u64>(), one[0]);
    eprintln!(
        "fleet partition: detected in {detected:?}; the side of two admitted {two:?} = {two_total} (share {}), \
         the side of one {one_total} (share {})",
        LIMIT * 2 / 3,
        LIMIT / 3
    );
    assert_eq!(
        one_total,
        LIMIT / 3,
        "a lone member enforces exactly its share"
    );
    assert!(
        (LIMIT * 2 / 3..=LIMIT * 2 / 3 + OVER).contains(&two_total),
        "{two:?}"
    );

    groups.heal();
    let healed = until_membership(&[a, b, c], (2, 3)).await;
    let watch = Stopwatch::start();
    // B saw A's 40 hits all along; C's 40 arrive after the heal.
    let on_b = until_counted(b, "heal", 80).await;
    let on_c = until_counted(c, "heal", 80 + on_b).await;
    eprintln!(
        "fleet heal: membership back in {healed:?}, counts converged in {:?} ({INTERVAL} interval)",
        watch.elapsed()
    );
    assert!(on_c >= 1);
    assert!(status_page(c).await.contains("3 of 3 members alive"));
}

/// The real binary as a member with `env`, on the same window as the in-process members.
fn spawn_member(dir: &std::path::Path, env: Vec<(String, String)>) -> process::Spawned {
    let mut env = env;
    env.extend([
        ("RATELIMITD_CONFIG".to_string(), dir.display().to_string()),
        ("RATELIMITD_TEST_MANUAL_CLOCK".to_string(), T0.to_string()),
    ]);
    process::spawn(&env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_member_splits_the_limit_until_it_is_back() {
    let binds = free_udp(3);
    let peers =
        |i: usize| -> Vec<SocketAddr> { (0..3).filter(|j| *j != i).map(|j| binds[j]).collect() };
    let a = member(&env(binds[0], binds[0], &peers(0))).await;
    let b = member(&env(binds[1], binds[1], &peers(1))).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), crate::support::fleet::CONFIG).unwrap();
    let mut c = spawn_member(dir.path(), env(binds[2], binds[2], &peers(2)));
    until_membership(&[&a, &b], (2, 3)).await;

    c.child.kill().unwrap();
    c.child.wait().unwrap();
    let noticed = until_membership(&[&a, &b], (1, 3)).await;
    let split = spread(&[&a, &b], "killed", 150, PAUSE).await;
    let split_total: u64 = split.iter().sum();
    assert!(
        (LIMIT * 2 / 3..=LIMIT * 2 / 3 + OVER).contains(&split_total),
        "{split:?}"
    );

    let c = spawn_member(dir.path(), env(binds[2], binds[2], &peers(2)));
    // Back as the same member (a new generation of it), not a fourth one.
    let back = until_membership(&[&a, &b], (2, 3)).await;
    let whole = spread(&[&a, &b], "restarted", 200, PAUSE).await;
    let whole_total: u64 = whole.iter().sum();
    eprintln!(
        "fleet kill: noticed in {noticed:?}, two members admitted {split:?} = {split_total}; \
         restarted member back in {back:?}, then {whole:?} = {whole_total}"
    );
    assert!((LIMIT..=LIMIT + OVER).contains(&whole_total), "{whole:?}");
    drop(c);
}
