//! The repository's `Dockerfile`, read by the tests that check the image it builds
//! (`container_image.rs` runs its runtime stage, `k8s_recipes.rs` checks the manifests against
//! it): instructions as logical lines, continuations joined.

use std::path::PathBuf;

/// The Dockerfile's text.
pub(crate) fn text() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Dockerfile");
    std::fs::read_to_string(path).expect("a Dockerfile at the repository root")
}

/// Every instruction of `text`: comments dropped, `\` continuations joined into one line.
pub(crate) fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// The instructions of each stage, `FROM` first.
pub(crate) fn stages(text: &str) -> Vec<Vec<String>> {
    let mut stages: Vec<Vec<String>> = Vec::new();
    for i in instructions(text) {
        if i.starts_with("FROM ") || stages.is_empty() {
            stages.push(Vec::new());
        }
        stages.last_mut().unwrap().push(i);
    }
    stages
}

/// The last stage: what the image is.
pub(crate) fn runtime_stage() -> Vec<String> {
    stages(&text()).pop().expect("a stage")
}

/// The arguments of `stage`'s instructions named `name` (e.g. `USER`, `EXPOSE`).
pub(crate) fn args<'a>(stage: &'a [String], name: &str) -> Vec<&'a str> {
    let prefix = format!("{name} ");
    stage
        .iter()
        .filter_map(|i| i.strip_prefix(&prefix))
        .collect()
}

/// `KEY=value` pairs of the stage's `ENV` instructions.
pub(crate) fn env(stage: &[String]) -> Vec<(String, String)> {
    args(stage, "ENV")
        .into_iter()
        .flat_map(|a| a.split_whitespace())
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
