//! `POST /check`'s own request and latency metrics: `ratelimitd_check_requests_total{code}` by
//! HTTP status and the histogram `ratelimitd_check_response_time_seconds`, the HTTP counterparts
//! of the gRPC `ratelimit_service_total_requests` and `ratelimit_service_response_time_seconds`.
//! The router registers them with the stats when it is built (`crate::http::router`).
//!
//! They are recorded by [`record`], a layer on the `/check` route: every answer counts, the early
//! ones (a body over its cap, bad JSON) included, without the handler knowing about metrics. The
//! `code` label only takes the statuses the route answers with, so the series stay few.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{Histogram, HistogramOpts, IntCounterVec, Opts};

use crate::metrics::Collect;
use crate::metrics::striped::Striped;
use ratelimitd_core::clock::Stopwatch;

/// `ratelimitd_check_requests_total{code}`: `POST /check` requests by HTTP status.
const REQUESTS: (&str, &str) = (
    "ratelimitd_check_requests_total",
    "POST /check requests by HTTP status code (200 allowed, 429 denied, 400 bad input, 503 unavailable)",
);

/// `ratelimitd_check_response_time_seconds`: time to answer one `POST /check`.
const RESPONSE_TIME: (&str, &str) = (
    "ratelimitd_check_response_time_seconds",
    "POST /check response time, body read to answer",
);

/// The `/check` counters, one collector per stripe (every request updates them).
#[derive(Clone, Debug)]
pub(crate) struct CheckMetrics {
    requests: Striped<IntCounterVec>,
    response_time: Striped<Histogram>,
}

impl Default for CheckMetrics {
    fn default() -> CheckMetrics {
        // The names, labels and buckets are static and valid, so these constructors cannot fail.
        CheckMetrics {
            requests: Striped::new(|| {
                let (name, help) = REQUESTS;
                IntCounterVec::new(Opts::new(name, help), &["code"])
                    .unwrap_or_else(|e| unreachable!("static metric: {e}"))
            }),
            response_time: Striped::new(|| {
                let (name, help) = RESPONSE_TIME;
                Histogram::with_opts(HistogramOpts::new(name, help))
                    .unwrap_or_else(|e| unreachable!("static metric: {e}"))
            }),
        }
    }
}

impl CheckMetrics {
    /// One `/check` answered with `status` after `elapsed`.
    pub(crate) fn request(&self, status: u16, elapsed: Duration) {
        let code = status.to_string();
        self.requests.mine().with_label_values(&[&code]).inc();
        self.response_time.mine().observe(elapsed.as_secs_f64());
    }
}

impl Collect for CheckMetrics {
    fn families(&self) -> Vec<MetricFamily> {
        let mut out = self.requests.collect();
        out.extend(self.response_time.collect());
        out
    }
}

/// Route layer: times the request through the handler and records its status (nothing when
/// stats are off).
pub(crate) async fn record(
    State(metrics): State<Option<Arc<CheckMetrics>>>,
    req: Request,
    next: Next,
) -> Response {
    let watch = Stopwatch::start();
    let response = next.run(req).await;
    if let Some(m) = &metrics {
        m.request(response.status().as_u16(), watch.elapsed());
    }
    response
}
