//! The OpenAPI description `docs/openapi.json` as the tests read it, and the binary they check it
//! against: a spawned `ratelimitd` with the `/check` example configuration, a SQLite policy
//! database and an admin token.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::process::Spawned;

/// The admin token of the spawned binary.
pub(crate) const TOKEN: &str = "openapi-test-token";

/// The repository's root.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `docs/openapi.json`, parsed.
pub(crate) fn document() -> Value {
    let text = std::fs::read_to_string(root().join("docs/openapi.json")).unwrap();
    serde_json::from_str(&text).expect("docs/openapi.json is JSON")
}

/// The described operations of the listener tagged `tag`: path → methods (lower case).
pub(crate) fn described(doc: &Value, tag: &str) -> BTreeMap<String, BTreeSet<String>> {
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

/// The binary's settings: the `/check` example configuration, a SQLite policy database in
/// `data`, an admin token.
pub(crate) fn env(data: &Path) -> Vec<(String, String)> {
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

/// The base URL of the listener tagged `tag`.
pub(crate) fn base(s: &Spawned, tag: &str) -> String {
    let addr = match tag {
        "main" => &s.http_addr,
        "admin" => &s.admin_addr,
        "debug" => &s.debug_addr,
        _ => unreachable!("tag {tag}"),
    };
    format!("http://{addr}")
}
