//! How a Redis target is named in logs and errors: the settings that chose it (`REDIS_URL=… with
//! REDIS_SOCKET_TYPE=…`), and for a failed connection, a hint at the likely mistake — a
//! `host:port` dialled as a Unix socket (Go's default socket type is `unix`), or a `redis://` URL
//! where the Go service's format is a bare address.

use redis::RedisError;

use super::{RedisKind, RedisSettings};

/// One Redis target and the prefix of the settings that describe it (`REDIS_` or
/// `REDIS_PERSECOND_`).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// `REDIS_` or `REDIS_PERSECOND_`.
    pub prefix: &'static str,
    /// The settings read under that prefix.
    pub settings: RedisSettings,
}

impl Target {
    /// `REDIS_URL=127.0.0.1:6379 with REDIS_SOCKET_TYPE=tcp` (and the kind when not single, TLS
    /// when on). Credentials written into the URL are masked.
    pub(crate) fn describe(&self) -> String {
        let (p, s) = (self.prefix, &self.settings);
        let socket = if s.unix_socket { "unix" } else { "tcp" };
        let mut text = format!("{p}URL={} with {p}SOCKET_TYPE={socket}", masked(&s.url));
        match s.kind {
            RedisKind::Single => {}
            RedisKind::Sentinel => text.push_str(&format!(", {p}TYPE=sentinel")),
            RedisKind::Cluster => text.push_str(&format!(", {p}TYPE=cluster")),
        }
        if s.tls {
            text.push_str(&format!(", {p}TLS=true"));
        }
        text
    }

    /// `e` with the target named and, when the settings look mistaken, the likely fix.
    pub(crate) fn explain(&self, e: &RedisError) -> String {
        let mut text = format!("{}: {e}", self.describe());
        if let Some(hint) = self.hint().or_else(|| self.password_hint(e)) {
            text.push_str(" (");
            text.push_str(&hint);
            text.push(')');
        }
        text
    }

    /// Which password to check when one was refused through Sentinel.
    fn password_hint(&self, e: &RedisError) -> Option<String> {
        let p = self.prefix;
        match e.detail() {
            Some(super::conn::SENTINELS_REFUSED) => Some(format!(
                "{p}SENTINEL_AUTH is the sentinels' password; check it"
            )),
            Some(super::conn::PRIMARY_REFUSED) => Some(format!(
                "{p}AUTH is the primary's password; check it (the sentinels accepted \
                 {p}SENTINEL_AUTH)"
            )),
            _ => None,
        }
    }

    /// The likely mistake in these settings, if one shows.
    pub(crate) fn hint(&self) -> Option<String> {
        let (p, s) = (self.prefix, &self.settings);
        let url = s.url.trim();
        if url.contains("://") {
            return Some(format!(
                "{p}URL takes a bare host:port (or a socket path), as the Go service does, not a \
                 URL: write {p}URL={}{}",
                bare(url),
                if url.starts_with("rediss://") {
                    format!(" with {p}TLS=true")
                } else {
                    String::new()
                }
            ));
        }
        let single_unix = s.unix_socket && s.kind == RedisKind::Single;
        if single_unix && !url.starts_with('/') && url.rsplit_once(':').is_some() {
            return Some(format!(
                "'{url}' looks like host:port but {p}SOCKET_TYPE is unix (the default): set \
                 {p}SOCKET_TYPE=tcp"
            ));
        }
        None
    }
}

/// `url` without a `user:password@` part.
fn masked(url: &str) -> String {
    match url.rsplit_once('@') {
        Some((before, after)) => match before.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://***@{after}"),
            None => format!("***@{after}"),
        },
        None => url.to_string(),
    }
}

/// The `host:port` inside a `redis://` URL (credentials and database dropped).
fn bare(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn target(url: &str, unix: bool) -> Target {
        Target {
            prefix: "REDIS_",
            settings: RedisSettings {
                unix_socket: unix,
                kind: RedisKind::Single,
                url: url.into(),
                pool_size: 1,
                auth: crate::secret::Secret(String::new()),
                sentinel_auth: crate::secret::Secret(String::new()),
                tls: false,
                connect_timeout: Duration::from_secs(1),
            },
        }
    }

    #[test]
    fn host_port_over_a_unix_socket_is_named_with_the_fix() {
        let t = target("127.0.0.1:6379", true);
        assert_eq!(
            t.describe(),
            "REDIS_URL=127.0.0.1:6379 with REDIS_SOCKET_TYPE=unix"
        );
        assert!(t.hint().unwrap().contains("set REDIS_SOCKET_TYPE=tcp"));
        assert_eq!(target("/run/redis.sock", true).hint(), None);
        assert_eq!(target("127.0.0.1:6379", false).hint(), None);
    }

    #[test]
    fn a_url_is_refused_with_its_bare_address_and_no_password() {
        let t = target("rediss://app:s3cret@cache:6380/0", false);
        let hint = t.hint().unwrap();
        assert!(
            hint.contains("REDIS_URL=cache:6380 with REDIS_TLS=true"),
            "{hint}"
        );
        assert!(!t.describe().contains("s3cret"), "{}", t.describe());
        assert!(!hint.contains("s3cret"), "{hint}");
    }
}
