//! Settings tests: defaults, Go semantics, errors naming the variable, flags over env.

use clap::Parser;

use super::*;

/// `pairs` as the environment a test reads settings from (shared by the areas' own tests).
pub(super) fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The settings `pairs` of environment variables give, or their error's text (for the tests
/// of each settings file).
pub(super) fn settings_of(pairs: &[(&str, &str)]) -> Result<Settings, String> {
    Settings::from_env(env(pairs)).map_err(|e| e.to_string())
}

#[test]
fn defaults_match_the_go_service() {
    let s = Settings::defaults();
    assert_eq!((s.port, s.grpc_port, s.debug_port), (8080, 8081, 6070));
    assert_eq!(s.host, "0.0.0.0");
    // The debug port keeps Go's 0.0.0.0; the admin API (client data) is on loopback by default.
    assert_eq!(s.debug_host, "0.0.0.0");
    assert_eq!((s.admin_host.as_str(), s.admin_port), ("127.0.0.1", 6071));
    assert_eq!(s.log_level, LogLevel::Warn);
    assert_eq!(s.runtime_appdirectory, "config");
    assert!(s.runtime_watch_root);
    assert_eq!(s.redis.expiration_jitter_max_seconds, 300);
    assert_eq!(s.redis.main.url, "/var/run/nutcracker/ratelimit.sock");
    assert!(s.redis.main.unix_socket && s.redis.per_second.is_none());
    assert_eq!(s.limit_limit_header, "RateLimit-Limit");
    assert_eq!(s.backend, Backend::Memory, "zero setup: no Redis asked for");
    assert_eq!(s.cache_key_format, KeyFormat::Safe);
}

#[test]
fn set_but_empty_counts_as_set() {
    let s =
        Settings::from_env(env(&[("CACHE_KEY_PREFIX", ""), ("LIMIT_LIMIT_HEADER", "")])).unwrap();
    assert_eq!(s.limit_limit_header, "");
    let e = Settings::from_env(env(&[("PORT", "")])).unwrap_err();
    assert_eq!(e.name, "PORT");
}

#[test]
fn every_bad_value_is_reported_in_one_error() {
    let e = Settings::from_env(env(&[
        ("GRPC_PORT", "eighty"),
        ("SHADOW_MODE", "maybe"),
        ("REDIS_BREAKER_FAILURES", "x"),
    ]))
    .unwrap_err();
    let mut names: Vec<&str> = std::iter::once(e.name.as_str())
        .chain(e.also.iter().map(|o| o.name.as_str()))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["GRPC_PORT", "REDIS_BREAKER_FAILURES", "SHADOW_MODE"]
    );
    let text = e.to_string();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains("\"maybe\" for SHADOW_MODE"), "{text}");
}

#[test]
fn an_empty_start_is_refused_unless_allowed() {
    assert!(!Settings::defaults().allow_empty_config);
    let s = Settings::from_env(env(&[("ALLOW_EMPTY_CONFIG", "true")])).unwrap();
    assert!(s.allow_empty_config);
}

#[test]
fn invalid_values_name_the_variable_and_value() {
    let e = Settings::from_env(env(&[("SHADOW_MODE", "yes")])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid value \"yes\" for SHADOW_MODE: expected a boolean (true, false, 1, 0, t, f)"
    );
    let e = Settings::from_env(env(&[("GRPC_PORT", "70000")])).unwrap_err();
    assert!(e.to_string().contains("GRPC_PORT"));
    assert!(Settings::from_env(env(&[("LOG_LEVEL", "loud")])).is_err());
    assert!(Settings::from_env(env(&[("DRAIN_TIMEOUT", "5")])).is_err());
    assert!(Settings::from_env(env(&[("MEMORY_MAX_KEYS", "0")])).is_err());
}

#[test]
fn backend_selection() {
    let b = |pairs: &[(&str, &str)]| Settings::from_env(env(pairs)).map(|s| s.backend);
    assert_eq!(b(&[("REDIS_URL", "localhost:6379")]), Ok(Backend::Redis));
    assert_eq!(
        b(&[("BACKEND_TYPE", "memory"), ("REDIS_URL", "x")]),
        Ok(Backend::Memory)
    );
    assert_eq!(b(&[("BACKEND_TYPE", "redis")]), Ok(Backend::Redis));
    let memcache = [
        ("BACKEND_TYPE", "memcache"),
        ("MEMCACHE_HOST_PORT", "h:11211"),
    ];
    assert_eq!(b(&memcache), Ok(Backend::Memcache));
    assert!(b(&[("BACKEND_TYPE", "etcd")]).is_err());
}

#[test]
fn flags_override_env_and_errors_name_the_flag() {
    let cli = Cli::try_parse_from(["ratelimitd", "--port", "9000", "--config", "cfg"]).unwrap();
    let s = Settings::load(&cli, env(&[("PORT", "1"), ("GRPC_PORT", "2")])).unwrap();
    assert_eq!((s.port, s.grpc_port), (9000, 2));
    assert_eq!(s.config_path, Some(PathBuf::from("cfg")));
    let cli = Cli::try_parse_from(["ratelimitd", "--grpc-port", "x"]).unwrap();
    let e = Settings::load(&cli, env(&[])).unwrap_err();
    assert_eq!(e.name, "--grpc-port (GRPC_PORT)");
}

#[test]
fn validate_subcommand() {
    let cli =
        Cli::try_parse_from(["ratelimitd", "validate", "a", "b", "--merge-domain-config"]).unwrap();
    assert_eq!(
        cli.command(),
        Command::Validate {
            paths: vec!["a".into(), "b".into()],
            merge_domains: true
        }
    );
    assert_eq!(
        Cli::try_parse_from(["ratelimitd"]).unwrap().command(),
        Command::Serve
    );
    assert!(Cli::try_parse_from(["ratelimitd", "validate"]).is_err());
}

#[test]
fn secrets_are_redacted() {
    let s = Secret("hunter2".into());
    assert!(!format!("{s:?} {s}").contains("hunter2"));
}

#[test]
fn grpc_server_settings_follow_go() {
    let s = Settings::defaults();
    assert_eq!(s.grpc.uds, None);
    assert_eq!(
        s.grpc.max_connection_age,
        Some(Duration::from_secs(24 * 3600))
    );
    assert_eq!(
        s.grpc.max_connection_age_grace,
        Some(Duration::from_secs(3600))
    );
    assert_eq!(s.grpc.tls, None);
    assert_eq!(s.config_poll_interval, Some(Duration::from_secs(2)));
    let s = Settings::from_env(env(&[
        ("GRPC_UDS", "/run/rls.sock"),
        ("GRPC_MAX_CONNECTION_AGE", "0"),
        ("GRPC_MAX_CONNECTION_AGE_GRACE", "30s"),
        ("GRPC_SERVER_USE_TLS", "true"),
        ("GRPC_SERVER_TLS_CERT", "/tls/crt"),
        ("GRPC_SERVER_TLS_KEY", "/tls/key"),
        ("GRPC_CLIENT_TLS_SAN", "envoy"),
        ("CONFIG_POLL_INTERVAL", "0"),
    ]))
    .unwrap();
    assert_eq!(s.grpc.uds, Some(PathBuf::from("/run/rls.sock")));
    assert_eq!(s.grpc.max_connection_age, None, "0 = no limit");
    assert_eq!(
        s.grpc.max_connection_age_grace,
        Some(Duration::from_secs(30))
    );
    let tls = s.grpc.tls.unwrap();
    assert_eq!(
        (tls.client_ca, tls.client_san),
        (None, Some("envoy".into()))
    );
    assert_eq!(s.config_poll_interval, None);
    let e = Settings::from_env(env(&[("GRPC_SERVER_USE_TLS", "true")])).unwrap_err();
    assert_eq!(e.name, "GRPC_SERVER_TLS_CERT");
    let e = Settings::from_env(env(&[("GRPC_MAX_CONNECTION_AGE", "1d")])).unwrap_err();
    assert_eq!(e.name, "GRPC_MAX_CONNECTION_AGE");
}

#[test]
fn edge_settings_default_off_and_name_the_variable_when_bad() {
    let s = Settings::defaults();
    assert_eq!(s.edges.check_domain, "api");
    assert_eq!(s.edges.check_max_body_bytes, 64 * 1024);
    assert!(!s.edges.grpc_standard_headers, "Go behaviour unless asked");
    let s = Settings::from_env(env(&[
        ("CHECK_DOMAIN", "edge"),
        ("CHECK_MAX_BODY_BYTES", "1024"),
        ("LIMIT_RESPONSE_STANDARD_HEADERS_ENABLED", "true"),
    ]))
    .unwrap();
    assert_eq!(s.edges.check_domain, "edge");
    assert_eq!(s.edges.check_max_body_bytes, 1024);
    assert!(s.edges.grpc_standard_headers);
    for (name, value) in [("CHECK_DOMAIN", ""), ("CHECK_MAX_BODY_BYTES", "0")] {
        let e = Settings::from_env(env(&[(name, value)])).unwrap_err();
        assert_eq!(e.name, name);
    }
}

#[test]
fn a_sink_conflict_shows_the_value_as_written() {
    // Found by the settings fuzz target: the error said "true" whatever the operator wrote.
    let dog = env(&[("USE_DOG_STATSD", "1"), ("USE_STATSD", "t")]);
    let e = Settings::from_env(dog).unwrap_err();
    assert_eq!((e.name.as_str(), e.value.as_str()), ("USE_STATSD", "t"));
    let dog = Settings::from_env(env(&[("USE_DOG_STATSD", "1")])).unwrap();
    assert!(
        dog.obs.dogstatsd && dog.obs.sink == crate::settings::observability::StatsSinkKind::Statsd
    );
    let both = env(&[("USE_PROMETHEUS", "true"), ("USE_STATSD", "T")]);
    let e = Settings::from_env(both).unwrap_err();
    assert_eq!((e.name.as_str(), e.value.as_str()), ("USE_STATSD", "T"));
    assert!(e.reason.contains("cannot both be true"), "{e}");
}

#[test]
fn the_calendar_time_zone_is_utc_unless_set_and_must_exist() {
    assert_eq!(Settings::defaults().calendar_time_zone.name(), "UTC");
    let s = Settings::from_env(env(&[("CALENDAR_TIME_ZONE", "europe/paris")])).unwrap();
    assert_eq!(s.calendar_time_zone.name(), "Europe/Paris");
    // A typo gets the nearest name, as a file's `time_zone` does; a name near none, examples.
    let e = Settings::from_env(env(&[("CALENDAR_TIME_ZONE", "Europe/Pari")])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid value \"Europe/Pari\" for CALENDAR_TIME_ZONE: unknown time zone; did you mean Europe/Paris?"
    );
    let e = Settings::from_env(env(&[("CALENDAR_TIME_ZONE", "Moon/Tranquility")])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid value \"Moon/Tranquility\" for CALENDAR_TIME_ZONE: expected an IANA time zone name such as Europe/Paris, America/New_York or UTC"
    );
}
