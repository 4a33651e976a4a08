//! `REDIS_TLS` and `REDIS_AUTH` with Sentinel and Cluster, against real servers that speak only
//! TLS and require a password: what the settings promise is what happens, or the service refuses
//! to start. Plaintext to a TLS-only server fails (so a working TLS connection is encrypted), and
//! skipping the hostname check still rejects a certificate from an unknown CA.

use crate::support::certs::{Ca, TlsFiles};
use crate::support::redis::{Access, RedisCluster, RedisServer};
use crate::support::sentinel::Sentinel;
use crate::support::*;

const CFG: &str =
    "domain: t\ndescriptors:\n  - {key: k, rate_limit: {unit: hour, requests_per_unit: 1000}}\n";

fn secure() -> Access {
    Access {
        tls_only: true,
        password: Some("redis-pw".into()),
    }
}

/// Env for a Sentinel or Cluster deployment at `url`, with TLS trusting `files`' CA.
fn env(kind: &str, url: String, files: &TlsFiles) -> Vec<(String, String)> {
    [
        ("BACKEND_TYPE", "redis".to_string()),
        ("REDIS_TYPE", kind.into()),
        ("REDIS_SOCKET_TYPE", "tcp".into()),
        ("REDIS_URL", url),
        ("REDIS_AUTH", "redis-pw".into()),
        ("REDIS_TLS", "true".into()),
        ("REDIS_TLS_CACERT", files.path("ca.crt")),
        ("REDIS_RESPONSE_TIMEOUT", "2s".into()),
        ("REDIS_STARTUP_MAX_ELAPSED_TIME", "1ms".into()),
        // A TLS handshake of a debug build on a loaded host can take seconds.
        ("REDIS_TIMEOUT", "10s".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `env` with `name` set to `value` (or removed when `None`).
fn with(env: &[(String, String)], name: &str, value: Option<&str>) -> Vec<(String, String)> {
    let mut env: Vec<_> = env.iter().filter(|(k, _)| k != name).cloned().collect();
    if let Some(v) = value {
        env.push((name.into(), v.into()));
    }
    env
}

async fn start(env: &[(String, String)]) -> Result<TestServer, String> {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    TestServer::try_start(&[("t.yaml", CFG)], &env).await
}

/// Why a start was refused: checked, so that a test provoking one failure cannot pass on
/// another (a refused password where a certificate was meant to fail, say).
#[derive(Debug, Clone, Copy)]
enum Refusal {
    /// The server dropped the connection: a plaintext client of a TLS-only server.
    Dropped,
    /// Redis refused the password (`REDIS_AUTH`, `REDIS_SENTINEL_AUTH`).
    Password,
    /// The certificate's names do not include the host.
    Name,
    /// The certificate does not chain to the trusted CA.
    Chain,
}

/// Starts on `env`, which must be refused for `why`; returns the error.
async fn refused(env: &[(String, String)], why: Refusal) -> String {
    let Err(err) = start(env).await else {
        panic!("started, where it must be refused ({why:?})");
    };
    let tls = err.contains("invalid peer certificate");
    let fits = match why {
        Refusal::Dropped => {
            ["Connection reset by peer", "Broken pipe", "closed"]
                .iter()
                .any(|t| err.contains(t))
                && !tls
        }
        Refusal::Password => err.contains("Password authentication failed") && !tls,
        Refusal::Name => tls && err.contains("not valid for name"),
        Refusal::Chain => tls && !err.contains("not valid for name"),
    };
    assert!(fits, "refused for another reason than {why:?}: {err}");
    err
}

/// A TLS-only primary with a password and a sentinel (with its own password) watching it.
fn sentinel_over_tls(files: &TlsFiles) -> (RedisServer, Sentinel) {
    let args = files.server_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let primary = RedisServer::start_secure(&args, &secure());
    let conf = format!(
        "tls-replication yes\ntls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\nsentinel auth-pass mymaster redis-pw\n",
        files.path("server.crt"),
        files.path("server.key"),
        files.path("ca.crt"),
    );
    let sentinel = Sentinel::start_with("mymaster", &primary, &conf, Some("sentinel-pw"));
    (primary, sentinel)
}

#[tokio::test]
async fn sentinel_primary_is_reached_over_tls_with_both_passwords() {
    require!(Redis);
    // Sentinel names the primary by IP, so the certificate carries it.
    let files = TlsFiles::new(&Ca::new(), &["127.0.0.1"]);
    let (primary, sentinel) = sentinel_over_tls(&files);
    let env = env(
        "sentinel",
        format!("mymaster,127.0.0.1:{}", sentinel.port),
        &files,
    );
    let env = with(&env, "REDIS_SENTINEL_AUTH", Some("sentinel-pw"));

    let s = start(&env).await.expect("TLS primary behind sentinel");
    assert_eq!(st(&s.rl("t", &[&[("k", "v")]]).await, 0).2, 999);
    assert_eq!(primary.cli(&["GET", "{1:t|1:k=1:v}:fw:3600:0"]), "1");

    // The primary speaks only TLS: without REDIS_TLS the connection fails instead of working.
    refused(&with(&env, "REDIS_TLS", None), Refusal::Dropped).await;
    // Each refused password is named: they are two settings, and the client alone reports both
    // refusals alike.
    let sentinels = refused(
        &with(&env, "REDIS_SENTINEL_AUTH", Some("wrong")),
        Refusal::Password,
    )
    .await;
    assert!(
        sentinels.contains("REDIS_SENTINEL_AUTH is the sentinels' password"),
        "{sentinels}"
    );
    let primary = refused(&with(&env, "REDIS_AUTH", Some("wrong")), Refusal::Password).await;
    assert!(
        primary.contains("REDIS_AUTH is the primary's password"),
        "{primary}"
    );
}

#[tokio::test]
async fn sentinel_tls_checks_the_name_and_refuses_to_skip_it() {
    require!(Redis);
    let files = TlsFiles::new(&Ca::new(), &["some-other-name"]);
    let (_primary, sentinel) = sentinel_over_tls(&files);
    let env = env(
        "sentinel",
        format!("mymaster,127.0.0.1:{}", sentinel.port),
        &files,
    );
    let env = with(&env, "REDIS_SENTINEL_AUTH", Some("sentinel-pw"));
    refused(&env, Refusal::Name).await;

    // Skipping only the name check is not possible there: a clear refusal, not a downgrade.
    let skip = with(&env, "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", Some("true"));
    let err = ratelimitd::Settings::from_env(skip)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION") && err.contains("sentinel"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_tls_and_auth_skip_hostname_keeps_the_chain() {
    require!(Redis);
    let files = TlsFiles::new(&Ca::new(), &["some-other-name"]);
    let mut args = files.server_args();
    args.extend(["--tls-cluster".into(), "yes".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ca = files.path("ca.crt");
    let create = [
        "--tls",
        "--cacert",
        &ca,
        "-a",
        "redis-pw",
        "--no-auth-warning",
    ];
    let cluster = RedisCluster::start_secure(3, &args, &secure(), &create);
    let urls: Vec<String> = cluster.nodes.iter().map(RedisServer::addr).collect();
    let env = env("cluster", urls.join(","), &files);

    // The nodes' certificate names another host: refused unless the name check is skipped.
    refused(&env, Refusal::Name).await;
    let skip = with(&env, "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", Some("true"));
    let s = start(&skip).await.expect("TLS + AUTH cluster");
    assert_eq!(st(&s.rl("t", &[&[("k", "v")]]).await, 0).2, 999);
    assert_eq!(cluster.key_count().iter().sum::<usize>(), 1);

    // Skipping the name check never skips the chain: a certificate from an unknown CA fails.
    let unknown = TlsFiles::new(&Ca::new(), &["x"]);
    let other_ca = with(&skip, "REDIS_TLS_CACERT", Some(&unknown.path("ca.crt")));
    refused(&other_ca, Refusal::Chain).await;
    refused(&with(&skip, "REDIS_AUTH", Some("wrong")), Refusal::Password).await;
    refused(&with(&skip, "REDIS_TLS", None), Refusal::Dropped).await;
}
