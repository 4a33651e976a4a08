//! The OpenAPI description (`docs/openapi.json`, served as `/openapi.json`) against the code: the
//! routes the routers declare are exactly the operations it describes, each on the listener its
//! tag names; every described operation is served by the running binary; and schemathesis fuzzes
//! every operation of the running binary (memory store, SQLite policy database, an admin token):
//! no 5xx, every status, content type and body as described, and the admin API refuses a request
//! without the token (once run without it, once with it).
//!
//! schemathesis is the PyPI package, installed by `tests/run.sh` into `.venv/` (or set
//! `SCHEMATHESIS_BIN`); there is deliberately no skip when it is missing.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::process::{Spawned, spawn};
use serde_json::Value;

/// The admin token of the spawned binary.
const TOKEN: &str = "openapi-test-token";

/// Each router's source file and the tag of its listener in the description.
const ROUTERS: [(&str, &str); 3] = [
    ("src/http/mod.rs", "main"),
    ("src/http/admin/mod.rs", "admin"),
    ("src/http/debug.rs", "debug"),
];

/// Routes served outside the description: the debug port's clock control exists only on the
/// test-only manual clock, and Prometheus's `/metrics` has its own listener (docs/operations.md).
const UNDESCRIBED: [&str; 2] = ["/test/clock", "&path"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn document() -> Value {
    let text = std::fs::read_to_string(root().join("docs/openapi.json")).unwrap();
    serde_json::from_str(&text).expect("docs/openapi.json is JSON")
}

/// The described operations of the listener tagged `tag`: path → methods (lower case).
fn described(doc: &Value, tag: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::<String, BTreeSet<String>>::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let tags = op["tags"].as_array().cloned().unwrap_or_default();
            if tags.iter().any(|t| t == tag) {
                out.entry(path.clone()).or_default().insert(method.clone());
            }
        }
    }
    out
}

/// The `.route(path, method(handler)…)` calls of a router's source: path → the methods it binds
/// (`any` for a route that takes every method).
fn declared(source: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for (at, _) in source.match_indices(".route(") {
        let rest = &source[at + ".route(".len()..];
        // The call's arguments: up to the parenthesis that closes `.route(`.
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                depth == 0
            })
            .map(|(i, _)| i)
            .expect("a closed .route( call");
        let args = &rest[..end];
        let (path, binders) = args.split_once(',').expect("a path and a method router");
        let path = path.trim().trim_matches('"').to_string();
        let methods = ["get", "post", "put", "delete", "patch", "any"]
            .into_iter()
            .filter(|m| {
                binders.match_indices(&format!("{m}(")).any(|(i, _)| {
                    let before = binders[..i].chars().next_back();
                    !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                })
            })
            .map(String::from)
            .collect();
        out.insert(path, methods);
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_routers_serve_exactly_the_described_operations() {
    let doc = document();
    // A route declared in a file this test does not read would escape it.
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        let rel = file.strip_prefix(root()).unwrap().display().to_string();
        let known = ROUTERS.iter().any(|(f, _)| *f == rel) || rel == "src/metrics/prom.rs";
        assert!(
            known || !source.contains(".route("),
            "{rel} declares HTTP routes: add it to ROUTERS and describe them in docs/openapi.json"
        );
    }
    for (file, tag) in ROUTERS {
        let source = std::fs::read_to_string(root().join(file)).unwrap();
        let mut code = declared(&source);
        code.retain(|path, _| !UNDESCRIBED.contains(&path.as_str()));
        assert!(!code.is_empty(), "no routes found in {file}");
        let doc_ops = described(&doc, tag);
        let code_paths: BTreeSet<_> = code.keys().collect();
        let doc_paths: BTreeSet<_> = doc_ops.keys().collect();
        assert_eq!(
            code_paths, doc_paths,
            "the routes of {file} (left) and the paths tagged {tag} in docs/openapi.json (right)"
        );
        for (path, methods) in &code {
            let described = &doc_ops[path];
            if methods.contains("any") {
                assert!(!described.is_empty(), "{tag} {path}: no method described");
            } else {
                assert_eq!(
                    methods, described,
                    "{tag} {path}: methods in {file} vs described"
                );
            }
        }
    }
}

#[tokio::test]
async fn the_served_document_is_the_one_in_docs() {
    let s = spawn(&env(tempfile::tempdir().unwrap().path()));
    for addr in [&s.http_addr, &s.admin_addr] {
        let r = reqwest::get(format!("http://{addr}/openapi.json"))
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{addr}");
        let served: Value = r.json().await.unwrap();
        assert_eq!(served, document(), "the document served on {addr}");
    }
}

/// The binary's settings: the `/check` example configuration, a SQLite policy database in
/// `data`, an admin token.
fn env(data: &Path) -> Vec<(String, String)> {
    [
        (
            "RATELIMITD_CONFIG",
            root().join("examples/check").display().to_string(),
        ),
        ("POLICY_ENABLED", "true".into()),
        ("RATELIMITD_DATA_DIR", data.display().to_string()),
        ("ADMIN_TOKEN", TOKEN.into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn base(s: &Spawned, tag: &str) -> String {
    let addr = match tag {
        "main" => &s.http_addr,
        "admin" => &s.admin_addr,
        "debug" => &s.debug_addr,
        _ => unreachable!("tag {tag}"),
    };
    format!("http://{addr}")
}

/// One request with the admin token: (status, body).
async fn call(http: &reqwest::Client, method: &str, url: String) -> (u16, String) {
    let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
    let r = http
        .request(method, url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn every_described_operation_is_served() {
    let data = tempfile::tempdir().unwrap();
    let s = spawn(&env(data.path()));
    let http = reqwest::Client::new();
    let doc = document();
    for tag in ["main", "admin", "debug"] {
        let base = base(&s, tag);
        // What a path no route serves gets on this listener (a 404, or the debug port's index).
        let unrouted = call(&http, "get", format!("{base}/no/such/route")).await;
        for (path, methods) in described(&doc, tag) {
            for method in methods {
                let concrete = path.replace("{id}", "no-such-id");
                let got = call(&http, &method, format!("{base}{concrete}")).await;
                assert_ne!(
                    got.0, 405,
                    "{tag} {method} {path} is not routed for that method"
                );
                assert_ne!(got, unrouted, "{tag} {method} {path} is not routed");
            }
        }
    }
}

fn schemathesis() -> PathBuf {
    if let Some(bin) = std::env::var_os("SCHEMATHESIS_BIN") {
        return bin.into();
    }
    let venv = root().join(".venv/bin/schemathesis");
    assert!(
        venv.is_file(),
        "no schemathesis: run `bash tests/run.sh` (installs it into .venv/) or set SCHEMATHESIS_BIN"
    );
    venv
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
        .find(|path| match path.split_once('{') {
            Some((fixed, _)) => rest
                .strip_prefix(fixed)
                .is_some_and(|id| !id.is_empty() && !id.contains('/')),
            None => rest == path.as_str(),
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

#[test]
fn schemathesis_finds_nothing_on_any_listener() {
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
                .is_some_and(|p| p != "/openapi.json" && paths[&p].contains(method))
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
