//! The startup banner: one line once every port is open, with what an operator checks
//! first — the version, each listener's address, the store and its target, where the
//! configuration comes from and how many domains it loaded. Its message stays
//! `ratelimitd listening` and its address fields keep their names (`grpc_addr`, `http_addr`,
//! `debug_addr`, `admin_addr`), which scripts and the tests read. It is logged at `warn`, the
//! default level, as the Go service logs its "Listening for …" lines: the first thing an operator
//! sees is what is running, not the first warning.

use super::serve::Bound;
use crate::reload::ConfigHandle;
use crate::reload::ConfigType;
use crate::settings::Settings;
use crate::store::Backend;

/// What the banner reports, gathered by `start`.
pub(super) struct Banner<'a> {
    settings: &'a Settings,
    bound: &'a Bound,
    domains: usize,
}

impl Banner<'_> {
    /// The banner of a service started from `settings`, listening where `bound` says, with
    /// `config` loaded.
    pub(super) fn of<'a>(
        settings: &'a Settings,
        bound: &'a Bound,
        config: &ConfigHandle,
    ) -> Banner<'a> {
        let domains = config.snapshot().map_or(0, |s| s.config.domain_count());
        Banner {
            settings,
            bound,
            domains,
        }
    }

    /// Logs the line.
    pub(super) fn log(&self) {
        let (s, b) = (self.settings, self.bound);
        let grpc = match &b.grpc_uds {
            Some(path) => format!("unix:{}", path.display()),
            None => b.grpc_addr.to_string(),
        };
        let off = || "off".to_string();
        let admin = b.admin_addr.map_or_else(off, |a| a.to_string());
        let metrics = b.metrics_addr.map_or_else(off, |a| a.to_string());
        let (backend, store) = match s.backend {
            Backend::Memory => ("memory", "embedded".to_string()),
            Backend::Redis => ("redis", super::parts::store_target(s)),
            Backend::Memcache => ("memcache", super::parts::store_target(s)),
            Backend::Dynamodb => ("dynamodb", super::parts::store_target(s)),
        };
        tracing::warn!(
            version = env!("CARGO_PKG_VERSION"),
            grpc_addr = %grpc,
            http_addr = %b.http_addr,
            debug_addr = %b.debug_addr,
            admin_addr = %admin,
            metrics_addr = %metrics,
            backend,
            store = %store,
            config = %config_source(s),
            domains = self.domains,
            "ratelimitd listening"
        );
    }
}

/// Where the configuration comes from, as the settings say.
fn config_source(s: &Settings) -> String {
    if s.config_type == ConfigType::GrpcXdsSotw {
        return format!("xDS {}", s.xds.server_url);
    }
    match &s.config_path {
        Some(p) => p.display().to_string(),
        None => {
            let dir = s.runtime_root.join(&s.runtime_subdirectory);
            match s.runtime_watch_root {
                true => format!("{} ({}.*)", dir.display(), s.runtime_appdirectory),
                false => dir.join(&s.runtime_appdirectory).display().to_string(),
            }
        }
    }
}
