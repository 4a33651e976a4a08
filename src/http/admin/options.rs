//! Who may reach the admin listener besides a token holder: the `Host` names it answers and
//! whether a loopback peer may read the status page without the token. Read from
//! `ADMIN_ALLOWED_HOSTS` and `ADMIN_TRUST_LOOPBACK` by the settings.

/// `ADMIN_ALLOWED_HOSTS` when unset: the loopback names.
pub(crate) const DEFAULT_ALLOWED_HOSTS: &str = "localhost,127.0.0.1,[::1]";

/// The access rules of the admin listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSettings {
    /// `ADMIN_ALLOWED_HOSTS` (default [`DEFAULT_ALLOWED_HOSTS`]).
    pub allowed_hosts: AllowedHosts,
    /// `ADMIN_TRUST_LOOPBACK` (default false): a loopback peer reads the status page without the
    /// bearer token. `/v1/*` always needs the token.
    pub trust_loopback: bool,
}

/// The `Host` names the admin listener answers, with any port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    /// `*`: every name (the Host check is off).
    Any,
    /// These names, lowercase, without a port or a trailing dot; IPv6 in brackets.
    Names(Vec<String>),
}

impl AllowedHosts {
    /// True when the value of a `Host` header (`name`, `name:port`, `[v6]:port`) names an allowed
    /// host; any port is accepted.
    pub fn allows(&self, host: &str) -> bool {
        match self {
            AllowedHosts::Any => true,
            AllowedHosts::Names(names) => {
                let name = host_name(host);
                names.iter().any(|n| n.eq_ignore_ascii_case(name))
            }
        }
    }

    /// The list as the setting spells it (for logs and refusals).
    pub fn describe(&self) -> String {
        match self {
            AllowedHosts::Any => "*".to_string(),
            AllowedHosts::Names(names) => names.join(","),
        }
    }
}

/// The host part of a `Host` value: without the port and a trailing dot; brackets kept on IPv6.
fn host_name(host: &str) -> &str {
    let host = host.trim();
    let name = if host.starts_with('[') {
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    name.strip_suffix('.').unwrap_or(name)
}
