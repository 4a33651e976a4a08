//! A small xDS management server for tests: ADS over real gRPC on 127.0.0.1, written from the
//! protos (it shares nothing with the service's client but the generated message types). Like a
//! real control plane it keeps a current snapshot, answers each new subscription with it, and
//! sends every push to each open stream; it records every request (ACK, NACK, subscription) and the
//! headers of every stream so tests can read them.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use prost::Message;
use ratelimitd::testing::xds_pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use ratelimitd::testing::xds_pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use ratelimitd::testing::xds_pb::ratelimit::config::ratelimit::v3::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};

/// The resource type the rate limit service subscribes to.
pub(crate) const TYPE_URL: &str =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

type Outbound = mpsc::Sender<Result<DiscoveryResponse, Status>>;

#[derive(Default)]
struct State {
    current: Mutex<Option<DiscoveryResponse>>,
    streams: Mutex<Vec<Outbound>>,
    requests: Mutex<Vec<DiscoveryRequest>>,
    headers: Mutex<Vec<tonic::metadata::MetadataMap>>,
}

#[derive(Clone)]
struct Ads(Arc<State>);

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = ReceiverStream<Result<DiscoveryResponse, Status>>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        self.0
            .headers
            .lock()
            .unwrap()
            .push(request.metadata().clone());
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        self.0.streams.lock().unwrap().push(tx.clone());
        let state = self.0.clone();
        tokio::spawn(async move {
            while let Ok(Some(req)) = inbound.message().await {
                // A request without a nonce subscribes: it gets the current snapshot.
                let subscribes = req.response_nonce.is_empty();
                state.requests.lock().unwrap().push(req);
                let current = state.current.lock().unwrap().clone();
                if let (true, Some(current)) = (subscribes, current) {
                    let _ = tx.send(Ok(current)).await;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// A running management server.
pub(crate) struct AdsServer {
    pub addr: SocketAddr,
    state: Arc<State>,
    version: u64,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl AdsServer {
    /// Starts on an ephemeral loopback port.
    pub(crate) async fn start() -> AdsServer {
        AdsServer::start_at("127.0.0.1:0".parse().unwrap(), 0).await
    }

    /// Starts on `addr` (retrying the bind for a bounded time: the previous server on it may be
    /// closing), numbering its versions after `first_version`.
    pub(crate) async fn start_at(addr: SocketAddr, first_version: u64) -> AdsServer {
        AdsServer::serve(addr, first_version, None).await
    }

    /// Starts on an ephemeral loopback port with TLS: `identity` is the server's certificate and
    /// key, and clients must present a certificate signed by `client_ca` (mTLS).
    pub(crate) async fn start_tls(identity: &super::certs::Leaf, client_ca: &str) -> AdsServer {
        let tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(&identity.cert, &identity.key))
            .client_ca_root(Certificate::from_pem(client_ca));
        AdsServer::serve("127.0.0.1:0".parse().unwrap(), 0, Some(tls)).await
    }

    async fn serve(
        addr: SocketAddr,
        first_version: u64,
        tls: Option<ServerTlsConfig>,
    ) -> AdsServer {
        let watch = Stopwatch::start();
        let listener = loop {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => break l,
                Err(e) if watch.elapsed() > Duration::from_secs(10) => {
                    panic!("cannot bind {addr}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let service = AggregatedDiscoveryServiceServer::new(Ads(state.clone()));
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            builder = builder.tls_config(tls).unwrap();
        }
        let task = tokio::spawn(async move {
            let _ = builder
                .add_service(service)
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stopped.await;
                })
                .await;
        });
        AdsServer {
            addr,
            state,
            version: first_version,
            stop: Some(stop),
            task,
        }
    }

    /// Makes `configs` the current snapshot and sends it to every open stream. Returns its
    /// `(version_info, nonce)`.
    pub(crate) fn push(&mut self, configs: &[RateLimitConfig]) -> (String, String) {
        self.version += 1;
        let (version, nonce) = (format!("v{}", self.version), format!("n{}", self.version));
        let response = DiscoveryResponse {
            version_info: version.clone(),
            resources: configs
                .iter()
                .map(|c| prost_types::Any {
                    type_url: TYPE_URL.into(),
                    value: c.encode_to_vec(),
                })
                .collect(),
            canary: false,
            type_url: TYPE_URL.into(),
            nonce: nonce.clone(),
        };
        *self.state.current.lock().unwrap() = Some(response.clone());
        let mut streams = self.state.streams.lock().unwrap();
        streams.retain(|tx| tx.try_send(Ok(response.clone())).is_ok());
        (version, nonce)
    }

    /// Every request received so far.
    pub(crate) fn requests(&self) -> Vec<DiscoveryRequest> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The headers of every stream opened so far.
    pub(crate) fn stream_headers(&self) -> Vec<tonic::metadata::MetadataMap> {
        self.state.headers.lock().unwrap().clone()
    }

    /// Waits (at most 10 s) for a request answering `nonce`.
    pub(crate) async fn reply_to(&self, nonce: &str) -> DiscoveryRequest {
        self.wait_for(|r| r.response_nonce == nonce).await
    }

    /// Waits (at most 10 s) for a request matching `pred`.
    pub(crate) async fn wait_for(
        &self,
        pred: impl Fn(&DiscoveryRequest) -> bool,
    ) -> DiscoveryRequest {
        let watch = Stopwatch::start();
        loop {
            if let Some(r) = self.requests().into_iter().find(|r| pred(r)) {
                return r;
            }
            assert!(
                watch.elapsed() < Duration::from_secs(10),
                "no such request: {:?}",
                self.requests()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Goes away as a crashed server would: every stream fails with UNAVAILABLE and the port closes.
    pub(crate) async fn stop(mut self) {
        for tx in self.state.streams.lock().unwrap().drain(..) {
            let _ = tx.try_send(Err(Status::unavailable("management server going away")));
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Graceful shutdown waits for the client to leave; it does at once, but bound it anyway.
        if tokio::time::timeout(Duration::from_secs(5), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

impl Drop for AdsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A resource: `domain` with one key-only descriptor per key, each blocking every request
/// (`requests_per_unit: 0`), so one call shows whether the limit is in force.
pub(crate) fn blocking(name: &str, domain: &str, keys: &[&str]) -> RateLimitConfig {
    RateLimitConfig {
        name: name.into(),
        domain: domain.into(),
        descriptors: keys
            .iter()
            .map(|k| RateLimitDescriptor {
                key: k.to_string(),
                rate_limit: Some(RateLimitPolicy {
                    unit: RateLimitUnit::Minute as i32,
                    requests_per_unit: 0,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect(),
    }
}
