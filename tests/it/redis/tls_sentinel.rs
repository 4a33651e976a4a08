//! Redis over TLS (server verification, client certificates, skipping only the hostname check)
//! and Redis Sentinel with a failover during traffic (on Redis and on Valkey), against real
//! servers. TLS runs on Redis only: the Valkey build the tests use has no TLS.

use std::time::Duration;

use crate::support::certs::Ca;
use crate::support::redis::{Flavor, RedisServer, free_port};
use crate::support::*;
use ratelimitd_core::clock::Stopwatch;

const CFG: &str =
    "domain: t\ndescriptors:\n  - {key: k, rate_limit: {unit: hour, requests_per_unit: 1000}}\n";

/// A TLS-only redis-server requiring client certificates; returns it and its files' dir.
fn tls_redis(ca: &Ca, server_names: &[&str]) -> (RedisServer, tempfile::TempDir, u16) {
    let files = tempfile::tempdir().unwrap();
    let server = ca.leaf(server_names, false);
    let write = |name: &str, pem: &str| {
        let p = files.path().join(name);
        std::fs::write(&p, pem).unwrap();
        p.display().to_string()
    };
    let (cert, key, cacert) = (
        write("server.crt", &server.cert),
        write("server.key", &server.key),
        write("ca.crt", &ca.pem()),
    );
    let client = ca.leaf(&["ratelimitd"], true);
    write("client.crt", &client.cert);
    write("client.key", &client.key);
    let tls_port = free_port();
    let port = tls_port.to_string();
    let r = RedisServer::start_with(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &cacert,
        "--tls-auth-clients",
        "yes",
    ]);
    (r, files, tls_port)
}

fn tls_env(files: &tempfile::TempDir, host: &str, port: u16) -> Vec<(String, String)> {
    let f = |n: &str| files.path().join(n).display().to_string();
    vec![
        ("BACKEND_TYPE".into(), "redis".into()),
        ("REDIS_SOCKET_TYPE".into(), "tcp".into()),
        ("REDIS_URL".into(), format!("{host}:{port}")),
        ("REDIS_TLS".into(), "true".into()),
        ("REDIS_TLS_CACERT".into(), f("ca.crt")),
        ("REDIS_TLS_CLIENT_CERT".into(), f("client.crt")),
        ("REDIS_TLS_CLIENT_KEY".into(), f("client.key")),
        ("REDIS_RESPONSE_TIMEOUT".into(), "2s".into()),
        ("REDIS_STARTUP_MAX_ELAPSED_TIME".into(), "1ms".into()),
        ("REDIS_TIMEOUT".into(), "2s".into()),
    ]
}

async fn start(env: &[(String, String)]) -> Result<TestServer, String> {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    TestServer::try_start(&[("t.yaml", CFG)], &env).await
}

#[tokio::test]
async fn tls_with_client_certificates_and_hostname_checks() {
    require!(Redis);
    let ca = Ca::new();
    let (_r, files, port) = tls_redis(&ca, &["localhost"]);
    let s = start(&tls_env(&files, "localhost", port))
        .await
        .expect("TLS with a client cert works");
    assert_eq!(st(&s.rl("t", &[&[("k", "v")]]).await, 0).2, 999);

    // Without a client certificate the server refuses the handshake.
    let mut env = tls_env(&files, "localhost", port);
    env.retain(|(k, _)| !k.starts_with("REDIS_TLS_CLIENT"));
    assert!(start(&env).await.is_err(), "client certificate required");
}

#[tokio::test]
async fn tls_hostname_verification_can_be_skipped_but_not_the_chain() {
    require!(Redis);
    let ca = Ca::new();
    let (_r, files, port) = tls_redis(&ca, &["some-other-name"]);
    let err = start(&tls_env(&files, "localhost", port))
        .await
        .err()
        .expect("name mismatch is refused");
    assert!(err.contains("redis"), "{err}");
    let mut env = tls_env(&files, "localhost", port);
    env.push(("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION".into(), "true".into()));
    let s = start(&env)
        .await
        .expect("name check skipped, chain still verified");
    assert_eq!(st(&s.rl("t", &[&[("k", "v")]]).await, 0).0, Code::Ok);

    // A server certificate from another CA is refused even when skipping the name check.
    let other = Ca::new();
    std::fs::write(files.path().join("ca.crt"), other.pem()).unwrap();
    assert!(start(&env).await.is_err(), "the chain is still verified");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_during_traffic() {
    require!(Redis);
    failover_during_traffic(Flavor::Redis).await;
}

/// The same with a Valkey primary, replica and sentinel (`valkey-server --sentinel`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_sentinel_failover_during_traffic() {
    require!(Redis, Valkey);
    failover_during_traffic(Flavor::Valkey).await;
}

/// A primary, a replica and a sentinel of `flavor`; a failover while a service counts on them.
async fn failover_during_traffic(flavor: Flavor) {
    let primary = RedisServer::start_on(flavor, &[]);
    let port = primary.port.to_string();
    let replica = RedisServer::start_on(flavor, &["--replicaof", "127.0.0.1", &port]);
    let sentinel = crate::support::sentinel::Sentinel::start("mymaster", &primary);
    let env = vec![
        ("BACKEND_TYPE".to_string(), "redis".to_string()),
        ("REDIS_TYPE".into(), "sentinel".into()),
        ("REDIS_SOCKET_TYPE".into(), "tcp".into()),
        (
            "REDIS_URL".into(),
            format!("mymaster,127.0.0.1:{}", sentinel.port),
        ),
        ("REDIS_RESPONSE_TIMEOUT".into(), "500ms".into()),
    ];
    let s = start(&env).await.expect("connects through sentinel");
    for i in 1..=10u32 {
        assert_eq!(st(&s.rl("t", &[&[("k", "v")]]).await, 0).2, 1000 - i);
    }
    // Wait until the replica has the counter, then fail over.
    let watch = Stopwatch::start();
    while replica.cli(&["GET", "{1:t|1:k=1:v}:fw:3600:0"]) != "10" {
        assert!(
            watch.elapsed() < Duration::from_secs(10),
            "replication did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        sentinel
            .cli(&["SENTINEL", "FAILOVER", "mymaster"])
            .contains("OK")
    );
    // Traffic continues; within a bounded time every call succeeds again on the new primary.
    let watch = Stopwatch::start();
    let mut last = None;
    while watch.elapsed() < Duration::from_secs(30) {
        if let Ok(r) = s.call(request("t", &[&[("k", "v")]])).await
            && replica.cli(&["ROLE"]).starts_with("master")
        {
            last = Some(st(&r, 0).2);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let remaining = last.expect("calls succeed after the failover");
    assert!(
        remaining < 990,
        "the counter continued on the new primary: {remaining}"
    );
    assert!(
        replica
            .cli(&["GET", "{1:t|1:k=1:v}:fw:3600:0"])
            .parse::<u32>()
            .unwrap()
            >= 11
    );
}
