//! What the real binary says when it starts: the banner (version, listeners, backend and
//! target, config source, domains), Redis address mistakes named with their setting and the
//! likely fix, no ANSI colour in logs that are not a terminal, and the admin listener opened only
//! when something is served on it (a taken port named with its setting); a startup error printed
//! as its causes alone, and a failed load logged on one readable text line.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::process;
use crate::support::redis::free_port;
use crate::support::require;
use ratelimitd_core::clock::Stopwatch;

const CFG: &str =
    "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 5}}\n";

fn config_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.yaml"), CFG).unwrap();
    dir
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The binary with only `vars` set (ports 0 on loopback, except the admin port, which is left to
/// the test), its stderr piped: the lines up to the banner (or to its exit), and the child.
fn run(vars: &[(&str, &str)]) -> (Child, Vec<String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimitd"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in crate::support::LOOPBACK
        .iter()
        .filter(|(k, _)| *k != "ADMIN_PORT")
    {
        cmd.env(k, v);
    }
    cmd.envs([("USE_STATSD", "false"), ("POLICY_ENABLED", "false")]);
    cmd.envs(vars.iter().copied());
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let rx = process::stderr_lines(&mut child);
    let mut lines = Vec::new();
    let watch = Stopwatch::start();
    while let Some(left) = Duration::from_secs(30).checked_sub(watch.elapsed()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains("ratelimitd listening");
                lines.push(line);
                if done {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    (child, lines)
}

fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_banner_names_version_listeners_store_config_and_domains() {
    require!(Redis);
    let dir = config_dir();
    let path = dir.path().display().to_string();
    // At the default level (warn): the banner is what a new user sees first.
    let s = process::spawn(&env(&[("RATELIMITD_CONFIG", &path), ("LOG_LEVEL", "warn")]));
    let log = &s.log;
    assert_eq!(log["level"], "warning");
    assert_eq!(log["version"], env!("CARGO_PKG_VERSION"));
    for field in ["grpc_addr", "http_addr", "debug_addr", "admin_addr"] {
        let addr = log[field].as_str().unwrap_or_default();
        assert!(addr.starts_with("127.0.0.1:"), "{field}: {log}");
    }
    assert_eq!(log["metrics_addr"], "off", "{log}");
    assert_eq!(
        (&log["backend"], &log["store"]),
        (&"memory".into(), &"embedded".into())
    );
    assert_eq!(log["config"], path.as_str());
    assert_eq!(log["domains"], 1);

    // With Redis, the banner names the target as the settings chose it.
    let redis = crate::support::redis::RedisServer::start();
    let mut vars = redis.env();
    vars.push(("RATELIMITD_CONFIG".into(), path.clone()));
    let s = process::spawn(&vars);
    let want = format!(
        "REDIS_URL={} with REDIS_SOCKET_TYPE=unix",
        redis.socket().display()
    );
    assert_eq!(
        (&s.log["backend"], s.log["store"].as_str()),
        (&"redis".into(), Some(want.as_str()))
    );
}

#[test]
fn redis_address_mistakes_name_the_setting_and_the_fix() {
    let dir = config_dir();
    let path = dir.path().display().to_string();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    // host:port with Go's default socket type (unix).
    let s = process::spawn(&env(&[
        ("RATELIMITD_CONFIG", &path),
        ("BACKEND_TYPE", "redis"),
        ("REDIS_URL", &addr),
    ]));
    let said = s.startup.join("\n");
    assert!(
        said.contains(&format!("REDIS_URL={addr} with REDIS_SOCKET_TYPE=unix"))
            && said.contains("set REDIS_SOCKET_TYPE=tcp"),
        "{said}"
    );
    // A redis:// URL, which the Go format is not.
    let url = format!("redis://{addr}/0");
    let s = process::spawn(&env(&[
        ("RATELIMITD_CONFIG", &path),
        ("BACKEND_TYPE", "redis"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", &url),
    ]));
    let said = s.startup.join("\n");
    assert!(
        said.contains("REDIS_URL takes a bare host:port")
            && said.contains(&format!("write REDIS_URL={addr}")),
        "{said}"
    );
    // Waiting for Redis at startup (a limit set): the exit says the same.
    let out = Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
        .envs([
            ("RATELIMITD_CONFIG", path.as_str()),
            ("BACKEND_TYPE", "redis"),
            ("REDIS_URL", addr.as_str()),
            ("REDIS_STARTUP_MAX_ELAPSED_TIME", "1ms"),
        ])
        .envs(crate::support::LOOPBACK)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("REDIS_URL={addr} with REDIS_SOCKET_TYPE=unix"))
            && err.contains("set REDIS_SOCKET_TYPE=tcp"),
        "{err}"
    );
}

#[test]
fn logs_carry_no_colour_codes_when_stderr_is_not_a_terminal() {
    let dir = config_dir();
    let path = dir.path().display().to_string();
    for format in ["text", "json"] {
        let (child, lines) = run(&[
            ("RATELIMITD_CONFIG", &path),
            ("LOG_LEVEL", "debug"),
            ("LOG_FORMAT", format),
            // A warning as well as info lines: levels are what colour would mark.
            ("BACKEND_TYPE", "redis"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", &format!("127.0.0.1:{}", free_port())),
            ("ADMIN_PORT", "0"),
        ]);
        kill(child);
        let text = lines.join("\n");
        let warned = text.contains("WARN") || text.contains(r#""level":"warning""#);
        assert!(
            text.contains("ratelimitd listening") && warned,
            "{format}: {text}"
        );
        assert!(
            !text.contains('\u{1b}'),
            "{format}: ANSI escape in a piped log:\n{text:?}"
        );
    }
}

#[test]
fn a_second_instance_on_the_host_starts_when_nothing_is_served_on_the_admin_port() {
    let dir = config_dir();
    let path = dir.path().display().to_string();
    let vars = [
        ("RATELIMITD_CONFIG", path.as_str()),
        ("LOG_LEVEL", "info"),
        ("LOG_FORMAT", "json"),
    ];
    let (first, lines) = run(&vars);
    let (second, more) = run(&vars);
    for said in [&lines, &more] {
        let banner = said.last().unwrap();
        assert!(banner.contains("ratelimitd listening"), "{said:#?}");
        assert!(banner.contains(r#""admin_addr":"off""#), "{banner}");
        assert!(
            said.iter().any(|l| l.contains("admin listener not opened")),
            "{said:#?}"
        );
    }
    kill(first);
    kill(second);

    // Asked for, on a port another process holds: a clear error naming the setting.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (mut child, lines) = run(&[
        ("RATELIMITD_CONFIG", path.as_str()),
        ("ADMIN_PORT", port.as_str()),
    ]);
    let status = child.wait().unwrap();
    let err = lines.join("\n");
    assert!(!status.success(), "{err}");
    assert!(
        err.contains(&format!("cannot listen on admin address 127.0.0.1:{port}"))
            && err.contains("ADMIN_HOST / ADMIN_PORT, --admin-port")
            && err.contains("another process"),
        "{err}"
    );
    drop(taken);
}

#[test]
fn a_startup_error_is_its_causes_without_a_backtrace() {
    // Set on many hosts and CI runners; it must not turn a wrong setting into a stack dump.
    for backtrace in ["1", "full"] {
        let out = Command::new(env!("CARGO_BIN_EXE_ratelimitd"))
            .envs(crate::support::LOOPBACK)
            .envs([
                ("RUST_BACKTRACE", backtrace),
                ("USE_STATSD", "false"),
                ("POLICY_ENABLED", "false"),
                ("PORT", "eighty"),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.starts_with("Error: invalid settings\n\nCaused by:\n")
                && err.contains("\"eighty\" for PORT"),
            "{err}"
        );
        assert!(!err.to_lowercase().contains("backtrace"), "{err}");
        assert!(!err.contains("main.rs"), "{err}");
    }
}

#[test]
fn a_failed_load_is_one_readable_text_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: fortnight, requests_per_unit: 5}}\n  - {key: b, rate_limit: {unit: eon, requests_per_unit: 5}}\n";
    std::fs::write(dir.path().join("d.yaml"), bad).unwrap();
    let path = dir.path().display().to_string();
    let (child, lines) = run(&[
        ("RATELIMITD_CONFIG", &path),
        ("ALLOW_EMPTY_CONFIG", "true"),
        ("LOG_FORMAT", "text"),
        ("LOG_LEVEL", "info"),
        ("ADMIN_PORT", "0"),
    ]);
    kill(child);
    let said = lines.join("\n");
    let error = lines
        .iter()
        .find(|l| l.contains("Error loading new configuration"))
        .unwrap_or_else(|| panic!("no load error logged:\n{said}"));
    // Both errors, on the line itself: no escaped newline between them.
    assert!(!error.contains("\\n"), "{error}");
    let (fortnight, eon) = (
        error.find("'fortnight'").expect(error),
        error.find("'eon'").expect(error),
    );
    assert!(error[fortnight..eon].contains("; "), "{error}");
    let warning = lines
        .iter()
        .find(|l| l.contains("no rate limit domain loaded"))
        .unwrap_or_else(|| panic!("no empty-start warning:\n{said}"));
    assert!(
        !warning.contains("\\n") && warning.contains("the load failed: "),
        "{warning}"
    );
}
