//! The gRPC transport: the port's connections from the accept to the drain, without tonic's or
//! hyper's server in between. One entry point, [`serve`], takes a bound socket ([`Listener`]),
//! what the port answers ([`Services`]), how it holds its connections ([`Options`]) and the
//! future that says when to stop; the composition root binds the socket, builds the services and
//! the options from the settings, and runs it.
//!
//! Inside, from the socket to a call: [`listen`] accepts connections under the cap and the
//! timeouts (TLS handshakes among them) and hands them on, writes going through [`coalesce`];
//! [`conn`] runs h2's HTTP/2 server on each (GOAWAY at the connection's age and at shutdown);
//! [`stream`] answers each call on a task of its own, marked in flight by [`idle`]. The files
//! import one way only: `coalesce` and `options` name none of the others, then `listen`, `idle`,
//! `stream` and `conn` each name only those before them.

mod coalesce;
mod conn;
mod idle;
mod listen;
mod options;
mod stream;

use std::future::Future;

use tokio::sync::mpsc;

pub use coalesce::Coalesce;
pub use conn::settings as h2_settings;
pub(crate) use listen::Listener;
pub(crate) use options::Options;
pub(crate) use stream::Services;

/// Serves `services` on the connections `listener` accepts, held as `options` says, until
/// `shutdown` resolves; then takes no new connection (the socket is closed), sends every open one
/// a GOAWAY and returns once all of them have finished their calls.
pub(crate) async fn serve(
    listener: Listener,
    services: Services,
    options: Options,
    shutdown: impl Future<Output = ()>,
) {
    let (tx, rx) = mpsc::channel(64);
    // Ends when `conn::serve` drops the receiver at shutdown, which also closes the listener.
    tokio::spawn(listen::accept_loop(listener, options, tx));
    conn::serve(rx, services, shutdown).await;
}
