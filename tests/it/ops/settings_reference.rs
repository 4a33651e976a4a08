//! The settings reference (docs/settings.md) and the variables the code reads cannot drift
//! apart: every variable the settings read, under each configuration that switches more of them
//! on, is in the reference, and every variable the reference's tables name is read by the code or
//! listed there as accepted and ignored. `--help`, which is built from the reference, is held to
//! the code the same way (and to plain text).

use std::collections::BTreeSet;

use ratelimitd::Settings;

/// Settings that make more variables be read (each set alone on top of the defaults).
pub(super) const SWITCHES: &[&[(&str, &str)]] = &[
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
    &[("BACKEND_TYPE", "memcache"), ("MEMCACHE_HOST_PORT", "h:1")],
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

/// The environment variable names among the code spans of `text`: `` `RATELIMITD_CONFIG` `` but
/// not `` `0.0.0.0` `` or `` `--config` ``. Written here, apart from the binary's own reading of
/// the page (`settings::reference`), so that a fault in that one shows as a difference.
fn code_span_names(text: &str) -> BTreeSet<String> {
    let ticks: Vec<usize> = text.match_indices('`').map(|(i, _)| i).collect();
    ticks
        .chunks_exact(2)
        .map(|pair| &text[pair[0] + 1..pair[1]])
        .filter(|span| {
            let mut chars = span.chars();
            chars.next().is_some_and(|c| c.is_ascii_uppercase())
                && span.len() > 2
                && chars.all(|c| matches!(c, 'A'..='Z' | '0'..='9' | '_'))
        })
        .map(str::to_string)
        .collect()
}

fn reference() -> String {
    std::fs::read_to_string("docs/settings.md").expect("docs/settings.md")
}

/// The variables the reference documents: those named in the first cell of every table row.
fn documented() -> BTreeSet<String> {
    reference()
        .lines()
        .filter(|l| l.trim_start().starts_with('|'))
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(code_span_names)
        .collect()
}

/// The variables of the reference's section of those accepted and ignored.
fn ignored() -> BTreeSet<String> {
    let text = reference();
    let section = text
        .split("\n## ")
        .find(|s| s.to_lowercase().contains("accepted and ignored"))
        .expect("a section of variables accepted and ignored");
    code_span_names(section)
}

/// Every variable the settings read under one of the [`SWITCHES`].
pub(super) fn read_by_the_code() -> BTreeSet<String> {
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
    let ignored = ignored();
    let stale: Vec<_> = documented()
        .into_iter()
        .filter(|v| !read.contains(v) && !ignored.contains(v))
        .collect();
    assert!(
        stale.is_empty(),
        "in docs/settings.md but read by no setting: {stale:?}"
    );
}

/// `ratelimitd <args> --help`, as printed.
fn help(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The variables `--help` lists after its flags: the comma-separated names under each section
/// title, below the line that introduces them.
fn listed_in(help: &str) -> BTreeSet<String> {
    let (_, list) = help
        .split_once("The variables, by section:")
        .expect("--help lists the variables");
    list.lines()
        .filter(|l| !l.trim().is_empty() && !l.ends_with(':'))
        .flat_map(|l| l.split(','))
        .map(|name| name.trim().to_string())
        .collect()
}

/// The variables the flags' help names (`[env: GRPC_HOST, default …]`).
fn named_by_flags(help: &str) -> BTreeSet<String> {
    help.split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split([',', ']']).next())
        .map(|name| name.trim().to_string())
        .collect()
}

#[test]
fn help_lists_every_variable_the_settings_read_and_no_other() {
    let help = help(&[]);
    let listed = listed_in(&help);
    // Against the code, not the page: `--help` is built from the page, so comparing the two
    // alone would only prove the page agrees with itself.
    let read = read_by_the_code();
    let missing: Vec<_> = read.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "read by the settings but not in --help: {missing:?}\n{help}"
    );
    let ignored = ignored();
    let unread: Vec<_> = listed
        .iter()
        .filter(|v| !read.contains(*v) && !ignored.contains(*v))
        .collect();
    assert!(
        unread.is_empty(),
        "in --help but read by no setting: {unread:?}\n{help}"
    );
    assert_eq!(listed, documented(), "--help and docs/settings.md differ");
    let flags = named_by_flags(&help);
    assert!(flags.len() >= 10, "{flags:?}\n{help}");
    let unknown: Vec<_> = flags.difference(&read).collect();
    assert!(
        unknown.is_empty(),
        "a flag names a variable no setting reads: {unknown:?}\n{help}"
    );
}

#[test]
fn help_is_plain_text() {
    for args in [&[][..], &["validate"], &["explain"]] {
        let help = help(args);
        assert!(
            !help.contains('`'),
            "Markdown in `ratelimitd {args:?} --help`:\n{help}"
        );
    }
    assert!(help(&[]).contains("[env: GRPC_HOST, default 0.0.0.0]"));
}
