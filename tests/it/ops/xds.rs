//! `CONFIG_TYPE=GRPC_XDS_SOTW` against a real management server on loopback (`crate::support::xds`): what
//! it pushes is enforced, a bad push is `NACKed` with its error while the old limits stay, the client
//! comes back after the server goes away, and updates under load fail no call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use crate::support::xds::{AdsServer, TYPE_URL, blocking};
use crate::support::{Code, TestServer, overall};
use ratelimitd::testing::xds_pb::ratelimit::config::ratelimit::v3::RateLimitUnit;

const DOMAIN: &str = "gw";

/// Starts the service on the xDS server at `ads`, with short reconnect waits.
async fn start(ads: &AdsServer, extra: &[(&str, &str)]) -> TestServer {
    let url = ads.addr.to_string();
    let mut env = vec![
        ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
        ("CONFIG_GRPC_XDS_SERVER_URL", url.as_str()),
        ("CONFIG_GRPC_XDS_NODE_ID", "node-1"),
        ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=a"),
        (
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
            "x-token:secret",
        ),
        ("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "50ms"),
        ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "50ms"),
        ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "200ms"),
        ("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "2"),
    ];
    env.extend_from_slice(extra);
    TestServer::start(&[], &env).await
}

/// Whether a request for `key` is refused: each `blocking` key refuses every request.
async fn blocked(s: &TestServer, key: &str) -> bool {
    overall(&s.rl(DOMAIN, &[&[(key, "x")]]).await) == Code::OverLimit
}

/// Polls (at most 10 s) until `key` is blocked or not, as `want` says.
async fn wait_blocked(s: &TestServer, key: &str, want: bool) {
    let watch = Stopwatch::start();
    while blocked(s, key).await != want {
        assert!(
            watch.elapsed() < Duration::from_secs(10),
            "{key} never became blocked={want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn health(s: &TestServer) -> u16 {
    let r = s.http.get(s.http_url("/healthcheck")).send().await.unwrap();
    r.status().as_u16()
}

#[tokio::test]
async fn pushes_are_enforced_and_acked_and_a_bad_push_is_nacked_keeping_the_old_limits() {
    let mut ads = AdsServer::start().await;
    let (v1, n1) = ads.push(&[blocking("gw-limits", DOMAIN, &["a"])]);
    // Startup waits for the first push: the limit is in force as soon as the ports are open.
    let s = start(&ads, &[]).await;
    assert!(blocked(&s, "a").await);
    assert!(!blocked(&s, "b").await);
    let ack = ads.reply_to(&n1).await;
    assert_eq!(
        (ack.version_info.as_str(), ack.error_detail),
        (v1.as_str(), None)
    );
    assert_eq!(ack.type_url, TYPE_URL);
    let node = ack.node.unwrap();
    assert_eq!(node.id, "node-1");
    let zone = &node.metadata.unwrap().fields["zone"];
    assert_eq!(
        zone.kind,
        Some(prost_types::value::Kind::StringValue("a".into()))
    );
    assert_eq!(ads.stream_headers()[0].get("x-token").unwrap(), "secret");

    // An update: both limits are in force and the push is ACKed.
    let (v2, n2) = ads.push(&[blocking("gw-limits", DOMAIN, &["a", "b"])]);
    wait_blocked(&s, "b", true).await;
    assert_eq!(ads.reply_to(&n2).await.version_info, v2);

    // A bad push (a limit without a unit): NACK naming the resource and the problem; the
    // previous configuration keeps serving.
    let mut bad = blocking("bad-limits", DOMAIN, &["a", "c"]);
    bad.descriptors[1].rate_limit.as_mut().unwrap().unit = RateLimitUnit::Unknown as i32;
    let (_, n3) = ads.push(&[bad]);
    let nack = ads.reply_to(&n3).await;
    let message = nack.error_detail.expect("a NACK carries the error").message;
    assert!(message.contains("bad-limits"), "{message}");
    assert!(
        message.contains("invalid rate limit unit 'UNKNOWN'"),
        "{message}"
    );
    assert_eq!(
        nack.version_info, v2,
        "a NACK names the version still applied"
    );
    assert!(blocked(&s, "a").await && blocked(&s, "b").await);
    assert!(!blocked(&s, "c").await);
    let config = &s.running().config;
    assert_eq!((config.load_successes(), config.load_failures()), (2, 1));
    s.shutdown().await;
}

#[tokio::test]
async fn health_waits_for_the_first_push_when_asked() {
    let mut ads = AdsServer::start().await;
    let extra = [
        ("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true"),
        ("FORCE_START_WITHOUT_INITIAL_CONFIG", "true"),
    ];
    let s = start(&ads, &extra).await;
    assert_eq!(health(&s).await, 500);
    let (_, n1) = ads.push(&[blocking("gw-limits", DOMAIN, &["a"])]);
    ads.reply_to(&n1).await;
    wait_blocked(&s, "a", true).await;
    assert_eq!(health(&s).await, 200);
    s.shutdown().await;
}

#[tokio::test]
async fn after_the_server_goes_away_the_old_limits_serve_and_the_client_comes_back() {
    let mut ads = AdsServer::start().await;
    let (v1, n1) = ads.push(&[blocking("gw-limits", DOMAIN, &["a"])]);
    let s = start(&ads, &[]).await;
    ads.reply_to(&n1).await;
    let addr = ads.addr;
    ads.stop().await;
    // Meanwhile every request is answered from the configuration in service.
    for _ in 0..20 {
        assert!(blocked(&s, "a").await);
    }
    // The server comes back on the same address with new limits; the client reconnects (within
    // its backoff), tells it which version it has, and applies the new snapshot.
    let mut ads = AdsServer::start_at(addr, 100).await;
    let (_, n) = ads.push(&[blocking("gw-limits", DOMAIN, &["b"])]);
    let hello = ads.wait_for(|r| r.response_nonce.is_empty()).await;
    assert_eq!(hello.version_info, v1);
    ads.reply_to(&n).await;
    wait_blocked(&s, "b", true).await;
    assert!(!blocked(&s, "a").await);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_under_load_fail_no_call() {
    let mut ads = AdsServer::start().await;
    ads.push(&[blocking("gw-limits", DOMAIN, &["a"])]);
    let s = Arc::new(start(&ads, &[]).await);
    let done = Arc::new(AtomicBool::new(false));
    let (calls, wrong) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (s, done, calls, wrong) = (s.clone(), done.clone(), calls.clone(), wrong.clone());
        workers.push(tokio::spawn(async move {
            // Bounded: at most 2000 calls per worker.
            for _ in 0..2000 {
                if done.load(Ordering::Relaxed) {
                    break;
                }
                let ok = match s
                    .call(crate::support::request(DOMAIN, &[&[("a", "x")]]))
                    .await
                {
                    Ok(r) => overall(&r) == Code::OverLimit,
                    Err(_) => false,
                };
                calls.fetch_add(1, Ordering::Relaxed);
                if !ok {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    // Ten updates, each keeping `a` and adding a key, each waited for.
    let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    for i in 0..keys.len() {
        let mut all: Vec<&str> = vec!["a"];
        all.extend(keys[..=i].iter().map(String::as_str));
        let (_, n) = ads.push(&[blocking("gw-limits", DOMAIN, &all)]);
        assert!(ads.reply_to(&n).await.error_detail.is_none());
    }
    wait_blocked(&s, "k9", true).await;
    done.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    assert!(calls.load(Ordering::Relaxed) > 0);
    assert_eq!(
        wrong.load(Ordering::Relaxed),
        0,
        "calls failed or were let through"
    );
    assert_eq!(s.running().config.load_successes(), 11);
    if let Ok(s) = Arc::try_unwrap(s) {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn tls_with_a_client_certificate_and_the_configured_server_name() {
    let ca = crate::support::certs::Ca::new();
    // The server's certificate names `xds.internal` only, not the address dialled: the
    // connection works because CONFIG_GRPC_XDS_SERVER_TLS_SAN says which name to check.
    let mut ads = AdsServer::start_tls(&ca.leaf(&["xds.internal"], false), &ca.pem()).await;
    let (_, n1) = ads.push(&[blocking("gw-limits", DOMAIN, &["a"])]);
    let dir = tempfile::tempdir().unwrap();
    let client = ca.leaf(&["ratelimit"], true);
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let (ca_path, cert, key) = (
        write("ca.pem", &ca.pem()),
        write("client.pem", &client.cert),
        write("client.key", &client.key),
    );
    let extra = [
        ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
        ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ca_path.as_str()),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", cert.as_str()),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", key.as_str()),
        ("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds.internal"),
    ];
    let s = start(&ads, &extra).await;
    assert!(ads.reply_to(&n1).await.error_detail.is_none());
    assert!(blocked(&s, "a").await);
    s.shutdown().await;
}
