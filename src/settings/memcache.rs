//! Memcached settings (`MEMCACHE_*`), with the Go service's names and defaults. The servers come
//! from `MEMCACHE_HOST_PORT`; `MEMCACHE_SRV` (DNS SRV discovery) and `MEMCACHE_TLS*` are refused
//! at startup rather than accepted and ignored (see docs/migration.md for why).

use std::time::Duration;

use super::{SettingsError, Vars, parse};

pub(crate) use crate::store::memcache::MemcacheSettings;

/// A setting that is refused whenever it is set to anything but `unset_like`.
fn refuse(v: &Vars, name: &str, unset_like: &[&str], why: &str) {
    let _ = v.parse(name, (), |s| {
        if unset_like.contains(&s) {
            Ok(())
        } else {
            Err(why.to_string())
        }
    });
}

/// Reads the memcached settings; `used` (the backend is memcache) makes an empty server list an
/// error naming `MEMCACHE_HOST_PORT`.
pub(super) fn from_vars(v: &Vars, used: bool) -> Result<MemcacheSettings, SettingsError> {
    let d = MemcacheSettings::default();
    let servers = v.parse("MEMCACHE_HOST_PORT", Vec::new(), parse::host_ports)?;
    refuse(
        v,
        "MEMCACHE_SRV",
        &[""],
        "SRV discovery is not supported (no DNS SRV resolver is built in); list the servers in MEMCACHE_HOST_PORT",
    );
    // Without MEMCACHE_SRV the refresh interval has no effect, in Go as here; it is still parsed.
    v.parse("MEMCACHE_SRV_REFRESH", Duration::ZERO, parse::go_duration)?;
    let no_tls =
        "memcached over TLS is not supported; use plaintext memcached on a private network";
    refuse(
        v,
        "MEMCACHE_TLS",
        &["", "0", "f", "F", "false", "FALSE", "False"],
        no_tls,
    );
    for name in [
        "MEMCACHE_TLS_CLIENT_CERT",
        "MEMCACHE_TLS_CLIENT_KEY",
        "MEMCACHE_TLS_CACERT",
    ] {
        refuse(v, name, &[""], no_tls);
    }
    refuse(
        v,
        "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
        &["", "0", "f", "F", "false", "FALSE", "False"],
        no_tls,
    );
    let uint = |min, max| move |s: &str| parse::uint_in(s, min, max);
    let max_idle_conns = v.parse("MEMCACHE_MAX_IDLE_CONNS", 2, uint(0, 1024))? as usize;
    let timeout = v.parse("MEMCACHE_TIMEOUT", d.timeout, |s| {
        parse::call_timeout(s, "memcached")
    })?;
    // memcached cannot read every key of a request and charge them in one step: refused, not
    // ignored.
    if used {
        v.refuse_stop_increment(
            "BACKEND_TYPE=memcache (memcached cannot read every key of a request and charge them in one atomic step)",
        );
    }
    if used && servers.is_empty() && v.get("MEMCACHE_SRV").is_none() {
        let (value, name) = v
            .get("MEMCACHE_HOST_PORT")
            .cloned()
            .unwrap_or_else(|| (String::new(), "MEMCACHE_HOST_PORT".into()));
        return Err(SettingsError {
            name,
            value,
            reason: "BACKEND_TYPE=memcache needs at least one host:port".into(),
            also: Vec::new(),
        });
    }
    Ok(MemcacheSettings {
        servers,
        max_idle_conns,
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;
    use crate::settings::tests::env;

    #[test]
    fn host_port_list_and_defaults() {
        let s = Settings::from_env(env(&[
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_HOST_PORT", "a:11211, b:11212"),
        ]))
        .unwrap();
        assert_eq!(s.memcache.servers, ["a:11211", "b:11212"]);
        assert_eq!(s.memcache.max_idle_conns, 2);
        assert_eq!(s.memcache.timeout, Duration::from_millis(500));
    }

    #[test]
    fn bad_or_unsupported_values_are_refused_by_name() {
        for (name, value, says) in [
            ("MEMCACHE_HOST_PORT", "nohost", "host:port"),
            ("MEMCACHE_SRV", "_mc._tcp.example", "SRV"),
            ("MEMCACHE_TLS", "true", "TLS"),
            ("MEMCACHE_TLS_CACERT", "/ca.pem", "TLS"),
            ("MEMCACHE_MAX_IDLE_CONNS", "-1", ""),
            ("MEMCACHE_TIMEOUT", "0s", "more than 0"),
            (
                "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
                "true",
                "memcache",
            ),
        ] {
            let e = Settings::from_env(env(&[
                ("BACKEND_TYPE", "memcache"),
                ("MEMCACHE_HOST_PORT", "127.0.0.1:11211"),
                (name, value),
            ]))
            .unwrap_err();
            assert_eq!(e.name, name, "{e}");
            assert!(e.reason.contains(says), "{e}");
        }
        let e = Settings::from_env(env(&[("BACKEND_TYPE", "memcache")])).unwrap_err();
        assert_eq!(e.name, "MEMCACHE_HOST_PORT", "{e}");
    }
}
