//! The `FLEET_*` variables, translated into the fleet mode's options ([`crate::fleet::FleetOptions`]).
//! The mode is off unless `FLEET_BIND` is set; it then needs `BACKEND_TYPE=memory` and a
//! `FLEET_SECRET` of at least 16 bytes: a fleet whose peers cannot authenticate each other would
//! let anyone who reaches the port inject counts, so it is refused rather than warned about.

use std::net::SocketAddr;
use std::time::Duration;

use super::{Backend, Secret, SettingsError, Vars, parse};
use crate::fleet::FleetOptions;

/// Shortest `FLEET_SECRET` accepted, in bytes.
pub(crate) const MIN_SECRET_BYTES: usize = 16;

/// A `host:port` socket address.
fn socket_addr(s: &str) -> Result<SocketAddr, String> {
    s.trim()
        .parse()
        .map_err(|_| "expected an IP address and port, e.g. 10.0.0.5:7946 or [::1]:7946".into())
}

/// A setting error not tied to one value's syntax.
fn refused(name: &str, value: &str, reason: impl Into<String>) -> SettingsError {
    SettingsError {
        name: name.into(),
        value: value.into(),
        reason: reason.into(),
        also: Vec::new(),
    }
}

/// Reads the fleet settings: `None` without `FLEET_BIND`.
pub(super) fn from_vars(v: &Vars, backend: Backend) -> Result<Option<FleetOptions>, SettingsError> {
    let bind = v.parse("FLEET_BIND", None, |s| match s.trim() {
        "" => Ok(None),
        s => socket_addr(s).map(Some),
    })?;
    let advertise = v.parse("FLEET_ADVERTISE", None, |s| socket_addr(s).map(Some))?;
    let peers = v.parse("FLEET_PEERS", Vec::new(), parse::host_ports)?;
    let secret = Secret(v.string("FLEET_SECRET", ""));
    let cluster = v.string("FLEET_CLUSTER", "ratelimitd");
    let interval = v.parse("FLEET_GOSSIP_INTERVAL", Duration::from_millis(200), |s| {
        parse::go_duration(s).and_then(|d| {
            if (Duration::from_millis(10)..=Duration::from_secs(60)).contains(&d) {
                Ok(d)
            } else {
                Err("expected a duration from 10ms to 60s".into())
            }
        })
    })?;
    let max_keys = v.parse("FLEET_MAX_KEYS", 1000, |s| parse::uint_in(s, 1, 100_000))? as usize;
    let forget_after = v.parse("FLEET_FORGET_AFTER", Duration::from_secs(600), |s| {
        parse::go_duration(s).and_then(|d| {
            if d >= Duration::from_secs(1) {
                Ok(d)
            } else {
                Err("expected a duration of at least 1s".into())
            }
        })
    })?;
    let Some(bind) = bind else {
        return Ok(None);
    };
    if backend != Backend::Memory {
        return Err(refused(
            "FLEET_BIND",
            &bind.to_string(),
            "the fleet mode shares the embedded store's counts; it needs BACKEND_TYPE=memory (Redis and memcached already share counts)",
        ));
    }
    if secret.0.len() < MIN_SECRET_BYTES {
        return Err(refused(
            "FLEET_SECRET",
            if secret.0.is_empty() {
                ""
            } else {
                "<redacted>"
            },
            format!(
                "FLEET_BIND is set, so FLEET_SECRET must be at least {MIN_SECRET_BYTES} bytes: \
                 every gossip message is authenticated with it, and without it anyone reaching \
                 the port could inject counts"
            ),
        ));
    }
    let advertise = advertise.unwrap_or(bind);
    if advertise.ip().is_unspecified() {
        return Err(refused(
            "FLEET_ADVERTISE",
            &advertise.to_string(),
            "peers cannot reach an unspecified address; set FLEET_ADVERTISE to this instance's reachable address",
        ));
    }
    Ok(Some(FleetOptions {
        bind,
        advertise,
        peers,
        secret,
        cluster,
        interval,
        max_keys,
        forget_after,
    }))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::tests::settings_of as env;

    #[test]
    fn off_by_default_and_read_when_bound() {
        assert!(env(&[]).unwrap().fleet.is_none());
        let f = env(&[
            ("FLEET_BIND", "127.0.0.1:7946"),
            ("FLEET_SECRET", "0123456789abcdef"),
            ("FLEET_PEERS", "127.0.0.1:7947, fleet.example:7946"),
            ("FLEET_GOSSIP_INTERVAL", "50ms"),
        ])
        .unwrap()
        .fleet
        .unwrap();
        assert_eq!(f.advertise, f.bind);
        assert_eq!(f.peers, ["127.0.0.1:7947", "fleet.example:7946"]);
        assert_eq!(f.interval, Duration::from_millis(50));
        assert_eq!(
            (f.max_keys, f.forget_after),
            (1000, Duration::from_secs(600))
        );
    }

    #[test]
    fn refuses_a_fleet_without_secret_backend_or_reachable_address() {
        let e = env(&[("FLEET_BIND", "127.0.0.1:7946")]).unwrap_err();
        assert!(e.contains("FLEET_SECRET") && e.contains("16 bytes"), "{e}");
        let e = env(&[
            ("FLEET_BIND", "127.0.0.1:7946"),
            ("FLEET_SECRET", "0123456789abcdef"),
            ("BACKEND_TYPE", "redis"),
        ])
        .unwrap_err();
        assert!(
            e.contains("FLEET_BIND") && e.contains("BACKEND_TYPE=memory"),
            "{e}"
        );
        let e = env(&[
            ("FLEET_BIND", "0.0.0.0:7946"),
            ("FLEET_SECRET", "0123456789abcdef"),
        ])
        .unwrap_err();
        assert!(e.contains("FLEET_ADVERTISE"), "{e}");
        let e = env(&[("FLEET_GOSSIP_INTERVAL", "1ms")]).unwrap_err();
        assert!(
            e.contains("FLEET_GOSSIP_INTERVAL") && e.contains("10ms"),
            "{e}"
        );
        let e = env(&[("FLEET_PEERS", "nohost")]).unwrap_err();
        assert!(e.contains("FLEET_PEERS"), "{e}");
    }
}
