//! The layering rules Cargo cannot check inside one crate, checked on the source text.
//!
//! - The layer table: the server module table of `docs/design/architecture.md`, read top to
//!   bottom, is the order of the layers; a module may name only modules at its own row or below.
//!   Every module under `src/` must have a row, so a new one is placed on purpose. An import
//!   that points up a row fails [`no_module_names_one_above_it`], which names the file.
//! - `settings` sits at the top, next to `app`, and translates environment variables and flags
//!   into the options types the components own; no component names it. A component that did
//!   would point an arrow up (settings already depends on every component it configures) and
//!   would tie its options to the Go variable table.
//!
//! A module is named by a `crate::` path (also inside a `use crate::{…}` group) or reached
//! through `super::` from deep enough. Comment lines are skipped, so a doc line may still say
//! where a variable is read. The crate root (`lib.rs`), the binary (`main.rs`) and this file are
//! not components.

use std::path::Path;

use crate::testing::rust_files;

/// The top layer: these may name `settings` (`testing` re-exports its parsers for the tests).
const TOP: &[&str] = &["settings", "app", "main", "testing"];

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
    let files = rust_files(&src);
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

/// Files under `src/` that are not a component: the crate root declares every module and
/// re-exports the core's, the binary names the library as `ratelimitd::`, and this file spells
/// paths out as test cases.
const NOT_COMPONENTS: &[&str] = &["lib", "main", "layering"];

/// The rows of the server module table of `docs/design/architecture.md`, top first: the
/// modules named in backquotes in each row's first cell.
fn layer_table() -> Vec<Vec<String>> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/design/architecture.md");
    let text = std::fs::read_to_string(&doc).unwrap();
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("| server module"));
    assert!(lines.next().is_some(), "no server module table in {doc:?}");
    lines
        .skip(1) // the |---| line
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let first = row.trim_start_matches('|').split('|').next().unwrap_or("");
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .map(String::from)
                .collect()
        })
        .collect()
}

/// The code of `text` without comment lines, whitespace kept only between two words (a single
/// space), so that `use crate::x` keeps its `crate` a word of its own while a path split over
/// lines or spread through a `use` group reads as one string.
fn spaced_code(text: &str) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut gap = false;
    for c in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .flat_map(|l| l.chars().chain([' ']))
    {
        if c.is_whitespace() {
            gap = true;
            continue;
        }
        if gap && word(c) && out.chars().next_back().is_some_and(word) {
            out.push(' ');
        }
        gap = false;
        out.push(c);
    }
    out
}

/// The top-level modules `code` (see [`spaced_code`]) names, for a file whose module path under
/// `src/` is `path` (`["region", "view"]` for `src/region/view.rs`, `["region"]` for its
/// `mod.rs`): `crate::x`, each name of a `use crate::{…}` group, and `super::…::x` when the
/// supers climb to the crate root.
fn named_modules(code: &str, path: &[String]) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        // `ratelimitd_core::` and `$crate::` are not this crate's paths.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The names at the group's first level: after `{` or a `,` at depth 1.
            let mut depth = 1;
            let mut start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => start = true,
                    _ if start && depth == 1 => {
                        out.push(ident(&group[i..]));
                        start = false;
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
        } else {
            out.push(ident(rest));
        }
    }
    for (at, _) in code.match_indices("super::") {
        if code[..at].ends_with("super::") {
            continue; // counted from the first `super::` of the chain
        }
        let mut rest = &code[at..];
        let mut up = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            rest = r;
            up += 1;
        }
        if up == path.len() {
            out.push(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty() && m != "self");
    out
}

/// The module path of `file` under `src` (see [`named_modules`]).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut path: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if path.len() > 1 && path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    path
}

#[test]
fn the_layer_table_lists_every_module_once() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let table = layer_table();
    let listed: Vec<&String> = table.iter().flatten().collect();
    let unique: std::collections::BTreeSet<&String> = listed.iter().copied().collect();
    assert_eq!(
        listed.len(),
        unique.len(),
        "a module has two rows: {table:?}"
    );
    let files = rust_files(&src);
    let modules: std::collections::BTreeSet<String> = files
        .iter()
        .map(|f| component(&src, f))
        .filter(|c| !NOT_COMPONENTS.contains(&c.as_str()))
        .collect();
    let missing: Vec<&String> = modules.iter().filter(|m| !unique.contains(m)).collect();
    assert!(
        missing.is_empty(),
        "give these modules a row in the server module table of docs/design/architecture.md: \
         {missing:?}"
    );
    let gone: Vec<&&String> = unique.iter().filter(|m| !modules.contains(**m)).collect();
    assert!(
        gone.is_empty(),
        "the table lists modules src/ does not have: {gone:?}"
    );
}

#[test]
fn no_module_names_one_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let table = layer_table();
    let row = |m: &str| table.iter().position(|r| r.iter().any(|x| x == m));
    let files = rust_files(&src);
    let mut upward = Vec::new();
    for file in &files {
        let me = component(&src, file);
        let Some(mine) = row(&me) else { continue };
        let text = std::fs::read_to_string(file).unwrap();
        let path = module_path(&src, file);
        for named in named_modules(&spaced_code(&text), &path) {
            if let Some(theirs) = row(&named)
                && theirs < mine
            {
                let rel = file.strip_prefix(&src).unwrap().display();
                upward.push(format!("src/{rel} names {named}"));
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(
        upward.is_empty(),
        "these imports point up the layer table of docs/design/architecture.md (a module may \
         name only modules at its row or below; hand the lower module a value or a closure \
         instead, or move the type down):\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_layer_check_sees_every_form_of_a_path() {
    let at = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
    let names = |text: &str, path: &[&str]| named_modules(&spaced_code(text), &at(path));
    assert_eq!(
        names("use crate::region::Regional;", &["metrics"]),
        ["region"]
    );
    assert_eq!(
        names(
            "use crate::{\n    clock::Clock,\n    store::{redis::X, Y},\n    reload,\n};",
            &["metrics", "x"]
        ),
        ["clock", "store", "reload"]
    );
    assert_eq!(
        names(
            "let f = crate::insight::decision_log::TARGET;",
            &["telemetry"]
        ),
        ["insight"]
    );
    assert_eq!(
        names(
            "use super::super::fleet::FleetHandle;",
            &["app", "features"]
        ),
        ["fleet"]
    );
    // Inside the component: `super::` that stays below the crate root, and other crates.
    assert!(names("use super::view::ShareGauge;", &["region", "metrics"]).is_empty());
    assert!(names("use ratelimitd_core::store::Store;", &["store"]).is_empty());
    assert!(names("// see crate::reload\nlet x = 1;", &["region"]).is_empty());
}
