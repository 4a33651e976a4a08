//! The admin listener's front door, before any handler: the `Host` of every request must be one
//! of `ADMIN_ALLOWED_HOSTS` (loopback names by default), else 421 — a page on a rebinding DNS
//! name reaches the listener through an operator's browser or `kubectl port-forward` with its own
//! name in `Host`, and is refused whatever the peer. A loopback peer is marked [`TrustedPeer`]
//! only when `ADMIN_TRUST_LOOPBACK` is on; then it reads the console without the token.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::{AdminSettings, AllowedHosts, DEFAULT_ALLOWED_HOSTS, error};
use crate::listener::http::Peer;
use crate::policy::Tokens;

/// Marks a request from a loopback peer while `ADMIN_TRUST_LOOPBACK` is on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrustedPeer;

/// Refuses a request whose `Host` (or absolute-form authority) is not allowed; marks trusted
/// loopback peers.
pub(crate) async fn guard(
    State(access): State<Arc<AdminSettings>>,
    mut req: Request,
    next: Next,
) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            req.uri()
                .authority()
                .map(axum::http::uri::Authority::as_str)
        });
    if !host.is_some_and(|h| access.allowed_hosts.allows(h)) {
        let shown = host.map_or("none".to_string(), |h| format!("'{}'", h.escape_debug()));
        return error(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "Host {shown} is not a name of the admin listener; allowed: {} \
                 (ADMIN_ALLOWED_HOSTS)",
                access.allowed_hosts.describe()
            ),
        );
    }
    let loopback = req
        .extensions()
        .get::<Peer>()
        .is_some_and(|Peer(a)| a.ip().to_canonical().is_loopback());
    if access.trust_loopback && loopback {
        req.extensions_mut().insert(TrustedPeer);
    }
    next.run(req).await
}

/// Logs what protects the admin listener, once at startup; a setting that opens it more than the
/// default is a warning, so it shows at the default log level.
/// `host` is `ADMIN_HOST`: bound beyond loopback with only the default loopback names allowed,
/// every remote caller would get 421, which is worth saying before the first one does.
pub(crate) fn log_in_force(access: &AdminSettings, tokens: &Tokens, host: &str) {
    let hosts = access.allowed_hosts.describe();
    tracing::info!(
        allowed_hosts = %hosts,
        trust_loopback = access.trust_loopback,
        tokens = tokens.len(),
        "admin listener access"
    );
    if !is_loopback_bind(host) && hosts == DEFAULT_ALLOWED_HOSTS {
        tracing::warn!(
            admin_host = host,
            "the admin listener is bound beyond loopback but ADMIN_ALLOWED_HOSTS allows only \
             loopback names: remote callers get 421 until the names they use are added"
        );
    }
    if access.allowed_hosts == AllowedHosts::Any {
        tracing::warn!(
            "ADMIN_ALLOWED_HOSTS=*: the admin listener answers any Host name, so a DNS-rebinding \
             page can reach it through a browser on a host that can connect to it"
        );
    }
    if access.trust_loopback {
        tracing::warn!(
            "ADMIN_TRUST_LOOPBACK=true: any loopback peer (a sidecar, a proxy, a port-forward) \
             reads the console (hot keys, overrides, violations, key search) without the admin token"
        );
    }
}

/// True when `ADMIN_HOST` names a loopback address (`localhost`, `127.x.y.z`, `::1`).
fn is_loopback_bind(host: &str) -> bool {
    host == "localhost"
        || (host.trim_matches(['[', ']']).parse::<std::net::IpAddr>())
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_binds() {
        for host in ["localhost", "127.0.0.1", "127.0.0.2", "::1", "[::1]"] {
            assert!(super::is_loopback_bind(host), "{host}");
        }
        for host in ["0.0.0.0", "::", "10.0.0.7", "admin.internal"] {
            assert!(!super::is_loopback_bind(host), "{host}");
        }
    }
}
