//! gRPC server transport options through the real server: TLS, mTLS (client CA, SAN check),
//! certificate hot reload with generated certificates, and a unix socket listener.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::support::certs::{Ca, Leaf};
use crate::support::*;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd::testing;
use ratelimitd::testing::ReloadingTls;
use ratelimitd::testing::TlsSettings;
use ratelimitd_core::clock::Stopwatch;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

const CFG: &str =
    "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 5}}\n";

/// Writes the server's cert and key (each atomically, as a secret volume update would).
fn install(dir: &Path, leaf: &Leaf) {
    for (name, pem) in [("tls.crt", &leaf.cert), ("tls.key", &leaf.key)] {
        std::fs::write(dir.join(format!(".{name}.tmp")), pem).unwrap();
        std::fs::rename(dir.join(format!(".{name}.tmp")), dir.join(name)).unwrap();
    }
}

/// Starts a TLS server with `server` (signed by a CA the caller keeps) and extra settings.
async fn start(server: &Leaf, env: &[(&str, &str)]) -> (testing::Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), CFG).unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    install(&certs, server);
    let cert = certs.join("tls.crt").display().to_string();
    let key = certs.join("tls.key").display().to_string();
    let mut vars = vec![
        ("GRPC_SERVER_USE_TLS", "true"),
        ("GRPC_SERVER_TLS_CERT", cert.as_str()),
        ("GRPC_SERVER_TLS_KEY", key.as_str()),
    ];
    vars.extend_from_slice(env);
    let config_dir = dir.path().join("config.yaml").display().to_string();
    vars.push(("RATELIMITD_CONFIG", &config_dir));
    let running = testing::start(&settings(dir.path(), &vars)).await.unwrap();
    (running, dir)
}

/// One `ShouldRateLimit` over a new TLS connection trusting `ca`, presenting `client` if given.
async fn call(running: &testing::Running, ca: &Ca, client: Option<&Leaf>) -> Result<(), String> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.pem()))
        .domain_name("localhost");
    if let Some(c) = client {
        tls = tls.identity(Identity::from_pem(&c.cert, &c.key));
    }
    let endpoint = Endpoint::from_shared(format!("https://{}", running.grpc_addr))
        .unwrap()
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .timeout(Duration::from_secs(5));
    let channel = endpoint.connect().await.map_err(|e| format!("{e:?}"))?;
    RateLimitServiceClient::new(channel)
        .should_rate_limit(request("d", &[&[("k", "v")]]))
        .await
        .map(|_| ())
        .map_err(|e| format!("{e:?}"))
}

/// Checks that a call failed because the server refused the client's certificate during the
/// TLS handshake with `alert` (the reason a client's logs show), not for another reason.
fn refused_with(result: Result<(), String>, alert: &str) {
    let err = result.expect_err("refused");
    assert!(
        err.contains(&format!("received fatal alert: {alert}")),
        "refused by the TLS alert {alert}: {err}"
    );
}

#[tokio::test]
async fn tls_serves_rls_and_refuses_plaintext() {
    let ca = Ca::new();
    let (running, _dir) = start(&ca.leaf(&["localhost"], false), &[]).await;
    call(&running, &ca, None).await.unwrap();
    let plain = RateLimitServiceClient::connect(format!("http://{}", running.grpc_addr)).await;
    let refused = match plain {
        Err(_) => true,
        Ok(mut c) => c
            .should_rate_limit(request("d", &[&[("k", "v")]]))
            .await
            .is_err(),
    };
    assert!(refused, "a plaintext client must not be served");
    let untrusted = call(&running, &Ca::new(), None).await;
    let err = untrusted.expect_err("untrusted server cert");
    assert!(err.contains("InvalidCertificate"), "{err}");
    running.shutdown().await;
}

#[tokio::test]
async fn mtls_requires_a_client_certificate_from_the_ca() {
    let (ca, clients) = (Ca::new(), Ca::new());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), clients.pem()).unwrap();
    let ca_path = dir.path().join("ca.pem").display().to_string();
    let env = [("GRPC_CLIENT_TLS_CACERT", ca_path.as_str())];
    let (running, _d) = start(&ca.leaf(&["localhost"], false), &env).await;
    call(&running, &ca, Some(&clients.leaf(&["client"], true)))
        .await
        .unwrap();
    refused_with(call(&running, &ca, None).await, "CertificateRequired");
    // Another CA of the same name: its signature does not verify with the trusted one.
    let stranger = Ca::new().leaf(&["client"], true);
    refused_with(call(&running, &ca, Some(&stranger)).await, "DecryptError");
    running.shutdown().await;
}

#[tokio::test]
async fn mtls_san_check_refuses_other_names() {
    let (ca, clients) = (Ca::new(), Ca::new());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), clients.pem()).unwrap();
    let ca_path = dir.path().join("ca.pem").display().to_string();
    let env = [
        ("GRPC_CLIENT_TLS_CACERT", ca_path.as_str()),
        ("GRPC_CLIENT_TLS_SAN", "envoy.mesh.local"),
    ];
    let (running, _d) = start(&ca.leaf(&["localhost"], false), &env).await;
    let good = clients.leaf(&["envoy.mesh.local"], true);
    call(&running, &ca, Some(&good)).await.unwrap();
    let other = clients.leaf(&["intruder.mesh.local"], true);
    refused_with(call(&running, &ca, Some(&other)).await, "BadCertificate");
    running.shutdown().await;
}

#[tokio::test]
async fn the_server_certificate_is_reloaded_when_its_files_change() {
    let (old_ca, new_ca) = (Ca::new(), Ca::new());
    // Events only: the periodic re-read would hide a change the watcher missed.
    let events_only = [("CONFIG_POLL_INTERVAL", "0")];
    let (running, dir) = start(&old_ca.leaf(&["localhost"], false), &events_only).await;
    call(&running, &old_ca, None).await.unwrap();
    install(
        &dir.path().join("certs"),
        &new_ca.leaf(&["localhost"], false),
    );
    let watch = Stopwatch::start();
    while call(&running, &new_ca, None).await.is_err() {
        assert!(
            watch.elapsed() < Duration::from_secs(10),
            "new certificate not served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        call(&running, &old_ca, None).await.is_err(),
        "old certificate replaced"
    );
    running.shutdown().await;
}

#[test]
fn a_bad_certificate_file_keeps_the_old_certificate() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    install(dir.path(), &ca.leaf(&["localhost"], false));
    let tls = ReloadingTls::try_new(TlsSettings {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
        client_ca: None,
        client_san: None,
    })
    .unwrap();
    let before = tls.current();
    std::fs::write(
        dir.path().join("tls.crt"),
        "-----BEGIN CERTIFICATE-----\ngarbage\n",
    )
    .unwrap();
    assert!(!tls.reload(), "garbage is refused");
    // A key that does not match the certificate is refused too.
    let other = ca.leaf(&["localhost"], false);
    std::fs::write(dir.path().join("tls.crt"), &other.cert).unwrap();
    assert!(!tls.reload(), "mismatched key is refused");
    assert!(
        Arc::ptr_eq(&before, &tls.current()),
        "old configuration kept"
    );
    std::fs::write(dir.path().join("tls.key"), &other.key).unwrap();
    assert!(tls.reload(), "a valid pair is taken");
    assert!(!Arc::ptr_eq(&before, &tls.current()));
}

#[tokio::test]
async fn grpc_listens_on_a_unix_socket_with_grpc_uds() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), CFG).unwrap();
    let sock = dir.path().join("rls.sock");
    let s = sock.display().to_string();
    let running = testing::start(&settings(dir.path(), &[("GRPC_UDS", &s)]))
        .await
        .unwrap();
    assert_eq!(running.grpc_uds.as_deref(), Some(sock.as_path()));
    let channel = Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_| {
            let sock = sock.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(sock).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .unwrap();
    let resp = RateLimitServiceClient::new(channel)
        .should_rate_limit(request("d", &[&[("k", "v")]]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(overall(&resp), Code::Ok);
    running.shutdown().await;
}

#[tokio::test]
async fn connections_are_closed_after_max_connection_age_plus_grace() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), CFG).unwrap();
    let env = [
        ("GRPC_MAX_CONNECTION_AGE", "200ms"),
        ("GRPC_MAX_CONNECTION_AGE_GRACE", "300ms"),
    ];
    let running = testing::start(&settings(dir.path(), &env)).await.unwrap();
    let channel = Endpoint::from_shared(format!("http://{}", running.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    // A health Watch never ends by itself, so only the hard close after the grace can end it
    // (the GOAWAY at the age lets open streams finish).
    let req = HealthCheckRequest {
        service: "ratelimit".into(),
    };
    let mut watch = HealthClient::new(channel)
        .watch(req)
        .await
        .unwrap()
        .into_inner();
    let first = watch.message().await.unwrap();
    assert!(first.is_some());
    let end = tokio::time::timeout(Duration::from_secs(10), watch.message()).await;
    let ended = end.expect("the connection is closed after age + grace");
    assert!(
        !matches!(ended, Ok(Some(_))),
        "no further update expected: {ended:?}"
    );
    running.shutdown().await;
}
