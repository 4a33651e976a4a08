//! The settings reference (docs/settings.md) and the variables the code reads cannot drift
//! apart: every variable the settings read, under each configuration that switches more of them
//! on, is in the reference, and every variable the reference's tables name is read by the code or
//! listed there as accepted and ignored.

use std::collections::BTreeSet;

use ratelimitd::settings::{Settings, reference};

/// Settings that make more variables be read (each set alone on top of the defaults).
const SWITCHES: &[&[(&str, &str)]] = &[
    &[],
    &[("CONFIG_TYPE", "GRPC_XDS_SOTW")],
    &[
        ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
        ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
        ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/ca.pem"),
    ],
    &[("BACKEND_TYPE", "redis"), ("REDIS_URL", "127.0.0.1:6379")],
    &[
        ("BACKEND_TYPE", "redis"),
        ("REDIS_URL", "127.0.0.1:6379"),
        ("REDIS_PERSECOND", "true"),
    ],
    &[
        ("REDIS_TYPE", "sentinel"),
        ("REDIS_URL", "m,127.0.0.1:26379"),
    ],
    &[("REDIS_TLS", "true"), ("REDIS_URL", "127.0.0.1:6379")],
    &[("REGION", "eu"), ("GLOBAL_REDIS_URL", "127.0.0.1:6379")],
    &[("USE_STATSD", "true")],
    &[("USE_DOG_STATSD", "true")],
    &[("TRACING_ENABLED", "true")],
    &[
        ("GRPC_SERVER_USE_TLS", "true"),
        ("GRPC_SERVER_TLS_CERT", "/cert.pem"),
        ("GRPC_SERVER_TLS_KEY", "/key.pem"),
    ],
];

/// Names in backticks that look like environment variables, as `--help` reads the tables.
fn variables_in(text: &str) -> BTreeSet<String> {
    reference::variables_in(text)
        .into_iter()
        .map(str::to_string)
        .collect()
}

fn reference() -> String {
    std::fs::read_to_string("docs/settings.md").expect("docs/settings.md")
}

/// The variables the reference documents: the first cell of every table row.
fn documented() -> BTreeSet<String> {
    reference()
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(variables_in)
        .collect()
}

fn read_by_the_code() -> BTreeSet<String> {
    SWITCHES
        .iter()
        .flat_map(|vars| {
            Settings::variables_read(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        })
        .collect()
}

#[test]
fn every_variable_the_settings_read_is_in_the_reference() {
    let read = read_by_the_code();
    assert!(read.len() > 100, "only {} variables read", read.len());
    let documented = documented();
    let missing: Vec<_> = read.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "read by the settings but not in a table of docs/settings.md: {missing:?}"
    );
}

#[test]
fn every_variable_in_the_reference_is_read_or_listed_as_ignored() {
    let read = read_by_the_code();
    let text = reference();
    let ignored_section = text
        .split("\n## ")
        .find(|s| s.to_lowercase().contains("accepted and ignored"))
        .expect("a section of variables accepted and ignored");
    let ignored = variables_in(ignored_section);
    let stale: Vec<_> = documented()
        .into_iter()
        .filter(|v| !read.contains(v) && !ignored.contains(v))
        .collect();
    assert!(
        stale.is_empty(),
        "in docs/settings.md but read by no setting: {stale:?}"
    );
}

#[test]
fn help_lists_every_variable_of_the_reference() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let listed: BTreeSet<String> = help
        .split(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
        .map(str::to_string)
        .collect();
    let missing: Vec<_> = documented()
        .into_iter()
        .filter(|v| !listed.contains(v))
        .collect();
    assert!(
        missing.is_empty(),
        "in docs/settings.md but not in --help: {missing:?}\n{help}"
    );
}
