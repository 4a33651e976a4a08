//! An RLQS client for tests: one `StreamRateLimitQuotas` stream, reports sent as Envoy sends
//! them, and the bucket actions read back (every wait bounded).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use pb::rate_limit_quota_response::bucket_action::BucketAction as Action;
use pb::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use pb::rate_limit_quota_usage_reports::BucketQuotaUsage;
use ratelimitd::pb::envoy::service::rate_limit_quota::v3 as pb;
use ratelimitd::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

/// What a bucket action says, in a form tests compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// `ALLOW_ALL`.
    AllowAll,
    /// `DENY_ALL`.
    DenyAll,
    /// A token bucket: (`max_tokens`, `tokens_per_fill`, `fill_interval` seconds).
    Bucket(u32, u32, i64),
    /// The bucket was abandoned.
    Abandon,
}

/// One open stream.
pub(crate) struct QuotaStream {
    tx: mpsc::Sender<pb::RateLimitQuotaUsageReports>,
    rx: Streaming<pb::RateLimitQuotaResponse>,
}

/// A bucket id of `entries`.
pub(crate) fn bucket(entries: &[(&str, &str)]) -> pb::BucketId {
    pb::BucketId {
        bucket: entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

/// A usage of `allowed` + `denied` requests over `elapsed` seconds.
pub(crate) fn usage(id: pb::BucketId, allowed: u64, denied: u64, elapsed: i64) -> BucketQuotaUsage {
    BucketQuotaUsage {
        bucket_id: Some(id),
        time_elapsed: Some(prost_types::Duration {
            seconds: elapsed,
            nanos: 0,
        }),
        num_requests_allowed: allowed,
        num_requests_denied: denied,
    }
}

impl QuotaStream {
    /// Opens a stream to the gRPC server at `addr`.
    pub(crate) async fn open(addr: SocketAddr) -> Result<QuotaStream, tonic::Status> {
        let client = RateLimitQuotaServiceClient::connect(format!("http://{addr}"))
            .await
            .expect("connects");
        QuotaStream::start(client).await
    }

    /// Opens a stream to `addr` on a new connection from the loopback address `source` (e.g.
    /// 127.0.0.2: another peer as the server sees it).
    pub(crate) async fn open_from(
        addr: SocketAddr,
        source: IpAddr,
    ) -> Result<QuotaStream, tonic::Status> {
        let connect = move |_: tonic::transport::Uri| async move {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::new(source, 0))?;
            let stream = socket.connect(addr).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        };
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("a valid URI")
            .connect_with_connector(tower::service_fn(connect))
            .await
            .expect("connects");
        QuotaStream::start(RateLimitQuotaServiceClient::new(channel)).await
    }

    async fn start(
        mut client: RateLimitQuotaServiceClient<tonic::transport::Channel>,
    ) -> Result<QuotaStream, tonic::Status> {
        let (tx, out) = mpsc::channel(16);
        let rx = client
            .stream_rate_limit_quotas(ReceiverStream::new(out))
            .await?
            .into_inner();
        Ok(QuotaStream { tx, rx })
    }

    /// Sends one report.
    pub(crate) async fn send(&self, domain: &str, usages: Vec<BucketQuotaUsage>) {
        let report = pb::RateLimitQuotaUsageReports {
            domain: domain.to_string(),
            bucket_quota_usages: usages,
        };
        self.tx.send(report).await.expect("the stream is open");
    }

    /// The next response (within 5 s): its actions, or the status that ended the stream.
    pub(crate) async fn next(
        &mut self,
    ) -> Result<Vec<(pb::BucketId, Seen, Option<i64>)>, tonic::Status> {
        let msg = tokio::time::timeout(Duration::from_secs(5), self.rx.message())
            .await
            .expect("an answer within 5 s")?
            .ok_or_else(|| tonic::Status::cancelled("stream ended"))?;
        Ok(msg.bucket_action.into_iter().map(seen).collect())
    }

    /// Sends one report and returns the answer's single action and TTL.
    pub(crate) async fn report(
        &mut self,
        domain: &str,
        usage: BucketQuotaUsage,
    ) -> Result<(Seen, Option<i64>), tonic::Status> {
        self.send(domain, vec![usage]).await;
        let mut actions = self.next().await?;
        assert_eq!(actions.len(), 1, "one action per reported bucket");
        let (_, seen, ttl) = actions.remove(0);
        Ok((seen, ttl))
    }
}

fn seen(a: pb::rate_limit_quota_response::BucketAction) -> (pb::BucketId, Seen, Option<i64>) {
    let id = a.bucket_id.unwrap_or_default();
    match a.bucket_action {
        Some(Action::AbandonAction(_)) => (id, Seen::Abandon, None),
        Some(Action::QuotaAssignmentAction(q)) => {
            let ttl = q.assignment_time_to_live.map(|d| d.seconds);
            let s = match q.rate_limit_strategy.and_then(|s| s.strategy) {
                Some(Strategy::BlanketRule(r)) if r == BlanketRule::DenyAll as i32 => Seen::DenyAll,
                Some(Strategy::BlanketRule(_)) => Seen::AllowAll,
                Some(Strategy::TokenBucket(b)) => Seen::Bucket(
                    b.max_tokens,
                    b.tokens_per_fill.unwrap_or(1),
                    b.fill_interval.map_or(0, |d| d.seconds),
                ),
                other => panic!("unexpected strategy {other:?}"),
            };
            (id, s, ttl)
        }
        None => panic!("an action without a kind"),
    }
}
