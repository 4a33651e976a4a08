//! Starting the stats sink the settings chose: the Prometheus listener or the StatsD flusher.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::statsd::{self, StatsdOptions};
use super::{Metrics, Observability, StatsSinkKind, prom};
use crate::listener::ConnLimits;

/// Why a sink could not start.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The Prometheus listener could not be bound.
    #[error("cannot listen on PROMETHEUS_ADDR {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The metric registry refused a metric (a bug: names are static).
    #[error("metrics registry: {0}")]
    Registry(#[from] prometheus::Error),
}

/// `:9090` (Go's listen syntax for every interface) → `0.0.0.0:9090`.
pub(crate) fn listen_addr(addr: &str) -> String {
    if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.to_string()
    }
}

/// Spawns the chosen sink into `tasks`; returns the Prometheus address when it listens (its
/// connections under `prometheus_limits`).
pub(crate) async fn start(
    obs: &Observability,
    prometheus_limits: ConnLimits,
    metrics: &Arc<Metrics>,
    tasks: &mut JoinSet<()>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<Option<SocketAddr>, SinkError> {
    match obs.sink {
        StatsSinkKind::Disabled => Ok(None),
        StatsSinkKind::Statsd => {
            let opts = StatsdOptions {
                addr: format!("{}:{}", obs.statsd_host, obs.statsd_port),
                protocol: obs.statsd_protocol,
                tags: obs.extra_tags.clone(),
                dogstatsd: obs.dogstatsd,
                mogrifiers: obs.mogrifiers.clone(),
                interval: obs.stats_flush_interval,
            };
            tasks.spawn(statsd::run(metrics.clone(), opts, stop));
            Ok(None)
        }
        StatsSinkKind::Prometheus => {
            let registry = prom::registry(metrics.clone())?;
            let addr = listen_addr(&obs.prometheus_addr);
            let bind_err = |source| SinkError::Bind {
                addr: addr.clone(),
                source,
            };
            let listener = TcpListener::bind(&addr).await.map_err(bind_err)?;
            let local = listener.local_addr().map_err(bind_err)?;
            let path = obs.prometheus_path.clone();
            if let Some(mapper) = &obs.prometheus_mapper_yaml {
                tracing::warn!(
                    PROMETHEUS_MAPPER_YAML = %mapper,
                    "the mapping file is not read: the exported names are those of Go's default \
                     statsd_exporter mapping (docs/operations.md#metrics)"
                );
            }
            tasks.spawn(prom::serve(
                listener,
                prometheus_limits,
                path,
                registry,
                stop,
            ));
            Ok(Some(local))
        }
    }
}
