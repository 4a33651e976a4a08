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
mod leases;
mod parts;
mod readers;
mod running;
mod serve;
pub mod signals;
mod tasks;

pub use running::run;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

pub use error::AppError;
use tasks::{Background, sweep_expired, watch_store_health};

use crate::clock::ManualClock;
use crate::grpc::tls::ReloadingTls;
use crate::health::Health;
use crate::http::admin::AdminState;
use crate::insight::InsightDeps;
use crate::limiter::RateLimiter;
use crate::metrics::Metrics;
use crate::policy::PolicyDeps;
use crate::policy::violations::ViolationDeps;
use crate::region::RegionDeps;
use crate::reload::{ConfigHandle, Reloading, WatchOptions};
use crate::rlqs::RlqsDeps;
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
    leases: leases::Release,
}

/// Starts the service described by `settings`: loads the configuration, binds every listener and
/// spawns the servers. Returns once all ports accept connections. Each feature starts from its
/// own options and the parts it shares, in dependency order.
pub async fn start(settings: &Settings) -> Result<Running, AppError> {
    // TLS (Redis) uses rustls with the ring provider; installing twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (manual_clock, mut clock) = parts::clocks(settings);
    let config = Arc::new(ConfigHandle::new());
    let (shutdown, stop) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut bg = Background {
        tasks: &mut tasks,
        stop: &stop,
    };
    let mut stores = parts::store(settings, &clock).await?;
    let fleet = match (&settings.fleet, &stores.memory) {
        (Some(options), Some(memory)) => {
            let started =
                crate::fleet::start(options, memory.clone(), clock.clone(), bg.reborrow());
            let fleet = started.await?;
            stores.store = fleet.store.clone();
            Some(fleet)
        }
        _ => None,
    };
    let (metrics, sink) = parts::metrics(settings, &stores, &config, &clock);
    if let (Some(m), Some(f)) = (&metrics, &fleet) {
        m.set_gauges(f.gauges());
    }
    let limiter_options = parts::limiter_options(settings);
    let redis = stores.redis.clone();
    let fallback = tasks::local_fallback(settings, redis.as_ref(), &config, &clock, &mut bg);
    let manual = manual_clock.is_some();
    let server_time = crate::store::redis::server_time::start(
        redis.clone(),
        settings.redis.use_server_time,
        manual,
        &mut clock,
    )
    .await;
    let store = stores.store.clone();
    let leases = leases::Release::start(&store, &clock, &config, &mut bg);
    let (health, health_server) = parts::health(settings, &store);
    let source = settings.config_source();
    let reloading = Reloading::new(source, config.clone(), health.clone(), clock.clone());
    // The first load finishes before any port opens (the Go service waits for its first config
    // event too, unless FORCE_START_WITHOUT_INITIAL_CONFIG).
    config_source::start(settings, &reloading, bg.tasks, bg.stopped()).await?;
    health.publish().await;
    let tls = settings.grpc.tls.clone().map(ReloadingTls::try_new);
    let tls = tls.transpose()?.map(Arc::new);
    let policy_deps = PolicyDeps {
        clock: &clock,
        reloading: &reloading,
        background: bg.reborrow(),
    };
    let policy = crate::policy::start(&settings.policy, policy_deps)
        .await
        .map_err(AppError::AdminTokens)?;
    config_source::refuse_empty(settings, &config)?;
    let db = policy.policy.as_ref().ok();
    let violations = &settings.policy.violations;
    let violation_deps = ViolationDeps {
        policy: db,
        metrics: &metrics,
        clock: &clock,
        background: bg.reborrow(),
    };
    let mut observers = crate::policy::violations::start(violations, violation_deps);
    let insight = crate::insight::start(
        &settings.insight,
        InsightDeps {
            clock: &clock,
            metrics: metrics.as_ref(),
            breakers: readers::breakers(redis.as_ref()),
            fleet: fleet.as_ref().map(|f| f.status_line()),
            config: &config,
            overrides: &policy.overrides,
            violations_in: db.filter(|_| violations.sinks.db()),
            about: readers::about(settings, &clock),
            background: bg.reborrow(),
        },
    );
    observers.extend(insight.observers);
    let explainer = readers::explainer(&insight.insight, &store, &limiter_options);
    let rlqs = crate::rlqs::start(
        &settings.rlqs,
        RlqsDeps {
            redis: redis.as_ref(),
            config: &config,
            overrides: &policy.overrides,
            clock: &clock,
            keys: &limiter_options.keys,
            prefix: &settings.cache_key_prefix,
            metrics: &metrics,
            max_recv_message_bytes: settings.grpc.max_recv_message_bytes,
            stop: &stop,
        },
    );
    let regions = crate::region::start(
        &settings.region,
        RegionDeps {
            clock: &clock,
            redis: &settings.redis,
            resilience: &settings.resilience,
            manual,
            background: bg.reborrow(),
        },
    )
    .await;
    if let Some(m) = &metrics {
        let (regions, config) = (regions.clone(), config.clone());
        m.set_regions(Arc::new(move || regions.report(&config)));
    }
    let limiter = RateLimiter::with_stats(stores.store, clock.clone(), limiter_options, sink)
        .with_regions(regions.shares.clone())
        .with_fallback(fallback)
        .with_random(parts::random(settings))
        .with_overrides(policy.overrides.clone())
        .with_observers(observers);
    let service = Arc::new(Service {
        limiter,
        config: config.clone(),
    });
    let admin = AdminState {
        policy: policy.policy,
        tokens: policy.tokens,
        reloading: reloading.clone(),
        insight: Some(insight.insight),
        explainer: Some(explainer),
        regions: Some(regions.clone()),
    };
    let routes = serve::Routes {
        service,
        health: health.clone(),
        health_server,
        rlqs,
        tls: tls.clone(),
        metrics: metrics.clone(),
        config: config.clone(),
        manual_clock: manual_clock.clone(),
        overrides: policy.overrides,
        admin,
        regions: regions.clone(),
    };
    let bound = serve::start(settings, routes, &mut bg).await?;
    if let Some(m) = stores.memory {
        bg.spawn(sweep_expired(m, clock, bg.stopped()));
    }
    if let Some(st) = server_time {
        bg.spawn(st.keep_in_sync(bg.stopped()));
    }
    // Over xDS the management server pushes every change: no files to watch.
    let from_files = settings.config_type == ConfigType::File;
    let watch = WatchOptions::with_poll(settings.config_poll_interval);
    let files = from_files.then_some(&reloading);
    tasks::spawn_watchers(&mut bg, files, tls, watch);
    bg.spawn(watch_store_health(health.clone(), store, bg.stopped()));
    banner::Banner::of(settings, &bound, &config).log();
    Ok(Running {
        grpc_addr: bound.grpc_addr,
        grpc_uds: bound.grpc_uds,
        http_addr: bound.http_addr,
        debug_addr: bound.debug_addr,
        admin_addr: bound
            .admin_addr
            .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        config,
        health,
        manual_clock,
        metrics_addr: bound.metrics_addr,
        metrics,
        regions,
        reloading,
        from_files,
        shutdown,
        tasks,
        drain_timeout: settings.drain_timeout,
        shutdown_delay: settings.shutdown_delay,
        leases,
    })
}
