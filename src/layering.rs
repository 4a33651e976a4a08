//! The layering rule Cargo cannot check inside one crate: `settings` sits at the top, next to
//! `app`, and translates environment variables and flags into the options types the components
//! own; no component names it. A component that did would point an arrow up (settings already
//! depends on every component it configures) and would tie its options to the Go variable table.
//!
//! The rule is checked on the source text: no Rust file under `src/` outside the top layer may
//! name `crate::settings` (in a path or inside a `use crate::{…}` group) or reach it through
//! `super::`. Comments are skipped, so a doc line may still say where a variable is read.

use std::path::{Path, PathBuf};

/// The top layer: these may name `settings` (`testing` re-exports its parsers for the tests).
const TOP: &[&str] = &["settings", "app", "main", "testing"];

/// Every `.rs` file under `dir`, recursively.
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

/// The code of `text` without comment lines, with whitespace removed, so that a path split
/// over lines or spread through a `use` group reads as one string.
fn code(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
        .collect()
}

/// True when `code` (see [`code`]) names the settings module.
fn names_settings(code: &str) -> bool {
    if code.contains("crate::settings") || code.contains("super::settings") {
        return true;
    }
    // `use crate::{…, settings::X, …}` and `use crate::{settings, …}`.
    code.match_indices("usecrate::{").any(|(at, _)| {
        let group = &code[at..];
        let group = &group[..group.find(';').unwrap_or(group.len())];
        ["{settings", ",settings"].iter().any(|p| group.contains(p))
    })
}

/// The component a file belongs to: its first folder under `src/`, or its file name without
/// `.rs` (`telemetry.rs` and `telemetry/` are one component).
fn component(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn no_component_names_the_settings() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut covered = std::collections::BTreeSet::new();
    let mut offenders = Vec::new();
    for file in &files {
        let c = component(&src, file);
        // This file spells the forbidden paths out as test cases.
        let me = c == "layering";
        if me || TOP.contains(&c.as_str()) {
            continue;
        }
        covered.insert(c);
        if names_settings(&code(&std::fs::read_to_string(file).unwrap())) {
            offenders.push(file.strip_prefix(&src).unwrap().display().to_string());
        }
    }
    assert!(
        offenders.is_empty(),
        "these files name crate::settings, whose arrows must point down (define the options \
         type in the component and let src/settings map into it): {offenders:?}"
    );
    // The components the options were moved into are among those checked.
    for c in [
        "grpc",
        "http",
        "listener",
        "metrics",
        "xds",
        "telemetry",
        "store",
        "policy",
        "region",
        "fleet",
    ] {
        assert!(covered.contains(c), "{c} is not checked: {covered:?}");
    }
}

#[test]
fn the_check_sees_every_form_of_the_import() {
    for text in [
        "use crate::settings::Limits;",
        "fn f(l: crate::settings::ConnLimits) {}",
        "use crate::{\n    clock::Clock,\n    settings::{Secret, Resilience},\n};",
        "use crate::{settings, clock};",
        "use super::super::settings::Secret;",
    ] {
        assert!(names_settings(&code(text)), "{text}");
    }
    for text in [
        "// read from `crate::settings` at startup\nuse crate::limiter::Limits;",
        "use crate::{clock::Clock, limiter::Limits};\nlet settings = 1;",
        "use crate::store::redis::RedisSettings;",
    ] {
        assert!(!names_settings(&code(text)), "{text}");
    }
}
