//! Whether the admin listener (`ADMIN_HOST:ADMIN_PORT`) is opened at all. It serves the admin API
//! and the status page, both behind a bearer token; with no token configured and loopback peers
//! not trusted, every request there would be refused, so the port is left closed unless
//! `ADMIN_PORT` (or `--admin-port`) asks for it.

use crate::settings::Settings;

/// Whether to open the admin listener: when something on it can be served (an admin token is
/// configured, or loopback peers may read the status page), or when `ADMIN_PORT` was asked for.
/// Otherwise every request there would be refused, and a second instance on the same host would
/// fail to start for a port it does not use.
pub(super) fn served(settings: &Settings, tokens: usize) -> bool {
    let served = tokens > 0 || settings.admin.trust_loopback || settings.admin_port_set;
    if !served {
        tracing::info!(
            "admin listener not opened: no ADMIN_TOKEN, ADMIN_TOKEN_FILE or ADMIN_TOKENS_FILE, ADMIN_TRUST_LOOPBACK \
             off and no ADMIN_PORT"
        );
    }
    served
}
