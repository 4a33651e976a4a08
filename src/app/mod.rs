//! Composition root: starts each part from its options (its own `start`, with what it shares
//! with the others) — the base parts (`base`), the configuration source, the policy database,
//! the features (`features`), the limiter, the listeners and the watchers — and runs them until
//! shutdown, then drains. [`signals`] maps process signals onto that (SIGTERM/SIGINT drain, SIGHUP reloads).

mod admin_listener;
mod banner;
mod base;
pub(crate) mod commands;
mod config_source;
mod error;
mod features;
mod parts;
mod readers;
mod running;
mod serve;
pub(crate) mod signals;
mod tasks;

pub use running::run;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use base::Base;
pub use error::{AppError, report};

use crate::background::Background;
use crate::grpc::tls::ReloadingTls;
use crate::health::Health;
use crate::http::admin::AdminState;
use crate::metrics::Metrics;
use crate::policy::PolicyDeps;
use crate::reload::ConfigType;
use crate::reload::{ConfigHandle, Reloading, WatchOptions};
use crate::service::Service;
use crate::settings::Settings;
use crate::store::leases::Release;
use ratelimitd_core::clock::ManualClock;
use ratelimitd_core::limiter::RateLimiter;

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
    /// `0.0.0.0:0` when it is not opened (see `admin_listener::served`).
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
    /// The regional shares and their sync (`REGION`, `GLOBAL_REDIS_*`).
    pub regions: crate::region::Regional,
    reloading: Reloading,
    // False over xDS: SIGHUP then has no files to re-read.
    from_files: bool,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
    drain_timeout: Duration,
    shutdown_delay: Duration,
    leases: Release,
}

/// Starts the service described by `settings`: loads the configuration, binds every listener and
/// spawns the servers. Returns once all ports accept connections. Each part starts from its own
/// options and what it shares with the others, in dependency order: the base parts
/// (`base`), the configuration source, the policy database, the features (`features`), the
/// limiter and the listeners, then the watchers.
pub async fn start(settings: &Settings) -> Result<Running, AppError> {
    // TLS (Redis) uses rustls with the ring provider; installing twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (shutdown, stop) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut bg = Background {
        tasks: &mut tasks,
        stop: &stop,
    };
    // Boxed, as the deep futures of the store's connect and the features' starts would otherwise
    // all be laid out inline in this one.
    let mut base = Box::pin(base::start(settings, &mut bg)).await?;
    let (clock, config, health) = (&base.clock, &base.config, &base.health);
    let source = settings.config_source();
    let reloading = Reloading::new(source, config.clone(), health.clone(), clock.clone());
    // The first load finishes before any port opens (the Go service waits for its first config
    // event too, unless FORCE_START_WITHOUT_INITIAL_CONFIG).
    config_source::start(settings, &reloading, bg.reborrow()).await?;
    health.publish().await;
    let tls = settings.grpc.tls.clone().map(ReloadingTls::try_new);
    let tls = tls.transpose()?.map(Arc::new);
    let policy_deps = PolicyDeps {
        clock,
        reloading: &reloading,
        background: bg.reborrow(),
    };
    let policy = crate::policy::start(&settings.policy, policy_deps)
        .await
        .map_err(AppError::AdminTokens)?;
    config_source::refuse_empty(settings, config)?;
    let limiter_options = parts::limiter_options(settings);
    let shared = features::Shared {
        base: &base,
        policy: &policy,
        limiter: &limiter_options,
        stop: &stop,
    };
    let features = Box::pin(features::start(settings, shared, bg.reborrow())).await;
    let regions = features.regions.clone();
    let routes = routes(
        settings,
        &base,
        policy,
        features,
        limiter_options,
        &reloading,
        tls.clone(),
    );
    let bound = serve::start(settings, routes, &mut bg).await?;
    let from_files = start_background(settings, &mut base, &reloading, tls, &mut bg);
    banner::Banner::of(settings, &bound, &base.config).log();
    Ok(Running {
        grpc_addr: bound.grpc_addr,
        grpc_uds: bound.grpc_uds,
        http_addr: bound.http_addr,
        debug_addr: bound.debug_addr,
        admin_addr: bound
            .admin_addr
            .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        config: base.config,
        health: base.health,
        manual_clock: base.manual_clock,
        metrics_addr: bound.metrics_addr,
        metrics: base.metrics,
        regions,
        reloading,
        from_files,
        shutdown,
        tasks,
        drain_timeout: settings.drain_timeout,
        shutdown_delay: settings.shutdown_delay,
        leases: base.leases,
    })
}

/// The request path over the started parts: the limiter (the store, the features' observers, the
/// regional shares, the stored overrides), the service every edge calls, the admin surface's
/// state, and what each listener serves.
fn routes(
    settings: &Settings,
    base: &Base,
    policy: crate::policy::PolicyHandle,
    features: features::Features,
    limiter_options: ratelimitd_core::limiter::LimiterOptions,
    reloading: &Reloading,
    tls: Option<Arc<ReloadingTls>>,
) -> serve::Routes {
    let limiter = RateLimiter::with_stats(
        base.stores.store.clone(),
        base.clock.clone(),
        limiter_options,
        base.sink.clone(),
    )
    .with_regions(features.regions.shares.clone())
    .with_fallback(base.fallback.clone())
    .with_random(parts::random(settings))
    .with_overrides(policy.overrides.clone())
    .with_observers(features.observers);
    let service = Arc::new(Service {
        limiter,
        config: base.config.clone(),
    });
    let regions = features.regions;
    let admin = AdminState {
        policy: policy.policy,
        tokens: policy.tokens,
        reloading: reloading.clone(),
        insight: Some(features.insight),
        explainer: Some(features.explainer),
        regions: Some(regions.clone()),
        sessions: Arc::default(),
    };
    serve::Routes {
        service,
        health: base.health.clone(),
        health_server: base.health_server.clone(),
        rlqs: features.rlqs,
        tls,
        metrics: base.metrics.clone(),
        config: base.config.clone(),
        manual_clock: base.manual_clock.clone(),
        overrides: policy.overrides,
        admin,
        regions,
    }
}

/// Starts the background work that waits for the listeners: the memory store's sweeper, Redis
/// server time's sync, and the watchers of what reloads from files — the configuration files
/// (only when the configuration comes from files; over xDS the management server pushes every
/// change) and the gRPC port's certificates. Whether the configuration comes from files.
fn start_background(
    settings: &Settings,
    base: &mut Base,
    reloading: &Reloading,
    tls: Option<Arc<ReloadingTls>>,
    bg: &mut Background<'_>,
) -> bool {
    if let Some(m) = &base.stores.memory {
        crate::store::sweeper::start(m, &base.clock, bg.reborrow());
    }
    if let Some(st) = base.server_time.take() {
        bg.spawn(st.keep_in_sync(bg.stopped()));
    }
    let from_files = settings.config_type == ConfigType::File;
    let watch = WatchOptions::with_poll(settings.config_poll_interval);
    if from_files {
        crate::reload::watch_files(reloading, watch, bg);
    }
    if let Some(tls) = tls {
        tls.watch(watch, bg);
    }
    from_files
}
