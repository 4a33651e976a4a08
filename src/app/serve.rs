//! The listeners: gRPC (`ShouldRateLimit`, health, RLQS), HTTP (`/json`, `/check`,
//! `/healthcheck`), debug, admin (when it is opened) and Prometheus. All are bound before any is
//! served, so a port that cannot be bound stops startup with nothing half-open.
//!
//! The gRPC port's transport is `crate::grpc::server`: this file binds its socket, builds what it
//! serves (`ShouldRateLimit` answered in front of tonic's router, health, RLQS) and its options
//! from the settings, and runs it until shutdown.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::service::Routes as TonicRoutes;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::HealthService;

use super::AppError;
use super::admin_listener;
use super::tasks::serve_http;
use crate::background::Background;
use crate::grpc::bounded::Bounded;
use crate::grpc::server::{self as grpc_server, Listener as GrpcListener};
use crate::grpc::tls::ReloadingTls;
use crate::grpc::{RateLimitServiceServer, RlsService};
use crate::health::Health;
use crate::http::admin::AdminState;
use crate::metrics::Metrics;
use crate::policy::Overrides;
use crate::reload::ConfigHandle;
use crate::rlqs::{RateLimitQuotaServiceServer, RlqsService};
use crate::service::Service;
use crate::settings::Settings;
use ratelimitd_core::clock::ManualClock;

/// What the listeners serve.
pub(super) struct Routes {
    /// `ShouldRateLimit`, `/json` and `/check`.
    pub(super) service: Arc<Service>,
    /// Health components, for `/healthcheck`.
    pub(super) health: Arc<Health>,
    /// gRPC health, mirrored from [`Routes::health`].
    pub(super) health_server: HealthServer<HealthService>,
    /// RLQS, when it is served.
    pub(super) rlqs: Option<RateLimitQuotaServiceServer<RlqsService>>,
    /// The gRPC port's certificates (`GRPC_SERVER_USE_TLS`).
    pub(super) tls: Option<Arc<ReloadingTls>>,
    /// Counters (`None` with `DISABLE_STATS`).
    pub(super) metrics: Option<Arc<Metrics>>,
    /// The live configuration, for the debug endpoints.
    pub(super) config: Arc<ConfigHandle>,
    /// The manual clock the debug port moves (tests).
    pub(super) manual_clock: Option<Arc<ManualClock>>,
    /// The stored overrides, for the debug endpoints.
    pub(super) overrides: Arc<Overrides>,
    /// The admin surface's state.
    pub(super) admin: AdminState,
    /// The regional shares and their sync, for `/rlconfig`.
    pub(super) regions: crate::region::Regional,
}

/// The listeners' sockets, bound before anything serves on them.
struct Sockets {
    /// gRPC's, on TCP or a unix socket.
    grpc: GrpcListener,
    /// `/json`, `/healthcheck` and `/check`.
    http: TcpListener,
    /// The debug port.
    debug: TcpListener,
    /// The admin surface, when it is served.
    admin: Option<TcpListener>,
}

impl Sockets {
    /// Binds every listener's socket; `admin_tokens` decides whether the admin one is opened.
    async fn bind(settings: &Settings, admin_tokens: usize) -> Result<Sockets, AppError> {
        Ok(Sockets {
            grpc: bind_grpc(settings).await?,
            http: bind("HTTP", &settings.host, settings.port).await?,
            debug: bind("debug", &settings.debug_host, settings.debug_port).await?,
            admin: match admin_listener::served(settings, admin_tokens) {
                true => Some(bind("admin", &settings.admin_host, settings.admin_port).await?),
                false => None,
            },
        })
    }

    /// Where each socket ended up (the metrics listener is not among them).
    fn bound(&self) -> Result<Bound, AppError> {
        let (grpc_addr, grpc_uds) = match &self.grpc {
            GrpcListener::Tcp(l) => (local_addr(l, "gRPC")?, None),
            GrpcListener::Unix(_, path) => {
                (SocketAddr::from(([0, 0, 0, 0], 0)), Some(path.clone()))
            }
        };
        let admin_addr = match &self.admin {
            Some(l) => Some(local_addr(l, "admin")?),
            None => None,
        };
        Ok(Bound {
            grpc_addr,
            grpc_uds,
            http_addr: local_addr(&self.http, "HTTP")?,
            debug_addr: local_addr(&self.debug, "debug")?,
            admin_addr,
            metrics_addr: None,
        })
    }
}

/// Where each listener ended up.
pub(super) struct Bound {
    /// gRPC's TCP address (`0.0.0.0:0` on a unix socket).
    pub(super) grpc_addr: SocketAddr,
    /// gRPC's unix socket (`GRPC_UDS`).
    pub(super) grpc_uds: Option<PathBuf>,
    pub(super) http_addr: SocketAddr,
    pub(super) debug_addr: SocketAddr,
    /// `None` when the admin listener is not opened.
    pub(super) admin_addr: Option<SocketAddr>,
    /// Prometheus (`USE_PROMETHEUS`).
    pub(super) metrics_addr: Option<SocketAddr>,
}

async fn bind(what: &'static str, host: &str, port: u16) -> Result<TcpListener, AppError> {
    let addr = format!("{host}:{port}");
    TcpListener::bind(&addr)
        .await
        .map_err(|source| AppError::Bind { what, addr, source })
}

/// Binds the gRPC socket the settings ask for: `GRPC_HOST:GRPC_PORT`, or the unix socket of
/// `GRPC_UDS`.
async fn bind_grpc(s: &Settings) -> Result<GrpcListener, AppError> {
    let Some(path) = &s.grpc.uds else {
        return Ok(GrpcListener::Tcp(
            bind("gRPC", &s.grpc_host, s.grpc_port).await?,
        ));
    };
    GrpcListener::unix(path).map_err(|source| AppError::Bind {
        what: "gRPC",
        addr: path.display().to_string(),
        source,
    })
}

/// What the gRPC port serves: `ShouldRateLimit` (answered in front of the router, its message
/// read under the caps), gRPC health and RLQS.
fn grpc_services(
    settings: &Settings,
    service: Arc<Service>,
    metrics: Option<Arc<Metrics>>,
    health_server: HealthServer<HealthService>,
    rlqs: Option<RateLimitQuotaServiceServer<RlqsService>>,
) -> grpc_server::Services {
    let rls = RlsService::new(service, metrics)
        .with_standard_headers(settings.edges.grpc_standard_headers);
    let rls_server = RateLimitServiceServer::new(rls.clone())
        .max_decoding_message_size(settings.grpc.max_recv_message_bytes);
    let should_rate_limit = Bounded::new(
        rls_server.clone(),
        settings.limits,
        settings.grpc.max_recv_message_bytes,
    )
    .answered_by(rls);
    let mut routes = TonicRoutes::builder();
    routes
        .add_service(health_server)
        // The port answers `ShouldRateLimit`'s exact path itself (through `Bounded`); the
        // router gets the service's other paths, which tonic answers `UNIMPLEMENTED`.
        .add_service(rls_server);
    if let Some(rlqs) = rlqs {
        routes.add_service(rlqs);
    }
    grpc_server::Services {
        should_rate_limit,
        router: routes.routes().prepare(),
    }
}

/// How the gRPC port holds its connections, from the settings.
fn grpc_options(settings: &Settings, tls: Option<Arc<ReloadingTls>>) -> grpc_server::Options {
    grpc_server::Options {
        tls,
        max_connection_age: settings.grpc.max_connection_age,
        max_connection_age_grace: settings.grpc.max_connection_age_grace,
        limits: settings.listeners.grpc,
        stream_connections: settings.listeners.grpc_stream_connections,
    }
}

fn local_addr(l: &TcpListener, what: &'static str) -> Result<SocketAddr, AppError> {
    l.local_addr().map_err(|source| AppError::Bind {
        what,
        addr: "bound socket".into(),
        source,
    })
}

/// Binds every listener, then serves each until shutdown.
pub(super) async fn start(
    settings: &Settings,
    routes: Routes,
    bg: &mut Background<'_>,
) -> Result<Bound, AppError> {
    let sockets = Sockets::bind(settings, routes.admin.tokens.len()).await?;
    let mut bound = sockets.bound()?;
    let Sockets {
        grpc,
        http,
        debug,
        admin: admin_socket,
    } = sockets;
    let Routes {
        service,
        health,
        health_server,
        rlqs,
        tls,
        metrics,
        config,
        manual_clock,
        overrides,
        admin,
        regions,
    } = routes;

    let services = grpc_services(
        settings,
        service.clone(),
        metrics.clone(),
        health_server,
        rlqs,
    );
    let options = grpc_options(settings, tls);
    bg.tasks
        .spawn(grpc_server::serve(grpc, services, options, bg.stopped()));
    let http_router = crate::http::router(crate::http::HttpState {
        service,
        health,
        edges: Arc::new(settings.edges.clone()),
        metrics: metrics.clone(),
        caps: settings.limits,
    });
    let limits = settings.listeners.http;
    serve_http(bg.tasks, "HTTP", http, limits, http_router, bg.stopped());
    let debug_router = crate::http::debug::router(crate::http::debug::DebugState {
        config,
        manual_clock,
        overrides,
        tokens: admin.tokens.clone(),
        regions,
    });
    let limits = settings.listeners.debug;
    serve_http(bg.tasks, "debug", debug, limits, debug_router, bg.stopped());
    if let Some(listener) = admin_socket {
        let router = crate::http::admin::router(admin, &settings.admin, &settings.admin_host);
        let limits = settings.listeners.admin;
        serve_http(bg.tasks, "admin", listener, limits, router, bg.stopped());
    }
    bound.metrics_addr = match &metrics {
        Some(m) => {
            let (obs, limits) = (&settings.obs, settings.listeners.prometheus);
            crate::metrics::sinks::start(obs, limits, m, bg.tasks, bg.stopped()).await?
        }
        None => None,
    };
    Ok(bound)
}
