//! Composition root: builds the store, configuration, limiter and health from [`Settings`], binds
//! the three listeners, and runs them until shutdown, then drains.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::clock::{Clock, ManualClock, SystemClock, Timestamp};
use crate::grpc::{RateLimitServiceServer, RlsService};
use crate::health::Health;
use crate::limiter::{HeaderNames, KeyBuilder, LimiterOptions, NoStats, RateLimiter, StatsSink};
use crate::metrics::{KeyCount, Metrics};
use crate::reload::{self, ConfigHandle};
use crate::service::Service;
use crate::settings::{Backend, Settings, StatsSinkKind};
use crate::store::memory::MemoryStore;
use crate::store::redis::RedisStore;
use crate::store::{Store, StoreError};

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A listener could not be bound.
    #[error("cannot listen on {what} address {addr}: {source}")]
    Bind {
        /// Which listener (gRPC, HTTP, debug).
        what: &'static str,
        /// The address asked for.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The store could not be set up (Redis unreachable for longer than allowed).
    #[error("cannot start the store: {0}")]
    Store(StoreError),
    /// The stats sink could not start.
    #[error(transparent)]
    Metrics(#[from] crate::metrics::sinks::SinkError),
}

/// A started service: its bound addresses and handles, for `main` and for tests.
#[derive(Debug)]
pub struct Running {
    /// Where gRPC listens.
    pub grpc_addr: SocketAddr,
    /// Where `/json` and `/healthcheck` listen.
    pub http_addr: SocketAddr,
    /// Where the debug endpoints listen.
    pub debug_addr: SocketAddr,
    /// The live configuration.
    pub config: Arc<ConfigHandle>,
    /// Health components.
    pub health: Arc<Health>,
    /// The manual clock, when the settings asked for one (tests).
    pub manual_clock: Option<Arc<ManualClock>>,
    /// Where Prometheus metrics are served (`USE_PROMETHEUS`).
    pub metrics_addr: Option<SocketAddr>,
    /// The service's counters (`None` with `DISABLE_STATS`).
    pub metrics: Option<Arc<Metrics>>,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
    drain_timeout: Duration,
}

async fn bind(what: &'static str, host: &str, port: u16) -> Result<TcpListener, AppError> {
    let addr = format!("{host}:{port}");
    TcpListener::bind(&addr)
        .await
        .map_err(|source| AppError::Bind { what, addr, source })
}

fn limiter_options(s: &Settings) -> LimiterOptions {
    LimiterOptions {
        shadow_mode: s.shadow_mode,
        quota_mode: s.quota_mode,
        headers: s.limit_response_headers_enabled.then(|| HeaderNames {
            limit: s.limit_limit_header.clone(),
            remaining: s.limit_remaining_header.clone(),
            reset: s.limit_reset_header.clone(),
        }),
        dynamic_metadata: s.response_dynamic_metadata,
        keys: KeyBuilder::new(s.cache_key_prefix.clone(), s.cache_key_format),
        near_limit_ratio: s.near_limit_ratio,
    }
}

/// Starts the service described by `settings`: loads the configuration, binds every listener and
/// spawns the servers. Returns once all ports accept connections.
pub async fn start(settings: &Settings) -> Result<Running, AppError> {
    // TLS (Redis) uses rustls with the ring provider; installing twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let manual_clock = settings
        .test_manual_clock
        .map(|secs| Arc::new(ManualClock::new(Timestamp::from_secs(secs))));
    let clock: Arc<dyn Clock> = match &manual_clock {
        Some(c) => c.clone(),
        None => Arc::new(SystemClock),
    };
    let (store, memory): (Arc<dyn Store>, Option<Arc<MemoryStore>>) = match settings.backend {
        Backend::Memory => {
            let m = Arc::new(MemoryStore::new(settings.memory_max_keys));
            (m.clone(), Some(m))
        }
        Backend::Redis => {
            let redis = RedisStore::connect_with_backoff(&settings.redis)
                .await
                .map_err(AppError::Store)?;
            (Arc::new(redis), None)
        }
    };
    let store_probe = store.clone();
    let config = Arc::new(ConfigHandle::new());
    let (reporter, health_server) = tonic_health::server::health_reporter();
    let health = Arc::new(Health::new(
        store.clone(),
        settings.healthy_with_at_least_one_config_loaded,
        reporter,
    ));
    if let Some(domains) = reload::load_from_settings(settings, &config, clock.now()) {
        health.set_domains_loaded(domains).await;
    }
    health.publish().await;

    let metrics = (settings.obs.sink != StatsSinkKind::Disabled).then(|| {
        let keys: Option<KeyCount> = memory
            .clone()
            .map(|m| -> KeyCount { Arc::new(move || m.len()) });
        let statsd = settings.obs.sink == StatsSinkKind::Statsd;
        Arc::new(Metrics::new(
            settings.obs.stats_max_keys,
            config.clone(),
            keys,
            statsd,
        ))
    });
    let sink: Arc<dyn StatsSink> = match &metrics {
        Some(m) => m.clone(),
        None => Arc::new(NoStats),
    };
    let options = limiter_options(settings);
    let service = Arc::new(Service {
        limiter: RateLimiter::with_stats(store, clock.clone(), options, sink),
        config: config.clone(),
    });
    let grpc = bind("gRPC", &settings.grpc_host, settings.grpc_port).await?;
    let http = bind("HTTP", &settings.host, settings.port).await?;
    let debug = bind("debug", &settings.debug_host, settings.debug_port).await?;
    let addr = |l: &TcpListener, what| {
        l.local_addr().map_err(|source| AppError::Bind {
            what,
            addr: "bound socket".into(),
            source,
        })
    };
    let (grpc_addr, http_addr, debug_addr) = (
        addr(&grpc, "gRPC")?,
        addr(&http, "HTTP")?,
        addr(&debug, "debug")?,
    );

    let (shutdown, stop) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let grpc_router = tonic::transport::Server::builder()
        .add_service(health_server)
        .add_service(RateLimitServiceServer::new(RlsService::new(
            service.clone(),
            metrics.clone(),
        )));
    let s = stopped(stop.clone());
    tasks.spawn(async move {
        let incoming = tonic::transport::server::TcpIncoming::from(grpc).with_nodelay(Some(true));
        if let Err(e) = grpc_router.serve_with_incoming_shutdown(incoming, s).await {
            tracing::error!(error = %e, "gRPC server failed");
        }
    });
    let http_router = crate::http::router(crate::http::HttpState {
        service: service.clone(),
        health: health.clone(),
    });
    serve_http(&mut tasks, http, http_router, stopped(stop.clone()));
    let debug_router = crate::http::debug::router(crate::http::debug::DebugState {
        config: config.clone(),
        manual_clock: manual_clock.clone(),
    });
    serve_http(&mut tasks, debug, debug_router, stopped(stop.clone()));
    let metrics_addr = match &metrics {
        Some(m) => {
            crate::metrics::sinks::start(&settings.obs, m, &mut tasks, stopped(stop.clone()))
                .await?
        }
        None => None,
    };
    if let Some(m) = memory {
        tasks.spawn(sweep_expired(m, clock, stopped(stop.clone())));
    }
    tasks.spawn(watch_store_health(
        health.clone(),
        store_probe,
        stopped(stop),
    ));
    tracing::info!(%grpc_addr, %http_addr, %debug_addr, "ratelimitd listening");
    Ok(Running {
        grpc_addr,
        http_addr,
        debug_addr,
        config,
        health,
        manual_clock,
        metrics_addr,
        metrics,
        shutdown,
        tasks,
        drain_timeout: settings.drain_timeout,
    })
}

fn serve_http(
    tasks: &mut JoinSet<()>,
    listener: TcpListener,
    router: axum::Router,
    stop: impl Future<Output = ()> + Send + 'static,
) {
    tasks.spawn(async move {
        if let Err(e) = axum::serve(listener, router)
            .with_graceful_shutdown(stop)
            .await
        {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });
}

/// Resolves when the shutdown flag turns true (or its sender is gone).
async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Reclaims expired memory-store entries once a second, so memory follows live keys only.
async fn sweep_expired(
    store: Arc<MemoryStore>,
    clock: Arc<dyn Clock>,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tick.tick() => {
                store.sweep_at(clock.now());
            }
        }
    }
}

/// Probes the store once a second and republishes health when it changed, so gRPC health
/// watchers see Redis going away and coming back even when no request is running.
async fn watch_store_health(
    health: Arc<Health>,
    store: Arc<dyn Store>,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last = health.is_healthy();
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tick.tick() => {
                store.probe().await;
                let now = health.is_healthy();
                if now != last {
                    health.publish().await;
                    last = now;
                }
            }
        }
    }
}

impl Running {
    /// Graceful stop: health turns unhealthy at once, listeners stop accepting, requests in flight
    /// finish (for at most the drain timeout), then every task ends.
    pub async fn shutdown(mut self) {
        self.health.set_draining().await;
        let _ = self.shutdown.send(true);
        let drain = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(self.drain_timeout, drain)
            .await
            .is_err()
        {
            tracing::warn!(timeout = ?self.drain_timeout, "drain timed out; aborting remaining work");
            self.tasks.abort_all();
        }
    }
}

/// Runs the service until `signal` resolves, then shuts it down gracefully.
pub async fn run(settings: &Settings, signal: impl Future<Output = ()>) -> Result<(), AppError> {
    let running = start(settings).await?;
    signal.await;
    tracing::info!("shutdown requested; draining");
    running.shutdown().await;
    Ok(())
}
