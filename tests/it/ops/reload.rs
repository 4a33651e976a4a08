//! Config reload through the real server, by the ways files change: added, edited, renamed over,
//! deleted and re-created, a Kubernetes ConfigMap `..data` swap, a runtime-root symlink swap.
//! Waiting for a watcher is real time: every wait polls with a deadline.

use std::os::unix::fs::symlink;
use std::path::Path;

use crate::support::reload::*;
use crate::support::*;

#[tokio::test]
async fn files_added_changed_renamed_over_and_deleted_are_applied() {
    let a = cfg("a", "k", 5);
    let ts = TestServer::start(&[("a.yaml", &a)], &[("RUNTIME_IGNOREDOTFILES", "true")]).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(5));
    std::fs::write(ts.dir.path().join("b.yaml"), cfg("b", "k", 9)).unwrap();
    wait_limit(&ts, "b", "k", Some(9)).await;
    std::fs::write(ts.dir.path().join("a.yaml"), cfg("a", "k", 6)).unwrap();
    wait_limit(&ts, "a", "k", Some(6)).await;
    // An editor's save: write a temp (dot) file, rename it over the original.
    replace(&ts.dir.path().join("a.yaml"), &cfg("a", "k", 7));
    wait_limit(&ts, "a", "k", Some(7)).await;
    std::fs::remove_file(ts.dir.path().join("b.yaml")).unwrap();
    wait_limit(&ts, "b", "k", None).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(7));
    assert_eq!(ts.running().config.load_failures(), 0);
    ts.shutdown().await;
}

#[tokio::test]
async fn a_single_config_file_is_reloaded_when_replaced_or_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("limits.yaml");
    std::fs::write(&file, cfg("a", "k", 1)).unwrap();
    let f = file.display().to_string();
    let s = settings(
        dir.path(),
        &[("RATELIMITD_CONFIG", &f), ("CONFIG_POLL_INTERVAL", "0")],
    );
    let ts = start_with(dir, s).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(1));
    replace(&file, &cfg("a", "k", 2));
    wait_limit(&ts, "a", "k", Some(2)).await;
    std::fs::remove_file(&file).unwrap();
    eventually("a failed load of the missing file", || async {
        ts.running().config.load_failures() >= 1
    })
    .await;
    assert_eq!(limit(&ts, "a", "k").await, Some(2), "old config kept");
    std::fs::write(&file, cfg("a", "k", 3)).unwrap();
    wait_limit(&ts, "a", "k", Some(3)).await;
    ts.shutdown().await;
}

/// Lays out a ConfigMap volume version: `..<ts>/<files>`, then points `..data` at it with an
/// atomic rename of a fresh symlink, as the kubelet does, and removes the previous version.
fn configmap_version(mount: &Path, stamp: &str, files: &[(&str, String)], previous: Option<&str>) {
    let version = mount.join(stamp);
    std::fs::create_dir(&version).unwrap();
    for (name, contents) in files {
        std::fs::write(version.join(name), contents).unwrap();
        let top = mount.join(name);
        if std::fs::symlink_metadata(&top).is_err() {
            symlink(Path::new("..data").join(name), &top).unwrap();
        }
    }
    let tmp = mount.join("..data_tmp");
    symlink(stamp, &tmp).unwrap();
    std::fs::rename(&tmp, mount.join("..data")).unwrap();
    if let Some(prev) = previous {
        std::fs::remove_dir_all(mount.join(prev)).unwrap();
    }
}

#[tokio::test]
async fn a_configmap_data_symlink_swap_is_applied_by_events_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("ratelimit/config");
    std::fs::create_dir_all(&mount).unwrap();
    configmap_version(
        &mount,
        "..2026_11_21_01",
        &[("a.yaml", cfg("a", "k", 1))],
        None,
    );
    let env = [
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("RUNTIME_WATCH_ROOT", "false"),
        ("RUNTIME_IGNOREDOTFILES", "true"),
        ("CONFIG_POLL_INTERVAL", "0"),
    ];
    let root = dir.path().to_path_buf();
    let ts = start_runtime(dir, &root, &env).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(1));
    let v2 = [("a.yaml", cfg("a", "k", 2)), ("b.yaml", cfg("b", "k", 20))];
    configmap_version(&mount, "..2026_11_21_02", &v2, Some("..2026_11_21_01"));
    wait_limit(&ts, "a", "k", Some(2)).await;
    wait_limit(&ts, "b", "k", Some(20)).await;
    // A second swap: the watch must follow the new `..data` target.
    let v3 = [("a.yaml", cfg("a", "k", 3)), ("b.yaml", cfg("b", "k", 30))];
    configmap_version(&mount, "..2026_11_21_03", &v3, Some("..2026_11_21_02"));
    wait_limit(&ts, "b", "k", Some(30)).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(3));
    assert_eq!(
        ts.running().config.load_failures(),
        0,
        "{}",
        rlconfig(&ts).await
    );
    ts.shutdown().await;
}

#[tokio::test]
async fn a_runtime_root_symlink_swap_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    for (v, rpu) in [("v1", 1), ("v2", 2)] {
        let d = dir.path().join(v).join("ratelimit/config");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a.yaml"), cfg("a", "k", rpu)).unwrap();
    }
    let current = dir.path().join("current");
    symlink("v1", &current).unwrap();
    let ts = start_runtime(dir, &current, &[("RUNTIME_SUBDIRECTORY", "ratelimit")]).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(1));
    let tmp = ts.dir.path().join("current_tmp");
    symlink("v2", &tmp).unwrap();
    std::fs::rename(&tmp, &current).unwrap();
    wait_limit(&ts, "a", "k", Some(2)).await;
    // Editing a file under the new root counts too (the Go service would miss it).
    let file = ts.dir.path().join("v2/ratelimit/config/a.yaml");
    std::fs::write(file, cfg("a", "k", 4)).unwrap();
    wait_limit(&ts, "a", "k", Some(4)).await;
    ts.shutdown().await;
}

#[tokio::test]
async fn a_config_directory_deleted_and_recreated_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(conf.join("a.yaml"), cfg("a", "k", 1)).unwrap();
    let c = conf.display().to_string();
    let s = settings(
        dir.path(),
        &[("RATELIMITD_CONFIG", &c), ("CONFIG_POLL_INTERVAL", "0")],
    );
    let ts = start_with(dir, s).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(1));
    std::fs::remove_dir_all(&conf).unwrap();
    eventually("the missing directory to fail", || async {
        ts.running().config.load_failures() >= 1
    })
    .await;
    assert_eq!(limit(&ts, "a", "k").await, Some(1), "old config kept");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(conf.join("a.yaml"), cfg("a", "k", 2)).unwrap();
    wait_limit(&ts, "a", "k", Some(2)).await;
    // The new directory is watched: a later edit is seen too.
    std::fs::write(conf.join("a.yaml"), cfg("a", "k", 3)).unwrap();
    wait_limit(&ts, "a", "k", Some(3)).await;
    ts.shutdown().await;
}
