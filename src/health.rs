//! Service health: readiness is the AND of its components, served on `/readyz` and `/healthcheck`
//! (Go's endpoint) and as the gRPC `grpc.health.v1` status of the service `ratelimit`; each
//! unready answer says which components are down ([`Health::not_ready`]). Liveness — the process
//! serves requests — depends on none of them, so a Redis outage never restarts a pod: `/livez`
//! and the gRPC overall status (service `""`) stay up (`docs/operations.md#health`).

mod wiring;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use ratelimitd_core::store::Store;

pub(crate) use wiring::{HealthDeps, HealthHandle, HealthOptions, start};

/// The gRPC health service name the Go service registers.
pub(crate) const SERVICE_NAME: &str = "ratelimit";

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
    // What the store is (`REDIS_URL=… with REDIS_SOCKET_TYPE=…`), for the "store down" reason.
    store_target: String,
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
            store_target: String::new(),
            reporter,
        }
    }

    /// Names the store's target in the "store down" reason.
    pub fn with_store_target(mut self, target: String) -> Health {
        self.store_target = target;
        self
    }

    /// Why the service is not ready, one line per component that is down (empty when ready).
    pub fn not_ready(&self) -> Vec<String> {
        let mut why = Vec::new();
        if self.draining.load(Ordering::SeqCst) {
            why.push("draining: shutting down, no longer taking new work".to_string());
        }
        if let Some(c) = &self.config_loaded
            && !c.load(Ordering::SeqCst)
        {
            why.push(
                "config: no domain loaded (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED=true)".into(),
            );
        }
        if !self.policy_db_ready() {
            why.push("policy_db: the policy database cannot be opened".into());
        }
        if !self.store.is_healthy() {
            why.push(match self.store_target.as_str() {
                "" => "store: not answering".to_string(),
                target if target.starts_with("DYNAMODB_") => {
                    format!("store: DynamoDB not answering ({target})")
                }
                target => format!("store: Redis not answering ({target})"),
            });
        }
        why
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
    /// `NOT_SERVING` and then end: an open stream would otherwise hold the drain until its timeout,
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
