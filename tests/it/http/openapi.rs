//! The OpenAPI description (`docs/openapi.json`, served as `/openapi.json`) against the code: the
//! routes the routers declare are exactly the operations it describes, each on the listener its
//! tag names, and every described operation is served by the running binary. `openapi_fuzz.rs`
//! fuzzes them.

use std::collections::{BTreeMap, BTreeSet};

use crate::support::openapi::{TOKEN, base, described, document, env, root};
use crate::support::process::spawn;
use ratelimitd::testing::rust_files;
use serde_json::Value;

/// Each router's source file and the tag of its listener in the description.
const ROUTERS: [(&str, &str); 3] = [
    ("src/http/mod.rs", "main"),
    ("src/http/admin/mod.rs", "admin"),
    ("src/http/debug.rs", "debug"),
];

/// Routes served outside the description: the debug port's clock control exists only on the
/// test-only manual clock, and Prometheus's `/metrics` has its own listener (docs/operations.md).
const UNDESCRIBED: [&str; 2] = ["/test/clock", "&path"];

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

#[test]
fn the_routers_serve_exactly_the_described_operations() {
    let doc = document();
    // A route declared in a file this test does not read would escape it.
    for file in rust_files(&root().join("src")) {
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
