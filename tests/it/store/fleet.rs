//! The fleet mode with real members on 127.0.0.1 gossiping over UDP: load spread over three
//! members admits the limit within the documented bound (fixed and sliding windows), with the
//! age of the peers' counts (`D`) the state the test waits for, not a time it assumes; a 2 | 1
//! partition (UDP relays that drop the traffic between the groups) makes each side enforce its
//! membership share and the counts converge after it heals. Each test's manual clocks stand
//! still, so all its hits fall in one window; only gossip runs on real time, waited for by
//! bounded polls. Members leaving, crashing and coming back: `fleet_membership`; authentication
//! and refusals: `fleet_security`.

use std::net::SocketAddr;
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use crate::support::fleet::{
    Groups, INTERVAL, LIMIT, Relay, env, free_udp, member, spread, spread_on, status_page,
    until_membership,
};
use crate::support::policy::TOKEN;
use crate::support::{Code, TestServer};

/// Hits over the limit allowed by the bound of docs/fleet.md at these tests' rates: with a
/// total rate R, peers' counts at most D old and N members, at most R × D × (N − 1) / N extra
/// hits. Here R ≤ 60 hits/s (three members, one hit each 50 ms), D ≤ 3 × 50 ms (publish, gossip,
/// view rebuild), so about 6 hits; 5 % of the limit (15) leaves room for a loaded machine.
pub(super) const OVER: u64 = LIMIT / 20;

/// Paced hits of the load tests: 20 a second per member.
pub(super) const PAUSE: Duration = Duration::from_millis(50);

async fn three(binds: &[SocketAddr], advertised: &[SocketAddr]) -> Vec<TestServer> {
    let mut members = Vec::new();
    for (i, bind) in binds.iter().enumerate() {
        let peers: Vec<SocketAddr> = (0..advertised.len())
            .filter(|j| *j != i)
            .map(|j| advertised[j])
            .collect();
        let mut env = env(*bind, advertised[i], &peers);
        // For `/v1/explain`, which reads a member's count without counting a hit.
        env.push(("ADMIN_TOKEN".into(), TOKEN.into()));
        members.push(member(&env).await);
    }
    members
}

/// Hits below the limit spread over the members by [`under_the_limit`]: 80 each, paced, and one
/// more, so that the rounds after them cross the limit inside a round.
const UNDER: u64 = 3 * 80 + 1;

/// Paced load on `key=value` spread over `all` up to [`UNDER`] hits: every one admitted, however
/// old the peers' counts a member reads (they are never above the real ones). Returns each
/// member's estimated over-admission right after the load.
async fn under_the_limit(all: &[&TestServer], key: &str, value: &str) -> Vec<f64> {
    let admitted = spread_on(all, key, value, 80, PAUSE).await;
    let mut estimated = Vec::new();
    for s in all {
        estimated.push(estimated_error(s).await);
    }
    assert_eq!(
        admitted,
        [80, 80, 80],
        "under the limit every hit is admitted"
    );
    let r = all[0].rl("fleet", &[&[(key, value)]]).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    estimated
}

/// `s`'s count of `key=value` in the current window as a decision would read it — its own
/// hits and the ones it knows of its peers — through `/v1/explain`, which counts no hit.
async fn count_seen(s: &TestServer, key: &str, value: &str) -> u64 {
    let body = serde_json::json!({
        "domain": "fleet",
        "descriptors": [{"entries": [{"key": key, "value": value}]}],
    });
    let r = s
        .http
        .post(s.admin_url("/v1/explain"))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "explain answers");
    let v: serde_json::Value = r.json().await.unwrap();
    let counter = &v["descriptors"][0]["limits"][0]["counter"];
    counter["used"]
        .as_u64()
        .unwrap_or_else(|| panic!("a count: {v}"))
}

/// Waits (at most 30 s, polling) until every member of `members` reads the `counted` hits of
/// `key=value` (every peer's count has reached every member), or, past the limit, reads the limit
/// reached (a sliding window reads at most its limit).
async fn until_seen(members: &[&TestServer], key: &str, value: &str, counted: u64) {
    let watch = Stopwatch::start();
    loop {
        let mut seen = Vec::new();
        for s in members {
            seen.push(count_seen(s, key, value).await);
        }
        if seen.iter().all(|n| *n >= counted.min(LIMIT)) {
            return;
        }
        assert!(
            watch.elapsed() < Duration::from_secs(30),
            "the members never all read {counted} hits of {key}={value}: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Rounds of one hit on `key=value` on every member at once, each round sent once every member
/// reads the `counted` hits so far ([`until_seen`]), until a round where every member refuses.
/// A round's decisions miss only that round's hits on the other members: the bound of
/// docs/fleet.md with `R × D` one round, `N − 1` hits over at most. A refused hit counts in a
/// fixed window, not in a sliding one (`refused_count`). Returns the hits admitted.
async fn rounds_over_the_limit(
    members: &[&TestServer],
    (key, value): (&str, &str),
    mut counted: u64,
    refused_count: bool,
) -> u64 {
    let mut admitted = 0;
    for _ in 0..LIMIT {
        until_seen(members, key, value, counted).await;
        let calls = members.iter().map(|s| async move {
            s.rl("fleet", &[&[(key, value)]]).await.overall_code == Code::Ok as i32
        });
        let ok = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .filter(|admitted| *admitted)
            .count() as u64;
        if ok == 0 {
            return admitted;
        }
        admitted += ok;
        counted += if refused_count {
            members.len() as u64
        } else {
            ok
        };
    }
    panic!("{LIMIT} rounds and still admitting: {admitted} admitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_admit_the_limit_within_the_gossip_bound() {
    let binds = free_udp(3);
    let m = three(&binds, &binds).await;
    let all: Vec<&TestServer> = m.iter().collect();
    let settled = until_membership(&all, (2, 3)).await;
    for s in &all {
        assert_eq!(estimated_error(s).await, 0.0, "idle: no error to estimate");
    }
    let watch = Stopwatch::start();
    let estimated = under_the_limit(&all, "k", "bound").await;
    let over = rounds_over_the_limit(&all, ("k", "bound"), UNDER, true).await;
    let total = UNDER + over;
    eprintln!(
        "fleet bound: membership settled in {settled:?}; {total} admitted in {:?} for a limit of \
         {LIMIT} ({:+.1} %); estimated over-admission after the paced load {estimated:.1?}",
        watch.elapsed(),
        (total as f64 - LIMIT as f64) * 100.0 / LIMIT as f64
    );
    assert!(
        estimated.iter().all(|e| *e > 0.0),
        "under load the peers' hits make an error to estimate: {estimated:?}"
    );
    assert!(total >= LIMIT, "the fleet admitted less than its limit");
    assert!(total < LIMIT + 3, "over the bound of one round: {total}");
}

/// The same with sliding windows: the members exchange their current and previous counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_windows_are_shared_within_the_same_bound() {
    let binds = free_udp(3);
    let m = three(&binds, &binds).await;
    let all: Vec<&TestServer> = m.iter().collect();
    until_membership(&all, (2, 3)).await;
    under_the_limit(&all, "s", "bound").await;
    let total = UNDER + rounds_over_the_limit(&all, ("s", "bound"), UNDER, false).await;
    eprintln!("fleet sliding window: {total} admitted for a limit of {LIMIT}");
    assert!((LIMIT..LIMIT + 3).contains(&total), "{total}");
}

/// `s`'s estimated over-admission (hits per limit).
async fn estimated_error(s: &TestServer) -> f64 {
    let m = s.scrape().await;
    m.get("ratelimitd_fleet_estimated_overadmission")
        .expect("the estimate is exposed")
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
    let converged = watch.elapsed();
    eprintln!(
        "fleet heal: membership back in {healed:?}, counts converged {converged:?} later \
         ({:.1} intervals of {INTERVAL})",
        (healed + converged).as_secs_f64() / 0.05
    );
    assert!(on_c >= 1);
    assert!(status_page(c).await.contains("3 of 3 members alive"));
}
