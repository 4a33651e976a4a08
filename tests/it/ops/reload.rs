//! Config reload through the real server, by the ways files change: added, edited, renamed over,
//! deleted and re-created, a Kubernetes ConfigMap `..data` swap, a runtime-root symlink swap.
//! Waiting for a watcher is real time: every wait polls with a deadline. The periodic re-read is
//! off (`CONFIG_POLL_INTERVAL=0`) throughout: it would hide a change the watcher missed.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd::testing;
use ratelimitd::testing::{WatchOptions, WatchTarget, watch_loop};

use crate::support::reload::*;
use crate::support::*;

#[tokio::test]
async fn files_added_changed_renamed_over_and_deleted_are_applied() {
    let a = cfg("a", "k", 5);
    let env = [
        ("RUNTIME_IGNOREDOTFILES", "true"),
        ("CONFIG_POLL_INTERVAL", "0"),
    ];
    let ts = TestServer::start(&[("a.yaml", &a)], &env).await;
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
    let env = [
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("CONFIG_POLL_INTERVAL", "0"),
    ];
    let ts = start_runtime(dir, &current, &env).await;
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

/// An edit made the moment the service has started, before its watcher task has run (a
/// single-threaded runtime runs it at the test's first wait), is applied: the files are read
/// again once the watches are in place.
#[tokio::test]
async fn an_edit_right_after_startup_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), cfg("a", "k", 1)).unwrap();
    let s = settings(dir.path(), &[("CONFIG_POLL_INTERVAL", "0")]);
    let running = testing::start(&s).await.unwrap();
    std::fs::write(dir.path().join("a.yaml"), cfg("a", "k", 2)).unwrap();
    let url = format!("http://{}", running.grpc_addr);
    let ts = TestServer {
        grpc: RateLimitServiceClient::connect(url).await.unwrap(),
        running: Some(running),
        dir,
        http: reqwest::Client::new(),
    };
    wait_limit(&ts, "a", "k", Some(2)).await;
    ts.shutdown().await;
}

/// The watch loop on a directory that is deleted and comes back: an edit landing while the round
/// that its return started is reading (here made by that round itself, right after its read) is
/// seen, because the new directory is watched before that round reads.
#[tokio::test]
async fn an_edit_while_a_returned_directory_is_read_starts_another_round() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(conf.join("a.yaml"), "1").unwrap();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let opts = WatchOptions {
        debounce: Duration::from_millis(20),
        max_delay: Duration::from_millis(200),
        poll_interval: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (rounds, file) = (seen.clone(), conf.join("a.yaml"));
    let watching = tokio::spawn(watch_loop(
        vec![WatchTarget::tree(conf.clone())],
        opts,
        async {
            let _ = stopped.await;
        },
        move || {
            let (rounds, file) = (rounds.clone(), file.clone());
            async move {
                let read = std::fs::read_to_string(&file).unwrap_or_else(|_| "missing".into());
                if read == "2" {
                    std::fs::write(&file, "3").unwrap();
                }
                rounds.lock().unwrap().push(read);
            }
        },
    ));
    // The loop arms its watcher when it first runs: on this single-threaded runtime, now.
    tokio::task::yield_now().await;
    std::fs::remove_dir_all(&conf).unwrap();
    let last = |seen: &Arc<Mutex<Vec<String>>>| seen.lock().unwrap().last().cloned();
    eventually("a round to find the directory gone", || async {
        last(&seen).as_deref() == Some("missing")
    })
    .await;
    // The directory comes back whole (renamed into place with its file), as a deploy would.
    let staged = dir.path().join("staged");
    std::fs::create_dir(&staged).unwrap();
    std::fs::write(staged.join("a.yaml"), "2").unwrap();
    std::fs::rename(&staged, &conf).unwrap();
    eventually(
        "a round to read the edit made during the previous one",
        || async { seen.lock().unwrap().iter().any(|r| r == "3") },
    )
    .await;
    drop(stop);
    watching.await.unwrap();
}
