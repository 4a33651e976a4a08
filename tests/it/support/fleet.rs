//! Fleet-mode members for tests: free loopback UDP ports for `FLEET_BIND`, a member's settings,
//! in-process members and the real binary as one, its gossip figures read from Prometheus, bounded waits for the membership to settle, paced
//! load spread over members, and a UDP relay in front of each member that can cut the traffic
//! between two groups of members (a partition) and heal it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd_core::clock::Stopwatch;
use tokio::net::UdpSocket;
use tokio::task::JoinSet;

use super::{Code, T0, TestServer, process, request};

/// The shared secret of the test fleets.
pub(crate) const SECRET: &str = "fleet-test-secret-0123456789";

/// One domain, a fixed window of 300 hits a minute per value of `k` and a sliding window of as
/// many per value of `s` (the manual clocks stand still, so every hit of a test falls in one
/// window).
pub(crate) const CONFIG: &str = r#"
domain: fleet
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 300}
  - key: s
    rate_limit: {unit: minute, requests_per_unit: 300, algorithm: sliding_window}
"#;

/// The limit of [`CONFIG`].
pub(crate) const LIMIT: u64 = 300;

/// The gossip interval of the test fleets.
pub(crate) const INTERVAL: &str = "50ms";

/// `n` loopback UDP addresses free right now (bound and released).
pub(crate) fn free_udp(n: usize) -> Vec<SocketAddr> {
    let sockets: Vec<std::net::UdpSocket> = (0..n)
        .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    sockets.iter().map(|s| s.local_addr().unwrap()).collect()
}

/// A member's settings: gossip on `bind`, advertised as `advertise`, seeded with `peers`.
pub(crate) fn env(
    bind: SocketAddr,
    advertise: SocketAddr,
    peers: &[SocketAddr],
) -> Vec<(String, String)> {
    let peers: Vec<String> = peers.iter().map(std::string::ToString::to_string).collect();
    [
        ("FLEET_BIND", bind.to_string()),
        ("FLEET_ADVERTISE", advertise.to_string()),
        ("FLEET_PEERS", peers.join(",")),
        ("FLEET_SECRET", SECRET.to_string()),
        ("FLEET_GOSSIP_INTERVAL", INTERVAL.to_string()),
        ("USE_PROMETHEUS", "true".to_string()),
        ("PROMETHEUS_ADDR", "127.0.0.1:0".to_string()),
        ("ADMIN_TRUST_LOOPBACK", "true".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Starts an in-process member with `env`.
pub(crate) async fn member(env: &[(String, String)]) -> TestServer {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    TestServer::start(&[("fleet.yaml", CONFIG)], &env).await
}

/// `(peers alive, members known)` as `s` reports them.
pub(crate) async fn membership(s: &TestServer) -> (u64, u64) {
    let m = s.scrape().await;
    (
        m.value("ratelimitd_fleet_peers_alive"),
        m.value("ratelimitd_fleet_members_known"),
    )
}

/// Waits (at most 30 s, polling) until every member of `members` reports `want`
/// (`(peers alive, members known)`); panics with the last figures otherwise.
pub(crate) async fn until_membership(members: &[&TestServer], want: (u64, u64)) -> Duration {
    let watch = Stopwatch::start();
    loop {
        let mut seen = Vec::new();
        for s in members {
            seen.push(membership(s).await);
        }
        if seen.iter().all(|m| *m == want) {
            return watch.elapsed();
        }
        assert!(
            watch.elapsed() < Duration::from_secs(30),
            "membership never settled on {want:?}: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends `per_member` hits on `k=value` to each of `members` at once, each member's hits paced
/// `pause` apart; returns how many each member admitted.
pub(crate) async fn spread(
    members: &[&TestServer],
    value: &str,
    per_member: usize,
    pause: Duration,
) -> Vec<u64> {
    spread_on(members, "k", value, per_member, pause).await
}

/// [`spread`] on the descriptor `key=value`.
pub(crate) async fn spread_on(
    members: &[&TestServer],
    key: &str,
    value: &str,
    per_member: usize,
    pause: Duration,
) -> Vec<u64> {
    let mut tasks = JoinSet::new();
    for (i, s) in members.iter().enumerate() {
        let mut grpc = s.grpc.clone();
        let (key, value) = (key.to_string(), value.to_string());
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(pause);
            // A late tick is not made up with a burst: the rate never exceeds the pace.
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut admitted = 0;
            for _ in 0..per_member {
                tick.tick().await;
                let r = grpc
                    .should_rate_limit(request("fleet", &[&[(&key, &value)]]))
                    .await;
                if r.expect("ShouldRateLimit succeeds")
                    .into_inner()
                    .overall_code
                    == Code::Ok as i32
                {
                    admitted += 1;
                }
            }
            (i, admitted)
        });
    }
    let mut out = vec![0; members.len()];
    while let Some(r) = tasks.join_next().await {
        let (i, n) = r.unwrap();
        out[i] = n;
    }
    out
}

/// The text of `s`'s status page (`ADMIN_TRUST_LOOPBACK`).
pub(crate) async fn status_page(s: &TestServer) -> String {
    let r = s.http.get(s.admin_url("/")).send().await.unwrap();
    assert_eq!(r.status(), 200, "the status page answers");
    r.text().await.unwrap()
}

/// Which group each member (by its bound gossip address) is in: members of different groups
/// cannot reach each other through the relays. Everyone starts in group 0.
#[derive(Debug, Clone, Default)]
pub(crate) struct Groups(Arc<Mutex<HashMap<SocketAddr, u8>>>);

impl Groups {
    /// Puts `member` in `group`.
    pub(crate) fn set(&self, member: SocketAddr, group: u8) {
        self.0.lock().insert(member, group);
    }

    /// Everyone back in group 0 (the partition heals).
    pub(crate) fn heal(&self) {
        self.0.lock().clear();
    }

    fn connected(&self, a: SocketAddr, b: SocketAddr) -> bool {
        let g = self.0.lock();
        g.get(&a).unwrap_or(&0) == g.get(&b).unwrap_or(&0)
    }
}

/// A UDP relay in front of one member: peers send to [`Relay::addr`] (the member's
/// `FLEET_ADVERTISE`), the relay forwards from one upstream socket per sender and sends the
/// replies back, dropping every datagram between members of different [`Groups`]. Its tasks
/// end when it is dropped.
pub(crate) struct Relay {
    pub addr: SocketAddr,
    _tasks: JoinSet<()>,
}

impl Relay {
    /// A relay to the member bound at `target`.
    pub(crate) async fn start(target: SocketAddr, groups: Groups) -> Relay {
        let front = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let addr = front.local_addr().unwrap();
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut upstreams: HashMap<SocketAddr, Arc<UdpSocket>> = HashMap::new();
            let mut replies = JoinSet::new();
            let mut buf = vec![0u8; 65_536];
            loop {
                let Ok((len, from)) = front.recv_from(&mut buf).await else {
                    continue;
                };
                if !groups.connected(from, target) {
                    continue;
                }
                let up = match upstreams.get(&from) {
                    Some(up) => up.clone(),
                    None => {
                        let up = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
                        upstreams.insert(from, up.clone());
                        let (up2, front, groups) = (up.clone(), front.clone(), groups.clone());
                        replies.spawn(async move {
                            let mut buf = vec![0u8; 65_536];
                            while let Ok((len, _)) = up2.recv_from(&mut buf).await {
                                if groups.connected(target, from) {
                                    let _ = front.send_to(&buf[..len], from).await;
                                }
                            }
                        });
                        up
                    }
                };
                let _ = up.send_to(&buf[..len], target).await;
            }
        });
        Relay {
            addr,
            _tasks: tasks,
        }
    }
}

/// The real binary as a member with `env` and the configuration in `dir` (a `fleet.yaml` of
/// [`CONFIG`]), on the same standing-still window as the in-process members.
pub(crate) fn spawn_member(dir: &std::path::Path, env: Vec<(String, String)>) -> process::Spawned {
    let mut env = env;
    env.extend([
        ("RATELIMITD_CONFIG".to_string(), dir.display().to_string()),
        ("RATELIMITD_TEST_MANUAL_CLOCK".to_string(), T0.to_string()),
    ]);
    process::spawn(&env)
}

/// A directory holding [`CONFIG`] for [`spawn_member`].
pub(crate) fn config_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fleet.yaml"), CONFIG).unwrap();
    dir
}

/// Sends one hit on `k=value` for each of `values` to the spawned member `s`; returns how many
/// were admitted.
pub(crate) async fn hit_spawned(s: &process::Spawned, values: &[String]) -> u64 {
    let url = format!("http://{}", s.grpc_addr);
    let mut grpc = RateLimitServiceClient::connect(url).await.unwrap();
    let mut admitted = 0;
    for v in values {
        let r = grpc
            .should_rate_limit(request("fleet", &[&[("k", v)]]))
            .await
            .expect("ShouldRateLimit succeeds");
        if r.into_inner().overall_code == Code::Ok as i32 {
            admitted += 1;
        }
    }
    admitted
}
