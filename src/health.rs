//! Service health: the AND of its components, served on `/healthcheck` and as gRPC `grpc.health.v1`
//! status of the service `ratelimit` (`docs/design/contract.md#health`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::store::Store;

/// The gRPC health service name the Go service registers.
pub const SERVICE_NAME: &str = "ratelimit";

/// Health components and the gRPC reporter that mirrors them.
#[derive(Debug)]
pub struct Health {
    draining: AtomicBool,
    // `None` unless HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: then healthy only with ≥ 1 domain.
    config_loaded: Option<AtomicBool>,
    // The policy database component: false while it is enabled but cannot be opened (the
    // stored overrides and rules are then not, or only from the last good copy, enforced).
    policy_db_down: AtomicBool,
    store: Arc<dyn Store>,
    reporter: HealthReporter,
}

impl Health {
    /// Health over `store`; `require_config` adds the "at least one domain loaded" component.
    pub fn new(store: Arc<dyn Store>, require_config: bool, reporter: HealthReporter) -> Health {
        Health {
            draining: AtomicBool::new(false),
            config_loaded: require_config.then(|| AtomicBool::new(false)),
            policy_db_down: AtomicBool::new(false),
            store,
            reporter,
        }
    }

    /// True when every component is healthy.
    pub fn is_healthy(&self) -> bool {
        !self.draining.load(Ordering::SeqCst)
            && self
                .config_loaded
                .as_ref()
                .is_none_or(|c| c.load(Ordering::SeqCst))
            && self.policy_db_ready()
            && self.store.is_healthy()
    }

    /// The `policy_db` component: false while the policy database cannot be opened.
    pub fn policy_db_ready(&self) -> bool {
        !self.policy_db_down.load(Ordering::SeqCst)
    }

    /// Reports whether the policy database is open (`false` makes the service not ready).
    pub async fn set_policy_db_ready(&self, ready: bool) {
        self.policy_db_down.store(!ready, Ordering::SeqCst);
        self.publish().await;
    }

    /// Marks the service as shutting down: unhealthy from now on. gRPC `Watch` streams receive
    /// NOT_SERVING and then end: an open stream would otherwise hold the drain until its timeout,
    /// since a graceful gRPC shutdown waits for every stream.
    pub async fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.reporter
            .set_service_status(SERVICE_NAME, ServingStatus::NotServing)
            .await;
        self.reporter
            .clone()
            .clear_service_status(SERVICE_NAME)
            .await;
    }

    /// Reports how many domains the latest successful load had.
    pub async fn set_domains_loaded(&self, domains: usize) {
        if let Some(c) = &self.config_loaded {
            c.store(domains > 0, Ordering::SeqCst);
        }
        self.publish().await;
    }

    /// Pushes the current state to gRPC health watchers (not once draining: see `set_draining`).
    pub async fn publish(&self) {
        if self.draining.load(Ordering::SeqCst) {
            return;
        }
        let status = if self.is_healthy() {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        self.reporter.set_service_status(SERVICE_NAME, status).await;
    }
}
