//! Composition root: builds the store, configuration, limiter and health from [`Settings`], binds
//! the three listeners, starts the config and certificate watchers, and runs them until shutdown,
//! then drains. [`signals`] maps process signals onto that (SIGTERM/SIGINT drain, SIGHUP reloads).

mod admin_listener;
mod banner;
mod coalesce;
mod config_source;
mod error;
mod grpc_idle;
mod grpc_listen;
mod insight;
mod leases;
mod parts;
mod policy;
mod rlqs;
mod running;
mod server_time;
pub mod signals;
mod tasks;

pub use running::run;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use error::AppError;
use grpc_idle::Tracked;
use grpc_listen::{GrpcListener, bind_grpc, serve_grpc};
use tasks::{serve_http, stopped, sweep_expired, watch_store_health};

use crate::clock::{Clock, ManualClock, SystemClock, Timestamp};
use crate::grpc::bounded::Bounded;
use crate::grpc::tls::ReloadingTls;
use crate::grpc::{RateLimitServiceServer, RlsService};
use crate::health::Health;
use crate::limiter::RateLimiter;
use crate::metrics::Metrics;
use crate::reload::{ConfigHandle, ConfigSource, Reloading, WatchOptions};
use crate::service::Service;
use crate::settings::{ConfigType, Settings};

/// A started service: its bound addresses and handles, for `main` and for tests.
#[derive(Debug)]
pub struct Running {
    /// Where gRPC listens (the unspecified address `0.0.0.0:0` when it listens on `GRPC_UDS`).
    pub grpc_addr: SocketAddr,
    /// The unix socket gRPC listens on, with `GRPC_UDS`.
    pub grpc_uds: Option<std::path::PathBuf>,
    /// Where `/json` and `/healthcheck` listen.
    pub http_addr: SocketAddr,
    /// Where the debug endpoints listen.
    pub debug_addr: SocketAddr,
    /// Where the admin surface (`/v1/*`, the status page) listens; the unspecified address
    /// `0.0.0.0:0` when it is not opened (see [`admin_listener::served`]).
    pub admin_addr: SocketAddr,
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
    reloading: Reloading,
    // False over xDS: SIGHUP then has no files to re-read.
    from_files: bool,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
    drain_timeout: Duration,
    shutdown_delay: Duration,
    leases: leases::Release,
}

async fn bind(what: &'static str, host: &str, port: u16) -> Result<TcpListener, AppError> {
    let addr = format!("{host}:{port}");
    TcpListener::bind(&addr)
        .await
        .map_err(|source| AppError::Bind { what, addr, source })
}

/// Starts the service described by `settings`: loads the configuration, binds every listener and
/// spawns the servers. Returns once all ports accept connections.
pub async fn start(settings: &Settings) -> Result<Running, AppError> {
    // TLS (Redis) uses rustls with the ring provider; installing twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let manual_clock = settings
        .test_manual_clock
        .map(|secs| Arc::new(ManualClock::new(Timestamp::from_secs(secs))));
    let mut clock: Arc<dyn Clock> = match &manual_clock {
        Some(c) => c.clone(),
        None => Arc::new(SystemClock),
    };
    let config = Arc::new(ConfigHandle::new());
    let (shutdown, stop) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let stores = parts::store(settings, &clock).await?;
    let (metrics, sink) = parts::metrics(settings, &stores, &config);
    let parts::StoreParts {
        store,
        memory,
        redis,
    } = stores;
    let fallback = tasks::local_fallback(
        &mut tasks,
        redis.as_ref(),
        (&clock, &config),
        settings,
        &stop,
    );
    let rlqs = rlqs::Wiring::new(settings, redis.as_ref(), (&config, &metrics), &stop);
    let breakers = insight::breakers(redis.as_ref());
    let decides = settings.redis.use_server_time;
    let server_time = server_time::start(redis, decides, manual_clock.is_some(), &mut clock).await;
    let store_probe = store.clone();
    let lease_release = leases::Release {
        store: store.clone(),
        clock: clock.clone(),
    };
    tasks.spawn(
        lease_release
            .clone()
            .on_reload(config.clone(), stopped(stop.clone())),
    );
    let (reporter, health_server) = tonic_health::server::health_reporter();
    let health = Health::new(
        store.clone(),
        settings.healthy_with_at_least_one_config_loaded,
        reporter,
    );
    let health = Arc::new(health.with_store_target(parts::store_target(settings)));
    let source = ConfigSource::from_settings(settings);
    let reloading = Reloading::new(source, config.clone(), health.clone(), clock.clone());
    let from_files = settings.config_type == ConfigType::File;
    // The first load finishes before any port opens (the Go service waits for its first config
    // event too, unless FORCE_START_WITHOUT_INITIAL_CONFIG).
    config_source::start(settings, &reloading, &mut tasks, stopped(stop.clone())).await?;
    health.publish().await;
    let tls = settings.grpc.tls.clone().map(ReloadingTls::try_new);
    let tls = tls.transpose()?.map(Arc::new);

    let (overrides, mut admin) =
        policy::start(settings, (&clock, &reloading), &mut tasks, &stop).await?;
    config_source::refuse_empty(settings, &config)?;
    let mut observers =
        policy::violation_log(settings, (&admin, &metrics, &clock), &mut tasks, &stop);
    let views = (&config, &overrides);
    let (hot, mut views, mut explainer) = insight::wire(
        settings,
        (&clock, &store),
        metrics.as_ref(),
        breakers,
        views,
        (&mut tasks, &stop),
    );
    observers.extend(hot);
    let logged = settings.policy.violations.sinks.db();
    let reads = (&mut views, &mut explainer);
    insight::with_violations(reads, admin.policy.as_ref().ok(), logged);
    admin.insight = Some(views);
    admin.explainer = Some(explainer);
    let options = parts::limiter_options(settings);
    let service = Arc::new(Service {
        limiter: RateLimiter::with_stats(store, clock.clone(), options, sink)
            .with_fallback(fallback)
            .with_overrides(overrides.clone())
            .with_observers(observers),
        config: config.clone(),
    });
    let grpc = bind_grpc(settings).await?;
    let http = bind("HTTP", &settings.host, settings.port).await?;
    let debug = bind("debug", &settings.debug_host, settings.debug_port).await?;
    let admin_socket = match admin_listener::served(settings, admin.tokens.len()) {
        true => Some(bind("admin", &settings.admin_host, settings.admin_port).await?),
        false => None,
    };
    let addr = |l: &TcpListener, what| {
        l.local_addr().map_err(|source| AppError::Bind {
            what,
            addr: "bound socket".into(),
            source,
        })
    };
    let (grpc_addr, grpc_uds) = match &grpc {
        GrpcListener::Tcp(l) => (addr(l, "gRPC")?, None),
        GrpcListener::Unix(_, path) => (SocketAddr::from(([0, 0, 0, 0], 0)), Some(path.clone())),
    };
    let (http_addr, debug_addr) = (addr(&http, "HTTP")?, addr(&debug, "debug")?);
    let admin_bound = match &admin_socket {
        Some(l) => Some(addr(l, "admin")?),
        None => None,
    };

    let mut builder = tonic::transport::Server::builder();
    let (age, grace) = (
        settings.grpc.max_connection_age,
        settings.grpc.max_connection_age_grace,
    );
    if let Some(age) = age {
        // GOAWAY at the age; the hard close after the grace is the listener's (see grpc_listen).
        builder = builder.max_connection_age(age);
    }
    let grpc_router = builder
        .add_service(Tracked(health_server))
        .add_service(Tracked(Bounded::new(
            RateLimitServiceServer::new(
                RlsService::new(service.clone(), metrics.clone())
                    .with_standard_headers(settings.edges.grpc_standard_headers),
            )
            .max_decoding_message_size(settings.grpc.max_recv_message_bytes),
            settings.limits,
            settings.grpc.max_recv_message_bytes,
        )))
        .add_optional_service(rlqs.service(&overrides, &clock));
    serve_grpc(
        &mut tasks,
        grpc,
        grpc_router,
        tls.clone(),
        age.zip(grace).map(|(a, g)| a + g),
        (
            settings.listeners.grpc,
            settings.listeners.grpc_stream_connections,
        ),
        stopped(stop.clone()),
    );
    let http_router = crate::http::router(crate::http::HttpState {
        service: service.clone(),
        health: health.clone(),
        edges: Arc::new(settings.edges.clone()),
        metrics: metrics.clone(),
        caps: settings.limits,
    });
    serve_http(
        &mut tasks,
        "HTTP",
        http,
        settings.listeners.http,
        http_router,
        stopped(stop.clone()),
    );
    let debug_router = crate::http::debug::router(crate::http::debug::DebugState {
        config: config.clone(),
        manual_clock: manual_clock.clone(),
        overrides,
        tokens: admin.tokens.clone(),
    });
    serve_http(
        &mut tasks,
        "debug",
        debug,
        settings.listeners.debug,
        debug_router,
        stopped(stop.clone()),
    );
    if let Some(listener) = admin_socket {
        let router = crate::http::admin::router(admin, &settings.admin, &settings.admin_host);
        let limits = settings.listeners.admin;
        serve_http(
            &mut tasks,
            "admin",
            listener,
            limits,
            router,
            stopped(stop.clone()),
        );
    }
    let metrics_addr = match &metrics {
        Some(m) => {
            let (obs, limits) = (&settings.obs, settings.listeners.prometheus);
            crate::metrics::sinks::start(obs, limits, m, &mut tasks, stopped(stop.clone())).await?
        }
        None => None,
    };
    if let Some(m) = memory {
        tasks.spawn(sweep_expired(m, clock, stopped(stop.clone())));
    }
    if let Some(st) = server_time {
        tasks.spawn(st.keep_in_sync(stopped(stop.clone())));
    }
    let watch = WatchOptions::with_poll(settings.config_poll_interval);
    // Over xDS the management server pushes every change: no files to watch.
    tasks::spawn_watchers(&mut tasks, (&reloading, from_files), tls, watch, &stop);
    tasks.spawn(watch_store_health(
        health.clone(),
        store_probe,
        stopped(stop),
    ));
    banner::Banner {
        settings,
        grpc_addr,
        grpc_uds: grpc_uds.as_deref(),
        http_addr,
        debug_addr,
        admin_addr: admin_bound,
        metrics_addr,
        domains: config.snapshot().map_or(0, |s| s.config.domain_count()),
    }
    .log();
    Ok(Running {
        grpc_addr,
        grpc_uds,
        http_addr,
        debug_addr,
        admin_addr: admin_bound.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        config,
        health,
        manual_clock,
        metrics_addr,
        metrics,
        reloading,
        from_files,
        shutdown,
        tasks,
        drain_timeout: settings.drain_timeout,
        shutdown_delay: settings.shutdown_delay,
        leases: lease_release,
    })
}
