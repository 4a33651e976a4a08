//! The fleet mode's refusals: peers without the shared secret (plain chitchat, or a wrong key)
//! are ignored while one with it is heard, and algorithms whose state cannot be summed across
//! members are refused when the configuration loads.

use crate::ops::loud_config::{refused, stderr};
use std::net::SocketAddr;
use std::time::Duration;

use chitchat::transport::{Transport, UdpTransport};
use chitchat::{ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig};
use ratelimitd::testing::{AuthCounts, SignedTransport};
use ratelimitd_core::algorithm::{Algorithm, LimitSpec, Window};
use ratelimitd_core::clock::{Stopwatch, Timestamp};
use ratelimitd_core::limiter::KeyBuilder;

use super::fleet::hit;
use crate::support::fleet::{LIMIT, SECRET, env, free_udp, member, spread, until_membership};
use crate::support::{Code, T0};

/// The cache key of `k=value` in the test domain, as every member builds it.
fn key_of(value: &str) -> String {
    let spec = LimitSpec {
        algorithm: Algorithm::FixedWindow,
        limit: LIMIT,
        window: Window::from_secs(60).unwrap(),
        burst: 0,
    };
    KeyBuilder::default().build(
        "fleet",
        [("k", value)].into_iter(),
        &spec,
        Timestamp::from_secs(T0),
    )
}

/// A chitchat node on `bind` seeded with `seed`, over `transport`, claiming 1000 hits of
/// `k=value` in the current window.
async fn impostor(
    bind: SocketAddr,
    seed: SocketAddr,
    value: &str,
    transport: &dyn Transport,
) -> ChitchatHandle {
    let window_start = T0 - T0 % 60;
    let claim = format!("{window_start} 60 1000 0 {}", key_of(value));
    let config = ChitchatConfig {
        chitchat_id: ChitchatId::new(bind.to_string(), 1, bind),
        cluster_id: "ratelimitd".into(),
        gossip_interval: Duration::from_millis(50),
        listen_addr: bind,
        seed_nodes: vec![seed.to_string()],
        failure_detector_config: FailureDetectorConfig::default(),
        marked_for_deletion_grace_period: Duration::from_secs(60),
        catchup_callback: None,
        extra_liveness_predicate: None,
    };
    chitchat::spawn_chitchat(config, vec![("s0".into(), claim)], transport)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_without_the_secret_are_ignored() {
    let binds = free_udp(4);
    let a = member(&env(binds[0], binds[0], &binds[1..])).await;
    let counts = std::sync::Arc::new(AuthCounts::default());
    let wrong = SignedTransport::new(b"not-the-fleet-secret", counts.clone());
    let right = SignedTransport::new(SECRET.as_bytes(), counts);
    let _plain = impostor(binds[1], binds[0], "forged", &UdpTransport).await;
    let _wrong = impostor(binds[2], binds[0], "forged", &wrong).await;
    // The control: a peer with the secret is heard, so its claim on another key counts.
    let _right = impostor(binds[3], binds[0], "control", &right).await;
    until_membership(&[&a], (1, 2)).await;
    let watch = Stopwatch::start();
    while a.scrape().await.value("ratelimitd_fleet_messages_rejected") == 0 {
        assert!(
            watch.elapsed() < Duration::from_secs(15),
            "no forged datagram arrived"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while a.scrape().await.value("ratelimitd_fleet_peer_keys") == 0 {
        assert!(
            watch.elapsed() < Duration::from_secs(15),
            "the authenticated claim never arrived"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        hit(&a, "control").await.0,
        Code::OverLimit,
        "the authenticated claim counts"
    );
    let admitted = spread(&[&a], "forged", LIMIT as usize, Duration::from_millis(1)).await;
    assert_eq!(
        admitted,
        [LIMIT],
        "the unauthenticated claims of 1000 hits were ignored"
    );
    let rejected = a.scrape().await.value("ratelimitd_fleet_messages_rejected");
    eprintln!("fleet auth: {rejected} forged datagrams rejected");
}

/// A token bucket in fleet mode is refused when the configuration loads, naming the limit, the
/// algorithm and the fleet setting; the binary does not start on it.
#[test]
fn algorithms_without_window_counts_are_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket}\n";
    std::fs::write(dir.path().join("c.yaml"), yaml).unwrap();
    let bind = free_udp(1)[0];
    let mut vars = env(bind, bind, &[]);
    vars.push(("RATELIMITD_CONFIG".into(), dir.path().display().to_string()));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = refused(&vars);
    let err = stderr(&out);
    assert!(!out.status.success(), "refused to start: {err}");
    for says in [
        "d.k",
        "token_bucket",
        "FLEET_BIND",
        "c.yaml",
        "sliding_window",
    ] {
        assert!(err.contains(says), "names {says}: {err}");
    }
}
