//! Settings from environment variables and flags: whatever values arrive, the result is settings
//! or an error naming the variable (and the flag, when a flag set it) with the value and what was
//! expected, never a panic; and the value parsers agree with simple models (Go's booleans,
//! bounded integers, Go durations written from their parts).

use std::time::Duration;

use proptest::prelude::*;
use ratelimitd::testing::{go_bool, go_duration, uint_in};
use ratelimitd::{Cli, Settings};

use crate::fuzz::inputs::{nasty_string, number_text};

/// Every variable the settings read (the Redis ones for both prefixes).
const VARS: &[&str] = &[
    "ADMIN_HOST",
    "ADMIN_MAX_CONNECTIONS",
    "ADMIN_PORT",
    "ADMIN_TOKEN",
    "ADMIN_TOKEN_FILE",
    "ADMIN_TOKENS_FILE",
    "BACKEND_TYPE",
    "CACHE_KEY_FORMAT",
    "CACHE_KEY_PREFIX",
    "CHECK_DOMAIN",
    "CHECK_MAX_BODY_BYTES",
    "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
    "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
    "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
    "CONFIG_GRPC_XDS_NODE_ID",
    "CONFIG_GRPC_XDS_NODE_METADATA",
    "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
    "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
    "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
    "CONFIG_GRPC_XDS_SERVER_URL",
    "CONFIG_GRPC_XDS_SERVER_USE_TLS",
    "CONFIG_POLL_INTERVAL",
    "CONFIG_TYPE",
    "CONNECTION_FIRST_BYTE_TIMEOUT",
    "DEBUG_HOST",
    "DEBUG_MAX_CONNECTIONS",
    "DEBUG_PORT",
    "DECISION_LOG_SAMPLE_RATE",
    "DEFAULT_FAILURE_MODE",
    "DISABLE_STATS",
    "DRAIN_TIMEOUT",
    "EXPIRATION_JITTER_MAX_SECONDS",
    "EXTRA_TAGS",
    "FORCE_START_WITHOUT_INITIAL_CONFIG",
    "GRPC_CLIENT_TLS_CACERT",
    "GRPC_CLIENT_TLS_SAN",
    "GRPC_HOST",
    "GRPC_MAX_CONNECTIONS",
    "GRPC_MAX_CONNECTION_AGE",
    "GRPC_MAX_CONNECTION_AGE_GRACE",
    "GRPC_MAX_CONNECTION_IDLE",
    "GRPC_MAX_RECV_MESSAGE_BYTES",
    "GRPC_PORT",
    "GRPC_SERVER_TLS_CERT",
    "GRPC_SERVER_TLS_KEY",
    "GRPC_SERVER_USE_TLS",
    "GRPC_UDS",
    "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
    "HOST",
    "HOTKEYS_CAPACITY",
    "HTTP_IDLE_TIMEOUT",
    "HTTP_MAX_CONNECTIONS",
    "INSTANCE_ID",
    "LEASE_DEFAULT_SIZE",
    "LIMIT_LIMIT_HEADER",
    "LIMIT_REMAINING_HEADER",
    "LIMIT_RESET_HEADER",
    "LIMIT_RESPONSE_HEADERS_ENABLED",
    "LIMIT_RESPONSE_STANDARD_HEADERS_ENABLED",
    "LOCAL_CACHE_SIZE_IN_BYTES",
    "LOG_FORMAT",
    "LOG_LEVEL",
    "MAX_DESCRIPTORS_PER_REQUEST",
    "MAX_DESCRIPTOR_VALUE_BYTES",
    "MAX_ENTRIES_PER_DESCRIPTOR",
    "MEMCACHE_HOST_PORT",
    "MEMCACHE_MAX_IDLE_CONNS",
    "MEMCACHE_SRV",
    "MEMCACHE_SRV_REFRESH",
    "MEMCACHE_TIMEOUT",
    "MEMCACHE_TLS",
    "MEMORY_MAX_BYTES",
    "MEMORY_MAX_KEYS",
    "MERGE_DOMAIN_CONFIG",
    "NEAR_LIMIT_RATIO",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "POLICY_DB_URL",
    "POLICY_ENABLED",
    "POLICY_MAX_OVERRIDES",
    "POLICY_REFRESH_INTERVAL",
    "PORT",
    "PROMETHEUS_ADDR",
    "PROMETHEUS_MAX_CONNECTIONS",
    "PROMETHEUS_MAPPER_YAML",
    "PROMETHEUS_PATH",
    "QUOTA_MODE",
    "RATELIMITD_CONFIG",
    "RATELIMITD_DATA_DIR",
    "RATELIMITD_TEST_MANUAL_CLOCK",
    "REDIS_AUTH",
    "REDIS_BREAKER_COOLDOWN",
    "REDIS_BREAKER_FAILURES",
    "REDIS_PERSECOND",
    "REDIS_PERSECOND_AUTH",
    "REDIS_PERSECOND_POOL_SIZE",
    "REDIS_PERSECOND_SOCKET_TYPE",
    "REDIS_PERSECOND_TYPE",
    "REDIS_PERSECOND_URL",
    "REDIS_POOL_SIZE",
    "REDIS_RESPONSE_TIMEOUT",
    "REDIS_SENTINEL_AUTH",
    "REDIS_SOCKET_TYPE",
    "REDIS_STARTUP_INITIAL_INTERVAL",
    "REDIS_STARTUP_MAX_ELAPSED_TIME",
    "REDIS_STARTUP_MAX_INTERVAL",
    "REDIS_TIMEOUT",
    "REDIS_TLS",
    "REDIS_TLS_CACERT",
    "REDIS_TLS_CLIENT_CERT",
    "REDIS_TLS_CLIENT_KEY",
    "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
    "REDIS_TYPE",
    "REDIS_URL",
    "REDIS_USE_SERVER_TIME",
    "RESPONSE_DYNAMIC_METADATA",
    "RLQS_ENABLED",
    "RLQS_MAX_BUCKETS_PER_STREAM",
    "RLQS_MAX_REPORTS_PER_SECOND",
    "RLQS_MAX_STREAMS",
    "RLQS_MIN_ASSIGNMENT_TTL",
    "RLQS_UNMATCHED",
    "RUNTIME_APPDIRECTORY",
    "RUNTIME_IGNOREDOTFILES",
    "RUNTIME_ROOT",
    "RUNTIME_SUBDIRECTORY",
    "RUNTIME_WATCH_ROOT",
    "SHADOW_MODE",
    "STATSD_HOST",
    "STATSD_PORT",
    "STATSD_PROTOCOL",
    "STATS_FLUSH_INTERVAL",
    "STATS_MAX_KEYS",
    "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
    "TRACING_ENABLED",
    "TRACING_EXPORTER_PROTOCOL",
    "TRACING_SAMPLING_RATE",
    "TRACING_SERVICE_INSTANCE_ID",
    "TRACING_SERVICE_NAME",
    "TRACING_SERVICE_NAMESPACE",
    "USE_DOG_STATSD",
    "USE_DOG_STATSD_MOGRIFIERS",
    "USE_PROMETHEUS",
    "USE_STATSD",
    "VIOLATIONS_BATCH_DELAY",
    "VIOLATIONS_BATCH_SIZE",
    "VIOLATIONS_LOG",
    "VIOLATIONS_QUEUE_SIZE",
    "VIOLATIONS_RETENTION_DAYS",
    "VIOLATIONS_RETENTION_INTERVAL",
    "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
    "XDS_CLIENT_BACKOFF_JITTER",
    "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
    "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
    "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
];

/// The flags and the variables they override.
const FLAGS: &[(&str, &str)] = &[
    ("--host", "HOST"),
    ("--port", "PORT"),
    ("--grpc-host", "GRPC_HOST"),
    ("--grpc-port", "GRPC_PORT"),
    ("--debug-host", "DEBUG_HOST"),
    ("--debug-port", "DEBUG_PORT"),
    ("--config", "RATELIMITD_CONFIG"),
    ("--backend", "BACKEND_TYPE"),
    ("--log-level", "LOG_LEVEL"),
    ("--log-format", "LOG_FORMAT"),
    ("--memory-max-keys", "MEMORY_MAX_KEYS"),
];

/// Values of every kind a variable takes, valid and not.
fn value() -> impl Strategy<Value = String> {
    let words = prop::sample::select(vec![
        "true",
        "false",
        "1",
        "0",
        "t",
        "F",
        "TRUE",
        "yes",
        "",
        " ",
        "10s",
        "1h30m",
        "1.5h",
        "150us",
        "5µs",
        "0s",
        "-1s",
        "1e9h",
        "99999999999999h",
        ".5s",
        "1.s",
        "1..2s",
        "+3m",
        "10",
        "memory",
        "redis",
        "tcp",
        "unix",
        "single",
        "sentinel",
        "cluster",
        "json",
        "text",
        "debug",
        "WARN",
        "allow",
        "deny",
        "error",
        "local",
        "FILE",
        "GRPC_XDS_SOTW",
        "http",
        "grpc",
        "udp",
        "go",
        "ratelimitd",
        "127.0.0.1:6379",
        "m,127.0.0.1:1",
        "redis://u:p@h:1/0",
        "/nonexistent/x",
        "sqlite::memory:",
        "postgres://x",
        "0.0.0.0",
        "::1",
        "a:b,c:d",
        "k=v,k2=v2",
        "=",
        ",",
        "0.8",
        "1.5",
        "NaN",
        "inf",
        "-0",
    ])
    .prop_map(str::to_string);
    prop_oneof![5 => words, 2 => number_text(), 2 => nasty_string()]
}

fn names_a_variable(e: &ratelimitd::SettingsError) -> bool {
    // A DogStatsD mogrifier's variables are named after what USE_DOG_STATSD_MOGRIFIERS lists.
    let mogrifier = e.name.starts_with("DOG_STATSD_MOGRIFIER_");
    (mogrifier || VARS.iter().any(|v| e.name.contains(v))) && !e.reason.is_empty()
}

proptest! {
    #![proptest_config(crate::fuzz::cases(512))]

    #[test]
    fn one_variable_is_read_or_refused_by_name(name in prop::sample::select(VARS), value in value()) {
        match Settings::from_env([(name.to_string(), value.clone())]) {
            Ok(_) => {}
            Err(e) => {
                prop_assert!(names_a_variable(&e), "{e}");
                if e.name == name {
                    prop_assert_eq!(e.value, value);
                }
            }
        }
    }

    #[test]
    fn any_environment_is_read_or_refused_by_name(
        vars in prop::collection::vec((prop::sample::select(VARS), value()), 0..12),
    ) {
        let vars = vars.into_iter().map(|(k, v)| (k.to_string(), v));
        if let Err(e) = Settings::from_env(vars) {
            prop_assert!(names_a_variable(&e), "{e}");
        }
    }

    #[test]
    fn flags_are_read_or_refused_naming_flag_and_variable(
        flags in prop::collection::vec((prop::sample::select(FLAGS), value()), 0..4),
        extra in prop::option::weighted(0.1, nasty_string()),
    ) {
        let mut args = vec!["ratelimitd".to_string()];
        for ((flag, _), v) in &flags {
            args.push(format!("{flag}={v}"));
        }
        args.extend(extra);
        let Ok(cli) = <Cli as clap::Parser>::try_parse_from(&args) else {
            return Ok(());
        };
        if let Err(e) = Settings::load(&cli, Vec::new()) {
            prop_assert!(names_a_variable(&e), "{e}");
            let by_flag = FLAGS.iter().find(|(_, var)| e.name.ends_with(&format!("({var})")));
            if let Some((flag, _)) = by_flag {
                prop_assert!(e.name.starts_with(flag), "{e}");
            }
        }
    }

    #[test]
    fn go_durations_read_as_written(h in 0u64..1000, m in 0u64..60, s in 0u64..60, ms in 0u64..1000, us in 0u64..1000, ns in 0u64..1000) {
        let text = format!("{h}h{m}m{s}s{ms}ms{us}us{ns}ns");
        let want = Duration::from_secs(h * 3600 + m * 60 + s) + Duration::from_nanos(ms * 1_000_000 + us * 1000 + ns);
        prop_assert_eq!(go_duration(&text), Ok(want));
    }

    #[test]
    fn integers_and_booleans_match_their_models(n in any::<u64>(), min in 0u64..10, max in 0u64..1_000_000, text in value()) {
        prop_assert_eq!(uint_in(&n.to_string(), min, max).ok(), Some(n).filter(|n| (min..=max).contains(n)));
        let model = match text.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
            _ => None,
        };
        prop_assert_eq!(go_bool(&text).ok(), model);
        let _ = go_duration(&text);
    }
}
