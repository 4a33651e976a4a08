//! The SDK client from the settings: the region and endpoint asked for, credentials from the
//! standard AWS chain, TLS on rustls with ring (as the rest of the binary), the SDK's retries
//! off and its own timeouts at the response timeout (the store bounds each op as well).

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::Credentials;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};

use super::DynamoSettings;
use ratelimitd_core::store::StoreError;

/// A client for `s`'s table, with `credentials` when given (tests on a local stand-in), else
/// the standard chain's; an error when no region is known (`DYNAMODB_REGION`, `AWS_REGION`
/// or the profile's), since no endpoint can be chosen without one.
pub(super) async fn build(
    s: &DynamoSettings,
    credentials: Option<Credentials>,
) -> Result<Client, StoreError> {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let t = s.response_timeout;
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(t)
                .operation_attempt_timeout(t)
                .operation_timeout(t)
                .build(),
        );
    if let Some(credentials) = credentials {
        loader = loader.credentials_provider(credentials);
    }
    if let Some(region) = &s.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(endpoint) = &s.endpoint {
        loader = loader.endpoint_url(endpoint.clone());
    }
    let config = loader.load().await;
    if config.region().is_none() {
        return Err(StoreError::Unavailable(
            "BACKEND_TYPE=dynamodb needs a region: set DYNAMODB_REGION (or AWS_REGION)".into(),
        ));
    }
    Ok(Client::new(&config))
}
