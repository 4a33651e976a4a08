//! Who may reach the admin listener (`ADMIN_HOST:ADMIN_PORT`) besides a token holder:
//! `ADMIN_ALLOWED_HOSTS`, the `Host` names it answers (loopback names by default, so a page on a
//! rebinding DNS name cannot drive an operator's browser or `kubectl port-forward` into it), and
//! `ADMIN_TRUST_LOOPBACK`, whether a loopback peer may read the status page without the token
//! (off by default: a sidecar, proxy or port-forward on the same host also arrives from loopback).
//! Also the trimming of `ADMIN_TOKEN`, shared with [`super::policy`].

use super::{Secret, SettingsError, Vars};

pub(crate) use crate::http::admin::{AdminSettings, AllowedHosts, DEFAULT_ALLOWED_HOSTS};

fn allowed_hosts(s: &str) -> Result<AllowedHosts, String> {
    let items: Vec<&str> = s
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    if items == ["*"] {
        return Ok(AllowedHosts::Any);
    }
    let mut names = Vec::new();
    for item in items {
        let name = item.strip_suffix('.').unwrap_or(item).to_ascii_lowercase();
        let bad = name.contains('*')
            || name.contains('/')
            || (!name.starts_with('[') && name.contains(':'))
            || (name.starts_with('[') != name.ends_with(']'));
        if bad {
            return Err(format!(
                "{item:?} is not a host name: expected names without ports (localhost, \
                 admin.internal, 10.0.0.7, [::1]) separated by commas, or * alone for any"
            ));
        }
        names.push(name);
    }
    if names.is_empty() {
        return Err("expected at least one host name, or * for any".into());
    }
    Ok(AllowedHosts::Names(names))
}

pub(super) fn from_vars(v: &Vars) -> Result<AdminSettings, SettingsError> {
    Ok(AdminSettings {
        allowed_hosts: v.parse(
            "ADMIN_ALLOWED_HOSTS",
            allowed_hosts(DEFAULT_ALLOWED_HOSTS).expect("valid default"),
            allowed_hosts,
        )?,
        trust_loopback: v.bool("ADMIN_TRUST_LOOPBACK", false)?,
    })
}

/// `ADMIN_TOKEN`, trimmed as a presented token is (a Kubernetes Secret written with a trailing
/// newline must not lock the API); unset or empty means none, only whitespace is an error.
pub(super) fn admin_token(v: &Vars) -> Result<Option<Secret>, SettingsError> {
    v.parse("ADMIN_TOKEN", None, |s| match s.trim() {
        "" if s.is_empty() => Ok(None),
        "" => Err("the token is only whitespace: set a token, or leave ADMIN_TOKEN unset".into()),
        t => Ok(Some(Secret(t.to_string()))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    fn settings(env: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        Settings::from_env(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn defaults_allow_loopback_names_on_any_port_and_trust_no_peer() {
        let a = settings(&[]).unwrap().admin;
        assert!(!a.trust_loopback);
        for ok in [
            "localhost",
            "localhost:6071",
            "127.0.0.1:1",
            "[::1]:6071",
            "LOCALHOST.",
        ] {
            assert!(a.allowed_hosts.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:6071",
            "localhost.evil.example",
            "",
            "[::2]",
        ] {
            assert!(!a.allowed_hosts.allows(refused), "{refused}");
        }
    }

    #[test]
    fn names_any_and_errors_name_the_variable() {
        let s = settings(&[
            ("ADMIN_ALLOWED_HOSTS", "Admin.Internal., 10.0.0.7"),
            ("ADMIN_TRUST_LOOPBACK", "true"),
        ])
        .unwrap()
        .admin;
        assert!(s.trust_loopback);
        assert!(s.allowed_hosts.allows("admin.internal:6071"));
        assert!(s.allowed_hosts.allows("10.0.0.7"));
        assert!(!s.allowed_hosts.allows("localhost"));
        let any = settings(&[("ADMIN_ALLOWED_HOSTS", "*")]).unwrap().admin;
        assert_eq!(any.allowed_hosts, AllowedHosts::Any);
        for bad in ["localhost:6071", "*.example", "", " , "] {
            let e = settings(&[("ADMIN_ALLOWED_HOSTS", bad)]).unwrap_err();
            assert_eq!(e.name, "ADMIN_ALLOWED_HOSTS", "{bad}");
        }
    }

    #[test]
    fn admin_token_is_trimmed_and_whitespace_alone_is_an_error() {
        let t = settings(&[("ADMIN_TOKEN", "s3cret\n")]).unwrap().policy;
        assert_eq!(t.admin_token.unwrap().0, "s3cret");
        assert!(
            settings(&[("ADMIN_TOKEN", "")])
                .unwrap()
                .policy
                .admin_token
                .is_none()
        );
        let e = settings(&[("ADMIN_TOKEN", " \n")]).unwrap_err();
        assert_eq!(e.name, "ADMIN_TOKEN");
        assert!(e.reason.contains("only whitespace"), "{e}");
    }
}
