//! The repository's `Dockerfile`, read by the tests that check the image it builds
//! (`container_image.rs` builds it on stand-ins for its base images and runs it, `k8s_recipes.rs`
//! checks the manifests against its runtime stage): instructions as logical lines, continuations
//! joined.

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

/// The images the stages of `text` start `FROM`, in order: neither `scratch` nor an earlier
/// stage's name (`FROM build`).
pub(crate) fn base_images(text: &str) -> Vec<String> {
    let mut stage_names: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for stage in stages(text) {
        let from = stage[0].strip_prefix("FROM ").expect("a stage starts FROM");
        // `FROM [--platform=…] image [AS name]`.
        let words: Vec<&str> = from
            .split_whitespace()
            .filter(|w| !w.starts_with("--"))
            .collect();
        let image = words[0].to_string();
        if image != "scratch" && !stage_names.contains(&image) && !images.contains(&image) {
            images.push(image);
        }
        if let [_, as_, name] = words[..]
            && as_.eq_ignore_ascii_case("as")
        {
            stage_names.push(name.to_string());
        }
    }
    images
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
