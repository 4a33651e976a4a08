//! The two tiers of this binary, seen from outside: the binary runs one Redis test again as a
//! child whose `PATH` holds no redis-server. Plain, the test is skipped with its one-line reason
//! and passes; when the run requires everything (`CI=true`, `RATELIMITD_TEST_REQUIRE_ALL=1`), the
//! same missing program fails it.

use std::process::{Command, Output};

/// A test that needs redis-server and nothing else.
const NEEDS_REDIS: &str = "redis::store::the_script_is_reloaded_after_redis_forgets_it";

/// This binary running [`NEEDS_REDIS`] alone with an empty `PATH`, plus `env`.
fn run_without_redis(env: &[(&str, &str)]) -> (Output, String) {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([NEEDS_REDIS, "--exact", "--test-threads", "1"])
        .env("PATH", empty.path())
        .env_remove("CI")
        .env_remove("RATELIMITD_TEST_REQUIRE_ALL")
        .envs(env.iter().copied())
        .output()
        .expect("the test binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

#[test]
fn a_missing_program_skips_its_tests_with_a_reason() {
    let (out, text) = run_without_redis(&[]);
    assert!(out.status.success(), "{text}");
    let line = format!(
        "skipped {NEEDS_REDIS}: needs redis-server (install: apt-get install redis-server, or run tests/run.sh)"
    );
    assert!(text.lines().any(|l| l == line), "{text}");
    let warning =
        "WARNING: redis-server is not installed: every test that needs it passes WITHOUT RUNNING";
    assert!(text.contains(warning), "said once per run: {text}");
    assert!(text.contains("1 passed"), "{text}");
}

#[test]
fn a_run_that_requires_everything_fails_on_a_missing_program() {
    for env in [("CI", "true"), ("RATELIMITD_TEST_REQUIRE_ALL", "1")] {
        let (out, text) = run_without_redis(&[env]);
        assert!(!out.status.success(), "{env:?}: {text}");
        assert!(text.contains("1 failed"), "{env:?}: {text}");
        assert!(text.contains("needs redis-server"), "{env:?}: {text}");
        assert!(!text.contains("skipped"), "{env:?}: {text}");
    }
}
