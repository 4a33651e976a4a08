//! No Go setting is silently ignored: every environment variable of envoyproxy/ratelimit
//! (tests/fixtures/go-settings.txt, from the SPEC's settings table) is read by ratelimitd's
//! settings, so it is either honoured or refused at startup with an error naming it; and the ones
//! ratelimitd does not implement are refused, naming the variable, when set.

use ratelimitd::Settings;

fn go_settings() -> Vec<String> {
    std::fs::read_to_string("tests/fixtures/go-settings.txt")
        .expect("tests/fixtures/go-settings.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn every_go_setting_is_read() {
    let go = go_settings();
    assert!(go.len() > 100, "the fixture lists {} settings", go.len());
    let read = super::settings_reference::read_by_the_code();
    let ignored: Vec<_> = go.iter().filter(|n| !read.contains(*n)).collect();
    assert!(
        ignored.is_empty(),
        "Go settings ratelimitd never reads (silently ignored): {ignored:?}"
    );
}

/// What ratelimitd does not implement is refused when set, with an error naming the variable
/// (and a reason), never accepted and ignored.
#[test]
fn unimplemented_go_settings_are_refused_naming_them() {
    let memcache = [("BACKEND_TYPE", "memcache"), ("MEMCACHE_HOST_PORT", "h:1")];
    for (name, value) in [
        ("MEMCACHE_SRV", "_memcache._tcp.example.com"),
        ("MEMCACHE_TLS", "true"),
        ("MEMCACHE_TLS_CLIENT_CERT", "/c.pem"),
        ("MEMCACHE_TLS_CLIENT_KEY", "/k.pem"),
        ("MEMCACHE_TLS_CACERT", "/ca.pem"),
        ("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "true"),
        ("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true"),
    ] {
        let mut vars = env(&memcache);
        vars.push((name.to_string(), value.to_string()));
        let Err(e) = Settings::from_env(vars) else {
            panic!("{name}={value} is accepted");
        };
        let named = std::iter::once(&e).chain(&e.also).find(|e| e.name == name);
        let e = named.unwrap_or_else(|| panic!("{name} is refused by name: {e}"));
        assert!(e.reason.contains("not supported"), "{name}: {e}");
    }
}

/// Go's Redis pool tuning has nothing to tune here, but a value the Go service stops on is
/// refused here too, naming the variable.
#[test]
fn go_pool_tuning_values_go_refuses_are_refused() {
    for (name, value) in [
        ("REDIS_POOL_ON_EMPTY_BEHAVIOR", "CREATE"),
        ("REDIS_CLUSTER_PIPELINE_PARALLELISM", "-1"),
        ("REDIS_PIPELINE_WINDOW", "soon"),
    ] {
        let Err(e) = Settings::from_env(env(&[(name, value)])) else {
            panic!("{name}={value} is accepted");
        };
        assert_eq!(e.name, name, "{e}");
    }
    let fine = [
        ("REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT"),
        ("REDIS_PIPELINE_WINDOW", "150us"),
        ("REDIS_PIPELINE_LIMIT", "8"),
        ("REDIS_CLUSTER_PIPELINE_PARALLELISM", "0"),
        ("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "true"),
    ];
    Settings::from_env(env(&fine)).expect("Go's accepted values are accepted");
}
