//! The real binary on configurations that used to fail silently: a misnamed variable, a missing or
//! empty directory (refused, naming what was searched, or started with a warning behind
//! `ALLOW_EMPTY_CONFIG`), a limit with no `requests_per_unit`, backup files in a config directory,
//! a duplicate domain, misspelt units and keys, and several bad settings at once.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimitd"));
    // Whatever the developer's shell has set must not leak into what is being tested.
    cmd.env_remove("RATELIMITD_CONFIG")
        .env_remove("ALLOW_EMPTY_CONFIG");
    cmd
}

/// Runs the server with `env` on loopback ports and expects it to exit by itself (a server that
/// starts instead is killed after 30 s and fails the test).
pub(crate) fn refused(env: &[(&str, &str)]) -> Output {
    let mut cmd = bin();
    cmd.envs(crate::support::LOOPBACK)
        .envs([("USE_STATSD", "false"), ("POLICY_ENABLED", "false")])
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let watch = Stopwatch::start();
    while watch.elapsed() < Duration::from_secs(30) {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "the server started instead of refusing: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn validate(dir: &Path) -> Output {
    bin().arg("validate").arg(dir).output().unwrap()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

const GOOD: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n";

#[test]
fn a_misnamed_config_variable_refuses_to_start_naming_what_was_searched() {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().display().to_string();
    // RATELIMIT_CONFIG (no D) is not a setting: the Go RUNTIME_* discovery applies and finds nothing.
    let out = refused(&[("RATELIMIT_CONFIG", "cfg"), ("RUNTIME_ROOT", &root_path)]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("no rate limit domain loaded"), "{err}");
    assert!(err.contains("RATELIMITD_CONFIG is not set"), "{err}");
    assert!(err.contains(&format!("RUNTIME_ROOT={root_path}")), "{err}");
    assert!(err.contains("RUNTIME_SUBDIRECTORY empty"), "{err}");
    assert!(err.contains("ALLOW_EMPTY_CONFIG=true"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_missing_or_empty_config_directory_refuses_to_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope").display().to_string();
    let out = refused(&[("RATELIMITD_CONFIG", &missing)]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!("RATELIMITD_CONFIG={missing} (does not exist)")),
        "{err}"
    );

    // A directory holding only a backup copy: nothing is read from it.
    write(dir.path(), "api.yaml.bak", GOOD);
    let path = dir.path().display().to_string();
    let out = refused(&[("RATELIMITD_CONFIG", &path)]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(&format!("RATELIMITD_CONFIG={path}")), "{err}");
    assert!(
        err.contains("only *.yaml and *.yml files are read"),
        "{err}"
    );
}

#[test]
fn allow_empty_config_starts_and_warns_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    let s = crate::support::process::spawn(&[
        ("RATELIMITD_CONFIG".into(), path.clone()),
        ("ALLOW_EMPTY_CONFIG".into(), "true".into()),
    ]);
    let warning = s
        .startup
        .iter()
        .find(|l| l.contains("no rate limit domain loaded"))
        .unwrap_or_else(|| panic!("no warning in {:?}", s.startup));
    let v: serde_json::Value = serde_json::from_str(warning).unwrap();
    // WARN is the default log level: the operator sees it without asking.
    assert_eq!(v["level"], "warning", "{warning}");
    assert!(warning.contains(&path), "{warning}");
}

#[test]
fn validate_warns_on_a_limit_without_requests_per_unit_but_not_on_an_explicit_zero() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "api.yaml",
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute}\n  - key: blocked\n    rate_limit: {unit: minute, requests_per_unit: 0}\n",
    );
    let out = validate(dir.path());
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(
        warnings.len(),
        1,
        "only the missing one warns, not the spelt-out 0: {err}"
    );
    assert!(
        warnings[0].contains("api.yaml: descriptors[0].rate_limit.requests_per_unit:")
            && warnings[0].contains("requests_per_unit is missing"),
        "{err}"
    );
}

#[test]
fn a_config_directory_reads_only_yaml_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "api.yaml", GOOD);
    // A backup copy of the same domain, a script and notes: all skipped, so no duplicate domain.
    write(dir.path(), "api.yaml.bak", GOOD);
    write(dir.path(), "tool.rs", "fn main() {}\n");
    write(dir.path(), "notes.json", "{\"a\": 1}\n");
    write(dir.path(), "more.yml", &GOOD.replace("api", "more"));
    let out = validate(dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", stderr(&out));
    assert!(
        stdout.contains("all rate limit configs ok (2 file(s))"),
        "{stdout}"
    );
}

#[test]
fn a_duplicate_domain_names_both_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", GOOD);
    write(dir.path(), "b.yaml", GOOD);
    let out = validate(dir.path());
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(
            "b.yaml: domain: duplicate domain 'api' in config file (already defined in a.yaml)"
        ),
        "{err}"
    );
}

#[test]
fn unit_and_key_errors_list_the_valid_choices() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "api.yaml",
        "domain: api\ndescriptors:\n  - key: a\n    rate_limit: {unit: minutes, requests_per_unit: 1}\n  - key: b\n    rate_limit: {requests_per_unit: 1}\n  - key: c\n    rate_limt: {unit: second, requests_per_unit: 1}\n",
    );
    let out = validate(dir.path());
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let units = "second, minute, hour, day, week, month, year";
    assert!(
        err.contains(&format!(
            "descriptors[0].rate_limit.unit: invalid rate limit unit 'minutes' (one of {units}"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "descriptors[1].rate_limit.unit: invalid rate limit unit '' (the unit is missing; one of {units}"
        )),
        "{err}"
    );
    assert!(
        err.contains("descriptors[2].rate_limt: config error, unknown key 'rate_limt' (did you mean `rate_limit`?)"),
        "{err}"
    );
}

#[test]
fn every_bad_setting_is_reported_at_once() {
    let out = refused(&[("GRPC_PORT", "eighty"), ("SHADOW_MODE", "maybe")]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("GRPC_PORT") && err.contains("eighty"), "{err}");
    assert!(
        err.contains("SHADOW_MODE") && err.contains("maybe"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
