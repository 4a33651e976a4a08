//! `StreamRateLimitQuotas` on the gRPC port: at most `RLQS_MAX_STREAMS` open streams, each
//! driven by one task that answers reports (at most `RLQS_MAX_REPORTS_PER_SECOND`), once a second
//! re-splits its buckets (or, after a configuration change, re-assigns or abandons them), and ends — closing the
//! response stream — when the client leaves, a report is bad, or the service drains.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::Shared;
use super::stream::Stream;
use crate::clock::Stopwatch;
use crate::grpc::pb::envoy::service::rate_limit_quota::v3 as pb;
use pb::rate_limit_quota_service_server::RateLimitQuotaService;
pub use pb::rate_limit_quota_service_server::RateLimitQuotaServiceServer;

/// How often a stream checks whether the configuration changed.
const RECHECK: Duration = Duration::from_secs(1);

/// Responses queued per stream before the task waits for the client to read.
const QUEUE: usize = 8;

/// The RLQS gRPC service.
#[derive(Debug, Clone)]
pub struct RlqsService {
    shared: Arc<Shared>,
    open: Arc<AtomicUsize>,
    stop: watch::Receiver<bool>,
}

impl RlqsService {
    /// A service over `shared` whose streams end when `stop` turns true (drain).
    pub fn new(shared: Arc<Shared>, stop: watch::Receiver<bool>) -> RlqsService {
        RlqsService {
            shared,
            open: Arc::new(AtomicUsize::new(0)),
            stop,
        }
    }
}

/// One open stream's place under `RLQS_MAX_STREAMS`, given back when dropped.
struct Slot(Arc<AtomicUsize>, Arc<Shared>);

impl Slot {
    fn take(open: &Arc<AtomicUsize>, shared: &Arc<Shared>) -> Option<Slot> {
        let max = shared.settings.max_streams;
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()?;
        shared.metrics_streams(1);
        Some(Slot(open.clone(), shared.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
        self.1.metrics_streams(-1);
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
        let slot = Slot::take(&self.open, &self.shared).ok_or_else(|| {
            Status::resource_exhausted(format!(
                "too many RLQS streams are open (RLQS_MAX_STREAMS={})",
                self.shared.settings.max_streams
            ))
        })?;
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
    let mut stream = Stream::new(fastrand::u64(..));
    let mut rate = ReportRate {
        window: Stopwatch::start(),
        count: 0,
        max: shared.settings.max_reports_per_second,
    };
    let mut recheck = tokio::time::interval(RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // Bounded by the stream's life: each turn handles one message, one tick or the stop.
    loop {
        let answer = tokio::select! {
            // The guard `wait_for` returns is not Send: drop it before anything awaits.
            _ = async { stop.wait_for(|s| *s).await.map(|_| ()) } => break,
            _ = tx.closed() => break,
            _ = recheck.tick() => stream.tick(&shared).await.map(Ok),
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
