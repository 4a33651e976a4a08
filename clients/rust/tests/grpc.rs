//! The gRPC `ShouldRateLimit` client against the real ratelimitd: OK then OVER_LIMIT with the
//! limit's status, a refused request as a typed error, and a silent peer hitting the deadline.

mod common;

use std::time::Duration;

use common::{Ratelimitd, silent};
use ratelimitd_client::Error;
use ratelimitd_client::grpc::{Code, GrpcClient, RateLimitDescriptor, RateLimitRequest};

const CONFIG: &str = r#"
domain: api
descriptors:
  - key: remote_address
    rate_limit: {name: per-address, unit: minute, requests_per_unit: 2}
"#;

fn request(domain: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors: vec![RateLimitDescriptor::from_entries([(
            "remote_address",
            "10.0.0.1",
        )])],
        hits_addend: 0,
    }
}

#[tokio::test]
async fn should_rate_limit_counts_then_denies() {
    let server = Ratelimitd::start(CONFIG);
    let client = GrpcClient::new(&server.grpc, Duration::from_secs(5)).unwrap();
    for remaining in [1, 0] {
        let r = client.should_rate_limit(request("api")).await.unwrap();
        assert!(r.is_ok());
        let status = &r.statuses[0];
        assert_eq!(status.limit_remaining, remaining);
        let limit = status.current_limit.as_ref().unwrap();
        assert_eq!(
            (limit.name.as_str(), limit.requests_per_unit, limit.unit),
            ("per-address", 2, 2)
        );
        assert_eq!(status.duration_until_reset.unwrap().seconds, 60);
    }
    let r = client.should_rate_limit(request("api")).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert!(!r.is_ok());

    let e = client.should_rate_limit(request("")).await.unwrap_err();
    assert!(matches!(e, Error::Rejected { .. }), "{e}");
    assert!(!e.is_unavailable());
}

#[tokio::test]
async fn a_silent_peer_hits_the_deadline() {
    let url = silent().await;
    let client = GrpcClient::new(&url, Duration::from_millis(300)).unwrap();
    let e = tokio::time::timeout(
        Duration::from_secs(10),
        client.should_rate_limit(request("api")),
    )
    .await
    .expect("the client's own deadline fires first")
    .unwrap_err();
    assert!(matches!(e, Error::Timeout(_)), "{e}");
    assert!(e.is_unavailable());
}
