//! How the `REDIS_*` settings become what the Redis client connects with: `host:port` (or a Unix
//! socket) as a plain or TLS address, the `REDIS_AUTH` user and password, and the CA and client
//! certificate files. Kept apart from `conn` so that file is about connection kinds only.

use redis::{
    Client, ClientTlsConfig, ConnectionAddr, RedisConnectionInfo, RedisError, TlsCertificates,
};

use super::{RedisKind, RedisSettings, RedisTls};

/// Splits `REDIS_AUTH` (`user:password` or a bare password) into `(user, password)`; `None`
/// when it is empty. Every connection kind reads it this way.
pub(super) fn split_auth(auth: &str) -> Option<(Option<&str>, &str)> {
    match auth.split_once(':') {
        _ if auth.is_empty() => None,
        Some((user, pass)) => Some((Some(user), pass)),
        None => Some((None, auth)),
    }
}

/// `info` with the credentials of `REDIS_AUTH`.
pub(super) fn auth(info: RedisConnectionInfo, auth: &str) -> RedisConnectionInfo {
    match split_auth(auth) {
        None => info,
        Some((Some(user), pass)) => info.set_username(user).set_password(pass),
        Some((None, pass)) => info.set_password(pass),
    }
}

pub(super) fn host_port(addr: &str) -> Result<(String, u16), RedisError> {
    let bad = || {
        RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "expected host:port",
            addr.to_string(),
        ))
    };
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    Ok((
        host.trim_matches(['[', ']']).to_string(),
        port.parse().map_err(|_| bad())?,
    ))
}

pub(super) fn address(addr: &str, s: &RedisSettings) -> Result<ConnectionAddr, RedisError> {
    if s.unix_socket && s.kind == RedisKind::Single {
        return Ok(ConnectionAddr::Unix(addr.into()));
    }
    let (host, port) = host_port(addr)?;
    Ok(if s.tls {
        // `insecure` would switch off every check; skipping only the hostname check is set on
        // the client below, so the chain is still verified (as the Go setting does).
        ConnectionAddr::TcpTls {
            host,
            port,
            insecure: false,
            tls_params: None,
        }
    } else {
        ConnectionAddr::Tcp(host, port)
    })
}

pub(super) fn certificates(tls: &RedisTls) -> Result<TlsCertificates, RedisError> {
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| {
            RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "cannot read TLS file",
                format!("{}: {e}", p.display()),
            ))
        })
    };
    let client_tls = match (&tls.client_cert, &tls.client_key) {
        (Some(c), Some(k)) => Some(ClientTlsConfig {
            client_cert: read(c)?,
            client_key: read(k)?,
        }),
        _ => None,
    };
    let root_cert = tls.ca_cert.as_deref().map(read).transpose()?;
    Ok(TlsCertificates {
        client_tls,
        root_cert,
    })
}

/// `client` again, with the certificate's name no longer compared with the host it connects to.
/// The chain is still verified against the CA (`REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`); the
/// crate's `insecure` switch, which would accept any certificate, is never used.
pub(super) fn without_hostname_check(client: &Client) -> Result<Client, RedisError> {
    let info = client.get_connection_info().clone();
    let mut addr = info.addr().clone();
    addr.set_danger_accept_invalid_hostnames(true);
    Client::open(info.set_addr(addr))
}

pub(super) fn has_tls_files(tls: &RedisTls) -> bool {
    tls.ca_cert.is_some() || tls.client_cert.is_some()
}
