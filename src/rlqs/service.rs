//! `StreamRateLimitQuotas` on the gRPC port: at most `RLQS_MAX_STREAMS` open streams and
//! `RLQS_MAX_STREAMS_PER_PEER` per client address ([`Slots`]), each driven by one task that
//! answers reports (at most `RLQS_MAX_REPORTS_PER_SECOND`), once a second re-splits its buckets
//! with active demand that other streams changed (or, after a configuration change, re-assigns or
//! abandons them), and ends —
//! closing the response stream — when the client leaves, a report is bad, no report came for
//! `RLQS_STREAM_IDLE_TIMEOUT`, or the service drains.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::Shared;
use super::slots::Slots;
use super::stream::Stream;
use crate::grpc::pb::envoy::service::rate_limit_quota::v3 as pb;
use crate::listener::http::Peer;
use pb::rate_limit_quota_service_server::RateLimitQuotaService;
pub(crate) use pb::rate_limit_quota_service_server::RateLimitQuotaServiceServer;
use ratelimitd_core::clock::Stopwatch;

/// How often a stream checks whether the configuration changed.
const RECHECK: Duration = Duration::from_secs(1);

/// Responses queued per stream before the task waits for the client to read.
const QUEUE: usize = 8;

/// The RLQS gRPC service.
#[derive(Debug, Clone)]
pub(crate) struct RlqsService {
    shared: Arc<Shared>,
    slots: Arc<Slots>,
    stop: watch::Receiver<bool>,
}

impl RlqsService {
    /// A service over `shared` whose streams end when `stop` turns true (drain).
    pub(crate) fn new(shared: Arc<Shared>, stop: watch::Receiver<bool>) -> RlqsService {
        RlqsService {
            shared,
            slots: Arc::default(),
            stop,
        }
    }
}

/// Report messages per one-second window, at most.
struct ReportRate {
    window: Stopwatch,
    count: u32,
    max: u32,
}

impl ReportRate {
    fn admit(&mut self) -> bool {
        if self.window.elapsed() >= Duration::from_secs(1) {
            self.window = Stopwatch::start();
            self.count = 0;
        }
        self.count += 1;
        self.count <= self.max
    }
}

#[tonic::async_trait]
impl RateLimitQuotaService for RlqsService {
    type StreamRateLimitQuotasStream = ReceiverStream<Result<pb::RateLimitQuotaResponse, Status>>;

    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<pb::RateLimitQuotaUsageReports>>,
    ) -> Result<Response<Self::StreamRateLimitQuotasStream>, Status> {
        let peer = request.extensions().get::<Peer>().map(|p| p.0.ip());
        let slot = self.slots.take(peer, &self.shared)?;
        let (tx, rx) = mpsc::channel(QUEUE);
        let run = serve(
            self.shared.clone(),
            request.into_inner(),
            tx,
            self.stop.clone(),
        );
        tokio::spawn(async move {
            run.await;
            drop(slot);
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Drives one stream until the client leaves, a report is refused, or the service stops.
async fn serve(
    shared: Arc<Shared>,
    mut inbound: Streaming<pb::RateLimitQuotaUsageReports>,
    tx: mpsc::Sender<Result<pb::RateLimitQuotaResponse, Status>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut stream = Stream::new(fastrand::u64(..), shared.clock.now());
    let idle = shared.options.stream_idle_timeout;
    let mut rate = ReportRate {
        window: Stopwatch::start(),
        count: 0,
        max: shared.options.max_reports_per_second,
    };
    let mut recheck = tokio::time::interval(RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // Bounded by the stream's life: each turn handles one message, one tick or the stop.
    loop {
        let answer = tokio::select! {
            // The guard `wait_for` returns is not Send: drop it before anything awaits.
            _ = async { stop.wait_for(|s| *s).await.map(|_| ()) } => break,
            _ = tx.closed() => break,
            _ = recheck.tick() => if stream.silent_for(shared.clock.now()) >= idle {
                Some(Err(Status::deadline_exceeded(format!(
                    "no usage report for {idle:?} (RLQS_STREAM_IDLE_TIMEOUT); the stream is closed"
                ))))
            } else {
                stream.tick(&shared).await.map(Ok)
            },
            msg = inbound.message() => match msg {
                Ok(Some(_)) if !rate.admit() => Some(Err(Status::resource_exhausted(format!(
                    "more than {} usage reports in one second (RLQS_MAX_REPORTS_PER_SECOND)",
                    rate.max
                )))),
                Ok(Some(m)) => stream.report(&shared, m).await.transpose(),
                Ok(None) | Err(_) => break,
            },
        };
        let Some(answer) = answer else { continue };
        let failed = answer.is_err();
        if let Err(status) = &answer {
            tracing::info!(code = ?status.code(), message = status.message(), "RLQS stream refused a report");
        }
        if tx.send(answer).await.is_err() || failed {
            break;
        }
    }
    stream.close(&shared).await;
}
