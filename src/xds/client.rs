//! The ADS client: connect, subscribe to `RateLimitConfig`, apply each response, ACK or NACK, and
//! reconnect when the stream ends (after `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL` when the
//! server cannot be reached, after the `XDS_CLIENT_BACKOFF_*` backoff when an open stream drops).
//!
//! The configuration in service is untouched by connection trouble: requests keep being answered
//! from the last good snapshot while the client reconnects.

use std::future::Future;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::XdsSettings;
use super::backoff::{Backoff, connect_retry};
use super::convert::{TYPE_URL, resource_to_file};
use super::pb::envoy::config::core::v3::Node;
use super::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use super::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use super::pb::google::rpc::Status;
use crate::reload::Reloading;

/// gRPC `INVALID_ARGUMENT`: the code a NACK carries with its message.
const INVALID_ARGUMENT: i32 = 3;

/// Why the xDS client cannot be set up (a startup error).
#[derive(Debug, thiserror::Error)]
pub enum XdsError {
    /// `CONFIG_GRPC_XDS_SERVER_URL` is not a usable address.
    #[error("CONFIG_GRPC_XDS_SERVER_URL {url:?} is not a valid address: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A TLS file cannot be read or used.
    #[error("xDS client TLS: cannot use {what} {path}: {reason}")]
    Tls {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// A configured client, ready to [`run`](XdsClient::run).
#[derive(Debug, Clone)]
pub(crate) struct XdsClient {
    endpoint: Endpoint,
    settings: XdsSettings,
}

/// How a session with the management server ended.
enum Ended {
    /// No connection could be made.
    Unreachable(String),
    /// The stream was open and then ended or failed.
    Dropped(String),
}

fn read(what: &'static str, path: &std::path::Path) -> Result<Vec<u8>, XdsError> {
    std::fs::read(path).map_err(|e| XdsError::Tls {
        what,
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

impl XdsClient {
    /// Checks the address and reads the TLS files.
    pub(crate) fn new(settings: &XdsSettings) -> Result<XdsClient, XdsError> {
        let url = &settings.server_url;
        // Go dials `host:port`; a URL with a scheme is taken as it is.
        let uri = if url.contains("://") {
            url.clone()
        } else if settings.tls.is_some() {
            format!("https://{url}")
        } else {
            format!("http://{url}")
        };
        let bad = |reason: String| XdsError::Url {
            url: url.clone(),
            reason,
        };
        let mut endpoint = Endpoint::from_shared(uri)
            .map_err(|e| bad(e.to_string()))?
            .connect_timeout(Duration::from_secs(10))
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10));
        if let Some(tls) = &settings.tls {
            let mut config = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(read("CA certificate", &tls.ca_cert)?));
            if let Some((cert, key)) = &tls.client_identity {
                let identity =
                    Identity::from_pem(read("client certificate", cert)?, read("client key", key)?);
                config = config.identity(identity);
            }
            if let Some(san) = &tls.san {
                config = config.domain_name(san.clone());
            }
            endpoint = endpoint.tls_config(config).map_err(|e| XdsError::Tls {
                what: "configuration",
                path: tls.ca_cert.display().to_string(),
                reason: e.to_string(),
            })?;
        }
        Ok(XdsClient {
            endpoint,
            settings: settings.clone(),
        })
    }

    /// Runs until `stop`, applying every response through `reloading`. `first` is signalled once
    /// the first response has been applied or refused (startup waits for it, as the Go service
    /// waits for its first configuration event).
    pub(crate) async fn run(
        self,
        reloading: Reloading,
        mut first: Option<oneshot::Sender<()>>,
        stop: impl Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        let mut backoff = Backoff::new(self.settings.backoff);
        let mut acked = String::new();
        tracing::info!(url = %self.settings.server_url, "starting the xDS client for rate limit configuration");
        loop {
            let session = self.session(&reloading, &mut acked, &mut backoff, &mut first);
            let ended = tokio::select! {
                _ = &mut stop => return,
                ended = session => ended,
            };
            let wait = match ended {
                Ended::Unreachable(e) => {
                    let wait = connect_retry(self.settings.connect_retry_interval, fastrand::f64());
                    tracing::warn!(error = %e, ?wait, "cannot reach the xDS management server");
                    wait
                }
                Ended::Dropped(e) => {
                    let wait = backoff.next(fastrand::f64());
                    tracing::warn!(error = %e, ?wait, "xDS stream ended; reconnecting");
                    wait
                }
            };
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One connection and stream, until it ends.
    async fn session(
        &self,
        reloading: &Reloading,
        acked: &mut String,
        backoff: &mut Backoff,
        first: &mut Option<oneshot::Sender<()>>,
    ) -> Ended {
        let channel: Channel = match self.endpoint.connect().await {
            Ok(c) => c,
            Err(e) => return Ended::Unreachable(error_chain(&e)),
        };
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        if let Some(max) = self.settings.max_msg_size {
            client = client.max_decoding_message_size(max);
        }
        let (tx, rx) = mpsc::channel(4);
        // The version last applied: a new stream tells the server what it already has.
        let subscribe = self.request(acked.clone(), String::new(), None);
        if tx.send(subscribe).await.is_err() {
            return Ended::Dropped("request stream closed".into());
        }
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        for (k, v) in &self.settings.additional_headers {
            // Both were checked when the settings were read.
            if let (Ok(k), Ok(v)) = (
                AsciiMetadataKey::from_bytes(k.as_bytes()),
                AsciiMetadataValue::try_from(v.as_str()),
            ) {
                request.metadata_mut().insert(k, v);
            }
        }
        let mut responses = match client.stream_aggregated_resources(request).await {
            Ok(r) => r.into_inner(),
            Err(status) => return Ended::Unreachable(status.to_string()),
        };
        tracing::info!("connected to the xDS management server");
        loop {
            let response = match responses.message().await {
                Ok(Some(r)) => r,
                Ok(None) => return Ended::Dropped("the server closed the stream".into()),
                Err(status) => return Ended::Dropped(status.to_string()),
            };
            backoff.reset();
            let reply = self.apply(reloading, acked, &response).await;
            if let Some(first) = first.take() {
                let _ = first.send(());
            }
            if tx.send(reply).await.is_err() {
                return Ended::Dropped("request stream closed".into());
            }
        }
    }

    /// Applies one response; the ACK or NACK to send back.
    async fn apply(
        &self,
        reloading: &Reloading,
        acked: &mut String,
        response: &DiscoveryResponse,
    ) -> DiscoveryRequest {
        let version = &response.version_info;
        tracing::debug!(
            version,
            resources = response.resources.len(),
            "xDS response"
        );
        let files = response
            .resources
            .iter()
            .map(resource_to_file)
            .collect::<Result<Vec<_>, _>>();
        let result = match files {
            Ok(files) => reloading.apply(files).await.map(|_| ()),
            Err(e) => {
                tracing::error!(version, error = %e, "cannot read the xDS response");
                Err(e)
            }
        };
        match result {
            Ok(()) => {
                acked.clone_from(version);
                self.request(version.clone(), response.nonce.clone(), None)
            }
            Err(message) => {
                tracing::warn!(version, "xDS configuration refused (NACK)");
                let error = Status {
                    code: INVALID_ARGUMENT,
                    message,
                    details: Vec::new(),
                };
                self.request(acked.clone(), response.nonce.clone(), Some(error))
            }
        }
    }

    fn request(&self, version: String, nonce: String, error: Option<Status>) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: version,
            node: Some(self.node()),
            resource_names: Vec::new(),
            type_url: TYPE_URL.to_string(),
            response_nonce: nonce,
            error_detail: error,
        }
    }

    fn node(&self) -> Node {
        let string = |s: &String| prost_types::Value {
            kind: Some(prost_types::value::Kind::StringValue(s.clone())),
        };
        let fields = self.settings.node_metadata.iter();
        Node {
            id: self.settings.node_id.clone(),
            cluster: String::new(),
            metadata: Some(prost_types::Struct {
                fields: fields.map(|(k, v)| (k.clone(), string(v))).collect(),
            }),
        }
    }
}

/// An error with its causes (tonic's transport errors say little at the top level).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
