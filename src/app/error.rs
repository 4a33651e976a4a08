//! Why the service could not start: each setup step's error, with what and where.

use crate::grpc::tls::TlsError;
use crate::xds::XdsError;
use ratelimitd_core::store::StoreError;

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A listener could not be bound.
    #[error(
        "cannot listen on {what} address {addr} (set by {}): {source}{}",
        setting_of(what),
        taken_hint(what, source)
    )]
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
    /// The gRPC TLS files are not a usable configuration.
    #[error("gRPC TLS: {0}")]
    Tls(#[from] TlsError),
    /// The xDS client settings are not usable.
    #[error(transparent)]
    Xds(#[from] XdsError),
    /// The configuration source yielded no domain and nothing allows an empty start.
    #[error("{0}")]
    EmptyConfig(String),
    /// The fleet gossip could not start (`FLEET_BIND`).
    #[error(transparent)]
    Fleet(#[from] crate::fleet::FleetError),
    /// `ADMIN_TOKEN_FILE` cannot be used.
    #[error(transparent)]
    AdminTokens(crate::policy::token_file::TokenError),
}

/// The settings (and flag) that choose a listener's address.
fn setting_of(what: &str) -> &'static str {
    match what {
        "gRPC" => "GRPC_HOST / GRPC_PORT, --grpc-port, or GRPC_UDS",
        "HTTP" => "HOST / PORT, --port",
        "debug" => "DEBUG_HOST / DEBUG_PORT, --debug-port",
        "admin" => "ADMIN_HOST / ADMIN_PORT, --admin-port",
        _ => "its address setting",
    }
}

/// For a port another process holds: what to do about it.
fn taken_hint(what: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            " — another process (another ratelimitd on this host?) already listens there; give \
             this instance a free port with {}",
            setting_of(what)
        ),
        _ => String::new(),
    }
}

/// `Error: <error>`, then each cause (its `source` chain), laid out as anyhow lays them out but
/// without a backtrace: what `main` prints when the service cannot start.
pub fn report(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = format!("Error: {e}");
    let causes: Vec<String> = std::iter::successors(e.source(), |c| c.source())
        .map(ToString::to_string)
        .collect();
    if !causes.is_empty() {
        out.push_str("\n\nCaused by:");
    }
    for (i, cause) in causes.iter().enumerate() {
        // Numbered when there are several; a cause's later lines align with its first.
        let label = match causes.len() {
            1 => String::new(),
            _ => format!("{i}: "),
        };
        let indent = " ".repeat(label.len());
        for (n, line) in cause.lines().enumerate() {
            let lead = if n == 0 { &label } else { &indent };
            out.push_str("\n    ");
            out.push_str(lead);
            out.push_str(line);
        }
    }
    out
}
