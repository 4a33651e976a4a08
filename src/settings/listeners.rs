//! Connection caps and timeouts for every listener, so that clients which connect and then stay
//! silent (or idle) cannot hold file descriptors without bound. ratelimitd's own settings: the Go
//! service has none of these. The defaults are the listeners' own (`crate::listener`).

use std::time::Duration;

use super::{SettingsError, Vars, parse};

pub(crate) use crate::listener::{ConnLimits, Listeners};
use crate::listener::{
    DEFAULT_ADMIN_MAX_CONNECTIONS, DEFAULT_FIRST_BYTE_TIMEOUT, DEFAULT_GRPC_IDLE,
    DEFAULT_HTTP_IDLE, DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_READ_TIMEOUT,
    DEFAULT_STREAM_CONNECTIONS,
};

fn nonzero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

/// Reads the listener limits; caps must be at least 1, a timeout of 0 turns it off.
pub(super) fn from_vars(v: &Vars) -> Result<Listeners, SettingsError> {
    let cap = |name: &str, default: usize| {
        v.parse(name, default, |s| {
            parse::uint_in(s, 1, usize::MAX as u64).map(|n| n as usize)
        })
    };
    let duration =
        |name: &str, default: Duration| v.parse(name, default, parse::go_duration).map(nonzero);
    let first_byte_timeout = duration("CONNECTION_FIRST_BYTE_TIMEOUT", DEFAULT_FIRST_BYTE_TIMEOUT)?;
    let http_idle = duration("HTTP_IDLE_TIMEOUT", DEFAULT_HTTP_IDLE)?;
    let header_timeout = duration("HTTP_HEADER_READ_TIMEOUT", DEFAULT_REQUEST_READ_TIMEOUT)?;
    let body_timeout = duration("HTTP_BODY_TIMEOUT", DEFAULT_REQUEST_READ_TIMEOUT)?;
    let limits = |max_connections, idle_timeout| ConnLimits {
        max_connections,
        first_byte_timeout,
        idle_timeout,
        header_timeout,
        body_timeout,
    };
    // An HTTP listener's: its cap, and the HTTP idle timeout.
    let http = |name: &str, default| cap(name, default).map(|c| limits(c, http_idle));
    Ok(Listeners {
        grpc: ConnLimits {
            header_timeout: None,
            body_timeout: None,
            ..limits(
                cap("GRPC_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS)?,
                duration("GRPC_MAX_CONNECTION_IDLE", DEFAULT_GRPC_IDLE)?,
            )
        },
        http: http("HTTP_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS)?,
        debug: http("DEBUG_MAX_CONNECTIONS", DEFAULT_ADMIN_MAX_CONNECTIONS)?,
        prometheus: http("PROMETHEUS_MAX_CONNECTIONS", DEFAULT_ADMIN_MAX_CONNECTIONS)?,
        admin: http("ADMIN_MAX_CONNECTIONS", DEFAULT_ADMIN_MAX_CONNECTIONS)?,
        grpc_stream_connections: cap("GRPC_MAX_STREAM_CONNECTIONS", DEFAULT_STREAM_CONNECTIONS)?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::Settings;
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<Listeners, SettingsError> {
        let vars = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Settings::from_env(vars).map(|s| s.listeners)
    }

    #[test]
    fn defaults_bound_every_listener() {
        let l = env(&[]).unwrap();
        assert_eq!(l.grpc.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(l.debug.max_connections, DEFAULT_ADMIN_MAX_CONNECTIONS);
        assert_eq!(l.http.idle_timeout, Some(DEFAULT_HTTP_IDLE));
        assert_eq!(l.grpc.idle_timeout, Some(DEFAULT_GRPC_IDLE));
        for limits in [l.grpc, l.http, l.debug, l.prometheus, l.admin] {
            assert_eq!(limits.first_byte_timeout, Some(DEFAULT_FIRST_BYTE_TIMEOUT));
        }
        for limits in [l.http, l.debug, l.prometheus, l.admin] {
            assert_eq!(limits.header_timeout, Some(DEFAULT_REQUEST_READ_TIMEOUT));
            assert_eq!(limits.body_timeout, Some(DEFAULT_REQUEST_READ_TIMEOUT));
        }
        assert_eq!((l.grpc.header_timeout, l.grpc.body_timeout), (None, None));
        assert_eq!(l.grpc_stream_connections, DEFAULT_STREAM_CONNECTIONS);
    }

    #[test]
    fn zero_turns_a_timeout_off_but_not_a_cap() {
        let l = env(&[
            ("HTTP_IDLE_TIMEOUT", "0"),
            ("PROMETHEUS_MAX_CONNECTIONS", "3"),
        ])
        .unwrap();
        assert_eq!(
            (l.http.idle_timeout, l.prometheus.idle_timeout),
            (None, None)
        );
        assert_eq!(l.prometheus.max_connections, 3);
        let e = env(&[("GRPC_MAX_CONNECTIONS", "0")]).unwrap_err();
        assert_eq!(e.name, "GRPC_MAX_CONNECTIONS");
        let e = env(&[("CONNECTION_FIRST_BYTE_TIMEOUT", "10")]).unwrap_err();
        assert_eq!(e.name, "CONNECTION_FIRST_BYTE_TIMEOUT");
    }
}
