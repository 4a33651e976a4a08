//! Loader: file discovery and naming on real temporary directory trees
//! (`docs/design/contract.md#config-files`).

use std::fs;
use std::path::Path;

use crate::config::*;

fn write(root: &Path, rel: &str, contents: &str) {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, contents).expect("write");
}

/// The server's defaults with `RUNTIME_IGNOREDOTFILES=true`.
const DOTS_SKIPPED: LoadOptions = LoadOptions {
    ignore_dotfiles: true,
    max_file_bytes: crate::config::DEFAULT_MAX_FILE_BYTES,
};

fn names(files: &[ConfigFile]) -> Vec<&str> {
    files.iter().map(|f| f.name.as_str()).collect()
}

/// `root/sub/config/{basic.yaml, nested/deep.yml, .hidden.yaml, .dir/x.yaml}` plus
/// `root/sub/config.top.yaml` and `root/sub/other/o.yaml`, and files that are not YAML and must be
/// skipped: `notes.txt`, a backup copy `basic.yaml.bak`, a script `tool.rs`.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    write(r, "sub/config/basic.yaml", "domain: basic\n");
    write(r, "sub/config/nested/deep.yml", "domain: deep\n");
    write(r, "sub/config/notes.txt", "domain: notes\n");
    write(r, "sub/config/basic.yaml.bak", "domain: basic\n");
    write(r, "sub/config/tool.rs", "fn main() {}\n");
    write(r, "sub/config/.hidden.yaml", "domain: hidden\n");
    write(r, "sub/config/.dir/x.yaml", "domain: x\n");
    write(r, "sub/config.top.yaml", "domain: top\n");
    write(r, "sub/other/o.yaml", "domain: o\n");
    dir
}

#[test]
fn load_path_reads_a_single_file_under_its_given_name() {
    let dir = tree();
    let path = dir.path().join("sub/config/basic.yaml");
    let files = load_path(&path, &DOTS_SKIPPED).expect("loads");
    assert_eq!(names(&files), [path.to_string_lossy().as_ref()]);
    assert_eq!(files[0].contents, "domain: basic\n");
}

#[test]
fn load_path_walks_a_directory_with_dotted_relative_names() {
    let dir = tree();
    let files = load_path(&dir.path().join("sub"), &DOTS_SKIPPED).expect("loads");
    assert_eq!(
        names(&files),
        [
            "config.basic.yaml",
            "config.nested.deep.yml",
            "config.top.yaml",
            "other.o.yaml",
        ]
    );
    let all = load_path(&dir.path().join("sub"), &LoadOptions::default()).expect("loads");
    assert!(names(&all).contains(&"config..hidden.yaml"));
    assert!(names(&all).contains(&"config..dir.x.yaml"));
}

#[test]
fn load_path_on_a_missing_path_is_an_error_naming_it() {
    let dir = tree();
    let missing = dir.path().join("nope");
    let err = load_path(&missing, &DOTS_SKIPPED).expect_err("missing");
    assert!(err.to_string().contains("nope"), "{err}");
}

#[test]
fn runtime_watch_root_keeps_the_app_prefix() {
    let dir = tree();
    let files = load_runtime(dir.path(), "sub", "config", true, &DOTS_SKIPPED).expect("loads");
    assert_eq!(
        names(&files),
        [
            "config.basic.yaml",
            "config.nested.deep.yml",
            "config.top.yaml"
        ]
    );
    let with_dots =
        load_runtime(dir.path(), "sub", "config", true, &LoadOptions::default()).expect("loads");
    assert_eq!(with_dots.len(), 5);
}

#[test]
fn runtime_watch_root_with_empty_subdirectory_loads_nothing() {
    let dir = tree();
    assert!(
        load_runtime(dir.path(), "", "sub", true, &DOTS_SKIPPED)
            .expect("ok")
            .is_empty()
    );
}

#[test]
fn runtime_app_directory_names_are_relative_to_it() {
    let dir = tree();
    let files = load_runtime(dir.path(), "sub", "config", false, &DOTS_SKIPPED).expect("loads");
    assert_eq!(names(&files), ["basic.yaml", "nested.deep.yml"]);
    let with_dots =
        load_runtime(dir.path(), "sub", "config", false, &LoadOptions::default()).expect("loads");
    assert_eq!(
        names(&with_dots),
        [
            ".dir.x.yaml",
            ".hidden.yaml",
            "basic.yaml",
            "nested.deep.yml",
        ]
    );
}

#[test]
fn missing_runtime_root_is_empty_not_an_error() {
    let dir = tree();
    let gone = dir.path().join("gone");
    assert!(
        load_runtime(&gone, "sub", "config", true, &DOTS_SKIPPED)
            .expect("ok")
            .is_empty()
    );
    assert!(
        load_runtime(&gone, "sub", "config", false, &DOTS_SKIPPED)
            .expect("ok")
            .is_empty()
    );
}

#[cfg(unix)]
#[test]
fn symlinked_files_are_followed_and_symlinked_dirs_skipped() {
    let dir = tree();
    let app = dir.path().join("sub/config");
    std::os::unix::fs::symlink(app.join("basic.yaml"), app.join("link.yaml")).expect("link");
    std::os::unix::fs::symlink(app.join("nested"), app.join("linkdir")).expect("link");
    std::os::unix::fs::symlink(app.join("missing"), app.join("dangling")).expect("link");
    let files = load_runtime(dir.path(), "sub", "config", false, &DOTS_SKIPPED).expect("loads");
    assert_eq!(
        names(&files),
        ["basic.yaml", "link.yaml", "nested.deep.yml"]
    );
    assert_eq!(files[1].contents, "domain: basic\n");
}

/// Ten levels of ten aliases each: a few hundred bytes that expand to ten billion nodes.
fn alias_bomb() -> String {
    let mut yaml = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        yaml.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    yaml
}

#[test]
fn an_alias_bomb_is_refused_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.yaml");
    fs::write(&path, alias_bomb()).unwrap();
    let err = load_path(&path, &DOTS_SKIPPED)
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("bomb.yaml") && err.contains("aliases expand"),
        "{err}"
    );

    // Aliases in moderation are fine.
    fs::write(&path, "a: &a [1, 2]\nb: [*a, *a]\n").unwrap();
    assert_eq!(load_path(&path, &DOTS_SKIPPED).expect("loads").len(), 1);
}

#[test]
fn a_file_over_the_size_cap_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("config")).unwrap();
    let path = dir.path().join("config").join("big.yaml");
    // Sparse: the size is read from the metadata, so nothing needs writing.
    let file = fs::File::create(&path).unwrap();
    file.set_len(crate::config::DEFAULT_MAX_FILE_BYTES + 1)
        .unwrap();
    let err = load_runtime(dir.path(), "", "config", false, &DOTS_SKIPPED)
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("big.yaml") && err.contains("limit") && err.contains("CONFIG_MAX_FILE_BYTES"),
        "{err}"
    );
}

#[test]
fn the_size_cap_is_the_one_passed_in_the_options() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("api.yaml");
    let yaml = format!("domain: api\n# {}\n", "x".repeat(2000));
    fs::write(&path, &yaml).unwrap();
    assert_eq!(
        load_path(&path, &LoadOptions::default())
            .expect("loads")
            .len(),
        1
    );
    let small = LoadOptions {
        max_file_bytes: 1024,
        ..LoadOptions::default()
    };
    let err = load_path(&path, &small).expect_err("refused").to_string();
    assert!(
        err.contains("api.yaml") && err.contains("over the 1024-byte limit"),
        "{err}"
    );
}
