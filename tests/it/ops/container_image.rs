//! The container image, built from the repository's `Dockerfile`, both stages, and run with
//! podman (Debian's `podman` and `runc`; `tests/run.sh` installs them and debootstrap). No image
//! can be pulled from Docker Hub here, so the `FROM` images are local stand-ins under the same
//! names (`support/base_images.rs`: Debian from debootstrap, the Rust image from it and this
//! machine's toolchain of the same version), made once and kept in podman's storage. A broken
//! `COPY`, a path or a system library the build or the runtime stage lacks fails here as it would
//! fail `docker build .`.
//!
//! The build stage runs `cargo build --release`: on the host network (crates.io), with this
//! machine's CA bundle mounted for its `RUN` steps (where a TLS-intercepting proxy stands in
//! front of crates.io), and with the Dockerfile's cache mounts (the registry and `target/`),
//! which podman keeps between runs: the first build compiles everything, later ones what changed.
//!
//! The container shares the host network (no bridge is needed) and binds 127.0.0.1 on free
//! ports; it runs like the Kubernetes manifest runs it (read-only root, a writable data
//! directory). It is removed with its image at the end, also when an assertion fails.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use crate::support::base_images::{self, tail};
use crate::support::dockerfile;
use crate::support::podman::{BUILD, podman};
use crate::support::redis::free_port;
use crate::support::require;
use ratelimitd_core::clock::Stopwatch;

/// This machine's CA bundle (Debian's path), given to the build's `RUN` steps when it exists.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Removes the container and the image, however the test ends.
/// The rlimits every run of the image sets: runc cannot set its defaults on this kernel.
const RLIMITS: [&str; 4] = [
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1000:1000",
];

struct Cleanup {
    container: String,
    image: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let limit = Duration::from_secs(60);
        podman(&["rm", "--force", "--time", "0", &self.container], limit);
        podman(&["rmi", "--force", &self.image], limit);
    }
}

/// The `/proc` status line `Uid:` of process `pid`: its real, effective, saved and fs uids.
fn uids(pid: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace()
        .skip(1)
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn the_dockerfile_builds_an_image_that_runs_as_non_root_answers_and_reports_healthy() {
    require!(Podman);
    let watch = Stopwatch::start();
    let bases = dockerfile::base_images(&dockerfile::text());
    assert!(!bases.is_empty(), "the Dockerfile names no base image");
    for image in &bases {
        base_images::ensure(image);
    }
    eprintln!("base images {bases:?} ready in {:?}", watch.elapsed());

    let tag = std::process::id();
    let guard = Cleanup {
        container: format!("ratelimitd-test-{tag}"),
        image: format!("localhost/ratelimitd-test:{tag}"),
    };
    let root = env!("CARGO_MANIFEST_DIR");
    let file = Path::new(root).join("Dockerfile");
    let ca = format!("{CA_BUNDLE}:{CA_BUNDLE}:ro");
    let mut build = BUILD.to_vec();
    build.extend(["--tag", &guard.image, "--file", file.to_str().unwrap()]);
    if Path::new(CA_BUNDLE).is_file() {
        build.extend(["--volume", ca.as_str()]);
    }
    build.push(root);
    let building = Stopwatch::start();
    let (ok, out, err) = podman(&build, Duration::from_secs(60 * 60));
    assert!(
        ok,
        "podman build of the Dockerfile:\n{}\n{}",
        tail(&out, 60),
        tail(&err, 60)
    );
    eprintln!("the Dockerfile built in {:?}", building.elapsed());

    let [http, grpc, debug, admin] = [(); 4].map(|_| free_port().to_string());
    let env = [
        ("HOST", "127.0.0.1"),
        ("PORT", http.as_str()),
        ("GRPC_HOST", "127.0.0.1"),
        ("GRPC_PORT", grpc.as_str()),
        ("DEBUG_HOST", "127.0.0.1"),
        ("DEBUG_PORT", debug.as_str()),
        ("ADMIN_PORT", admin.as_str()),
        ("USE_STATSD", "false"),
    ];
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let data = tempfile::tempdir().unwrap();
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let data_volume = format!("{}:/var/lib/ratelimitd", data.path().display());
    let mut run = vec![
        "run",
        "--detach",
        "--name",
        &guard.container,
        "--network",
        "host",
        // As the Kubernetes manifest runs it: read-only root, and an empty world-writable
        // directory (what an emptyDir volume is) for the data.
        "--read-only",
        "--volume",
        &data_volume,
    ];
    run.extend(RLIMITS);
    for e in &env {
        run.extend(["--env", e.as_str()]);
    }
    run.push(&guard.image);
    let (ok, out, err) = podman(&run, Duration::from_secs(60));
    assert!(ok, "podman run:\n{out}\n{err}");

    // Up within 30 s (it is usually well under one).
    let client = reqwest::Client::new();
    let health = format!("http://127.0.0.1:{http}/healthcheck");
    let watch = Stopwatch::start();
    let answer = loop {
        if let Ok(r) = client.get(&health).send().await {
            break (r.status().as_u16(), r.text().await.unwrap());
        }
        let logs = || podman(&["logs", &guard.container], Duration::from_secs(30)).2;
        assert!(
            watch.elapsed() < Duration::from_secs(30),
            "no /healthcheck:\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(answer, (200, "OK".to_string()));

    // A decision from the image's configuration (examples/config: 10 a second per address).
    let body = r#"{"domain":"example","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}"#;
    let r = client
        .post(format!("http://127.0.0.1:{http}/json"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["overallCode"], "OK", "{v}");
    assert_eq!(
        v["statuses"][0]["currentLimit"]["requestsPerUnit"], 10,
        "{v}"
    );
    assert_eq!(v["statuses"][0]["limitRemaining"], 9, "{v}");

    // The server process is the image's non-root user, and its policy database is in the data
    // directory (the only writable one).
    let (ok, pid, err) = podman(
        &["inspect", "--format", "{{.State.Pid}}", &guard.container],
        Duration::from_secs(30),
    );
    assert!(ok, "{err}");
    assert_eq!(uids(pid.trim()), "10001 10001 10001 10001");
    let db = data.path().join("policy.db");
    assert!(db.exists(), "no policy.db in the data directory");
    assert_eq!(std::fs::metadata(&db).unwrap().uid(), 10001);

    // The image's HEALTHCHECK passes, and its command fails where no /livez answers 200.
    let (ok, out, err) = podman(
        &["healthcheck", "run", &guard.container],
        Duration::from_secs(30),
    );
    assert!(ok, "podman healthcheck run:\n{out}\n{err}");
    let format = "{{json .Config.Healthcheck.Test}}";
    let (ok, test, err) = podman(
        &["inspect", "--format", format, &guard.container],
        Duration::from_secs(30),
    );
    assert!(ok, "{err}");
    let test: Vec<String> = serde_json::from_str(test.trim()).unwrap();
    assert_eq!(test[0], "CMD", "{test:?}");
    let on_grpc = format!("PORT={grpc}");
    let mut exec = vec!["exec", "--env", on_grpc.as_str(), guard.container.as_str()];
    exec.extend(test[1..].iter().map(String::as_str));
    let (ok, _, _) = podman(&exec, Duration::from_secs(30));
    assert!(!ok, "the health check passes on the gRPC port");

    // The image's release build honours no test switch: an environment copied from a test setup
    // (a manual clock, even next to a loopback debug port) stops it at startup, naming the
    // variable, instead of freezing time for every limit.
    let mut refused = vec!["run", "--rm", "--network", "host"];
    refused.extend(RLIMITS);
    let hooks = [
        "RATELIMITD_TEST_MANUAL_CLOCK=1000000".to_string(),
        "DEBUG_HOST=127.0.0.1".to_string(),
    ];
    for e in env.iter().chain(&hooks) {
        refused.extend(["--env", e.as_str()]);
    }
    refused.push(&guard.image);
    let (ok, out, err) = podman(&refused, Duration::from_secs(60));
    assert!(!ok, "the image started with a test switch:\n{out}\n{err}");
    assert!(
        err.contains("RATELIMITD_TEST_MANUAL_CLOCK")
            && err.contains("release builds do not honour"),
        "{err}"
    );
    drop(guard);
}
