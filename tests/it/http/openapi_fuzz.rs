//! schemathesis fuzzes every operation of `docs/openapi.json` against the running binary (memory
//! store, SQLite policy database, an admin token): no 5xx, every status, content type, header and
//! body as described, every described operation reached, and the admin API refuses a request
//! without the token (run once without it, once with it, where schemathesis's own `ignored_auth`
//! check also sends requests without it). Bounded: 25 examples per operation, a fixed seed.
//!
//! schemathesis is the PyPI package, installed by `tests/run.sh` into `.venv/` (or set
//! `SCHEMATHESIS_BIN`); there is deliberately no skip when it is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::support::openapi::{TOKEN, base, described, document, env, root};
use crate::support::process::{Spawned, spawn};
use crate::support::require;
use serde_json::Value;

fn schemathesis() -> PathBuf {
    crate::support::require::schemathesis().expect(
        "no schemathesis: run `bash tests/run.sh` (installs it into .venv/) or set SCHEMATHESIS_BIN",
    )
}

/// Runs schemathesis on the operations tagged `tag` against `base`, with `extra` flags, in a temp
/// dir; panics with its output when it finds a failure. Returns the HAR log of its requests.
fn fuzz(base: &str, tag: &str, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("run.har");
    let out = Command::new(schemathesis())
        .args([
            "run",
            &root().join("docs/openapi.json").display().to_string(),
        ])
        .args(["--url", base, "--include-tag", tag])
        .args(["--max-examples", "25", "--seed", "7", "--workers", "1"])
        .args(["--generation-database", "none", "--request-timeout", "10"])
        .args(["--report", "har", "--report-har-path"])
        .arg(&har)
        .args(["--no-color"])
        .args(extra)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("schemathesis starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "schemathesis on {tag} found failures:\n{text}"
    );
    let log = std::fs::read_to_string(&har).unwrap_or_else(|e| panic!("no HAR ({e}):\n{text}"));
    serde_json::from_str(&log).unwrap()
}

/// (status, method in lower case, url) of every request in a HAR log.
fn answers(har: &Value) -> Vec<(u64, String, String)> {
    (har["log"]["entries"].as_array().unwrap().iter())
        .map(|e| {
            let status = e["response"]["status"].as_u64().unwrap();
            let method = e["request"]["method"].as_str().unwrap().to_lowercase();
            (
                status,
                method,
                e["request"]["url"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The described path of listener `tag` that `url` (under `base`) requests, if any (a path
/// parameter matching any one segment).
fn template_of(
    doc_paths: &BTreeMap<String, BTreeSet<String>>,
    base: &str,
    url: &str,
) -> Option<String> {
    let rest = url.strip_prefix(base).unwrap_or(url);
    let rest = rest.split('?').next().unwrap();
    doc_paths
        .keys()
        .find(|path| {
            // Segment by segment: a `{parameter}` matches any one non-empty segment.
            let (want, got): (Vec<&str>, Vec<&str>) =
                (path.split('/').collect(), rest.split('/').collect());
            want.len() == got.len()
                && want.iter().zip(&got).all(|(w, g)| {
                    if w.starts_with('{') {
                        !g.is_empty()
                    } else {
                        w == g
                    }
                })
        })
        .cloned()
}

/// Asserts that the HAR log of a run on the listener `tag` has a request to every described path.
fn every_operation_reached(s: &Spawned, tag: &str, har: &Value) {
    let (base, paths) = (base(s, tag), described(&document(), tag));
    let reached: BTreeSet<String> = (answers(har).into_iter())
        .filter_map(|(_, _, url)| template_of(&paths, &base, &url))
        .collect();
    for path in paths.keys() {
        assert!(
            reached.contains(path),
            "{tag} {path}: schemathesis sent no request to it"
        );
    }
}

const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
response_schema_conformance,response_headers_conformance";

/// The admin operations open without a token: the description, and the console's sign-in and
/// sign-out forms (which hand out or end a session, never open `/v1`).
const PUBLIC: [&str; 3] = ["/openapi.json", "/login", "/logout"];

#[test]
fn schemathesis_finds_nothing_on_any_listener() {
    require!(Schemathesis);
    let data = tempfile::tempdir().unwrap();
    let s = spawn(&env(data.path()));
    // No links between their operations: no stateful phase.
    let phases = ["--phases", "examples,coverage,fuzzing"];
    for tag in ["main", "debug"] {
        let har = fuzz(
            &base(&s, tag),
            tag,
            &[&phases[..], &["--checks", CHECKS]].concat(),
        );
        every_operation_reached(&s, tag, &har);
    }
    // The admin API without the token: every request to a guarded operation is refused with 401.
    let har = fuzz(&base(&s, "admin"), "admin", &["--checks", CHECKS]);
    every_operation_reached(&s, "admin", &har);
    // Every request of a described guarded operation (a method it lacks answers 405 first).
    let (admin, paths) = (base(&s, "admin"), described(&document(), "admin"));
    let all = answers(&har);
    let guarded: Vec<_> = (all.iter())
        .filter(|(_, method, url)| {
            template_of(&paths, &admin, url)
                .is_some_and(|p| !PUBLIC.contains(&p.as_str()) && paths[&p].contains(method))
        })
        .collect();
    assert!(guarded.len() > 20, "too few admin requests made: {all:?}");
    let let_through: Vec<_> = guarded.iter().filter(|(code, ..)| *code != 401).collect();
    assert!(
        let_through.is_empty(),
        "answered without a token: {let_through:?}"
    );
    // With it: the handlers themselves, and schemathesis's own check that the token is required.
    let auth = format!("Authorization: Bearer {TOKEN}");
    let checks = format!("{CHECKS},ignored_auth");
    let har = fuzz(
        &base(&s, "admin"),
        "admin",
        &["-H", &auth, "--checks", &checks],
    );
    every_operation_reached(&s, "admin", &har);
    let reached: BTreeSet<u64> = answers(&har).iter().map(|(c, ..)| *c).collect();
    assert!(
        reached.iter().any(|c| *c == 200 || *c == 201),
        "the token opened nothing: {reached:?}"
    );
}
