//! The test-only switches (`RATELIMITD_TEST_MANUAL_CLOCK`, `RATELIMITD_TEST_RANDOM_SEED`) and the
//! rule that keeps them out of what users run.
//!
//! The manual clock freezes time for every limit and serves `/test/clock` on the debug port, which
//! moves it: an environment copied from a test setup into a deployment would let anyone who
//! reaches that port reset every window. So the switches are honoured only by builds with debug
//! assertions (cargo's dev profile, which `cargo test` builds); a release build (`--release`, the
//! container image) refuses to start when one is set instead of ignoring it, so the mistake is
//! seen. Even in a test build the manual clock needs a loopback `DEBUG_HOST`.

use std::net::IpAddr;

use super::{SettingsError, Vars, parse};

/// Whether this build honours the test switches: only one with debug assertions.
pub(super) const COMPILED: bool = cfg!(debug_assertions);

/// The manual clock's variable.
const MANUAL_CLOCK: &str = "RATELIMITD_TEST_MANUAL_CLOCK";
/// The seeded randomness's variable.
const RANDOM_SEED: &str = "RATELIMITD_TEST_RANDOM_SEED";

/// The test switches that are set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct TestHooks {
    /// Start on a manual clock at these Unix seconds.
    pub(super) manual_clock: Option<u64>,
    /// Seed the source soft limits draw from.
    pub(super) random_seed: Option<u64>,
}

/// Reads the test switches. `compiled` says whether this build honours them ([`COMPILED`]);
/// `debug_host` is where `/test/clock` would be served.
pub(super) fn from_vars(
    v: &Vars,
    compiled: bool,
    debug_host: &str,
) -> Result<TestHooks, SettingsError> {
    let hooks = TestHooks {
        manual_clock: v.parse(MANUAL_CLOCK, None, |s| {
            parse::uint_in(s, 0, u64::MAX / 1_000_000).map(Some)
        })?,
        random_seed: v.parse(RANDOM_SEED, None, |s| {
            parse::uint_in(s, 0, u64::MAX).map(Some)
        })?,
    };
    for (name, set) in [
        (MANUAL_CLOCK, hooks.manual_clock.is_some()),
        (RANDOM_SEED, hooks.random_seed.is_some()),
    ] {
        if set && !compiled {
            return Err(refused(
                v,
                name,
                "a test-only switch, which release builds do not honour (it would let the \
                 test endpoints steer every limit); unset it",
            ));
        }
    }
    if hooks.manual_clock.is_some() && !is_loopback(debug_host) {
        return Err(refused(
            v,
            MANUAL_CLOCK,
            &format!(
                "the manual clock serves /test/clock on the debug port, which is bound to \
                 DEBUG_HOST={debug_host:?}; set DEBUG_HOST to a loopback address (127.0.0.1, ::1 \
                 or localhost)"
            ),
        ));
    }
    Ok(hooks)
}

/// An error naming the variable (or the flag that set it) and its value.
fn refused(v: &Vars, name: &str, reason: &str) -> SettingsError {
    let (value, source) = v.get(name).cloned().unwrap_or_default();
    SettingsError {
        name: source,
        value,
        reason: reason.to_string(),
        also: Vec::new(),
    }
}

/// Whether `host` names this machine only.
fn is_loopback(host: &str) -> bool {
    let host = host.trim();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || bare.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn vars(env: &[(&str, &str)]) -> Vars {
        Vars::new(
            env.iter()
                .map(|(k, v)| ((*k).to_string(), ((*v).to_string(), (*k).to_string())))
                .collect::<HashMap<_, _>>(),
        )
    }

    #[test]
    fn a_release_build_refuses_either_switch_by_name() {
        for name in [MANUAL_CLOCK, RANDOM_SEED] {
            let err = from_vars(&vars(&[(name, "1000")]), false, "127.0.0.1").unwrap_err();
            assert_eq!(err.name, name);
            assert_eq!(err.value, "1000");
            assert!(err.reason.contains("release builds do not honour"), "{err}");
        }
        assert_eq!(
            from_vars(&vars(&[]), false, "0.0.0.0").unwrap(),
            TestHooks::default()
        );
    }

    #[test]
    fn a_test_build_honours_them_with_a_loopback_debug_host() {
        let v = vars(&[(MANUAL_CLOCK, "1000"), (RANDOM_SEED, "7")]);
        for host in ["127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"] {
            let hooks = from_vars(&v, true, host).unwrap();
            assert_eq!(hooks.manual_clock, Some(1000));
            assert_eq!(hooks.random_seed, Some(7));
        }
    }

    #[test]
    fn the_manual_clock_is_refused_next_to_a_debug_port_others_reach() {
        for host in ["0.0.0.0", "::", "10.0.0.5", "example.com"] {
            let err = from_vars(&vars(&[(MANUAL_CLOCK, "1000")]), true, host).unwrap_err();
            assert_eq!(err.name, MANUAL_CLOCK);
            assert!(err.reason.contains("DEBUG_HOST"), "{err}");
        }
        // The seed serves no endpoint: any debug host will do.
        let seeded = from_vars(&vars(&[(RANDOM_SEED, "7")]), true, "0.0.0.0").unwrap();
        assert_eq!(seeded.random_seed, Some(7));
    }
}
