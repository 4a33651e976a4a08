//! The container image, built and run with podman (Debian's `podman` and `runc`; `tests/run.sh`
//! installs them). No image can be pulled here, so the test image is the `Dockerfile`'s runtime
//! stage on `FROM scratch`: the same instructions (user, environment, ports, health check,
//! entrypoint), with the base's part of the filesystem (the dynamic loader and the shared
//! libraries of ratelimitd and of bash, which the health check runs) copied from this machine
//! and the build stage's outputs made from the binary cargo built for the tests.
//!
//! The container shares the host network (no bridge is needed) and binds 127.0.0.1 on free
//! ports; it runs like the Kubernetes manifest runs it (read-only root, a writable data
//! directory). It is removed with its image at the end, also when an assertion fails.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::dockerfile;
use crate::support::redis::free_port;
use crate::support::require;
use ratelimitd::clock::Stopwatch;

/// podman's global flags here: runc instead of crun (crun cannot set the rlimits on this
/// kernel's hybrid cgroups), and cgroupfs (no systemd).
const PODMAN: [&str; 4] = ["--runtime", "runc", "--cgroup-manager", "cgroupfs"];

/// Runs podman with `args`, killed after `limit`: (success, stdout, stderr).
fn podman(args: &[&str], limit: Duration) -> (bool, String, String) {
    let out_dir = tempfile::tempdir().unwrap();
    let (out, err) = (out_dir.path().join("out"), out_dir.path().join("err"));
    let mut child = Command::new("podman")
        .args(PODMAN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("no podman ({e}): run `bash tests/run.sh` (installs it)"));
    let watch = Stopwatch::start();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if watch.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let (stdout, stderr) = (read(&out), read(&err));
    let status = status.unwrap_or_else(|| panic!("podman {args:?} took over {limit:?}: {stderr}"));
    (status.success(), stdout, stderr)
}

/// Removes the container and the image, however the test ends.
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

/// Copies `file` to the same path under `root`.
fn copy_into(root: &Path, file: &Path) {
    let to = root.join(file.strip_prefix("/").unwrap());
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(file, &to).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
}

/// `exe` and the shared libraries `ldd` names for it (the loader included).
fn with_libraries(exe: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(exe).output().expect("ldd runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut files = vec![exe.to_path_buf()];
    // Lines are `libc.so.6 => /lib/…/libc.so.6 (0x…)` or `/lib64/ld-linux-x86-64.so.2 (0x…)`.
    let paths = text.split_whitespace().filter(|w| w.starts_with('/'));
    files.extend(paths.map(PathBuf::from));
    files
}

/// The runtime stage on `scratch`: its `COPY --from=build SRC` read `build/SRC` from the context.
fn test_containerfile() -> String {
    let mut out = vec!["FROM scratch".to_string(), "COPY rootfs/ /".to_string()];
    for i in dockerfile::runtime_stage().into_iter().skip(1) {
        let line = match i.strip_prefix("COPY ") {
            Some(rest) if rest.contains("--from=build ") => {
                // The first absolute path is the source: the build stage's, here in build/.
                let rest = format!(" {}", rest.replace("--from=build ", ""));
                let source = rest.find(" /").expect("a source path") + 1;
                format!("COPY{}build{}", &rest[..source], &rest[source..])
            }
            _ => i,
        };
        out.push(line);
    }
    out.join("\n") + "\n"
}

/// The build context: the base's files, and what the build stage leaves in `/out` and `/state`.
fn build_context(dir: &Path) {
    let text = dockerfile::text();
    // The build stage's outputs, made here from the test binary.
    for step in [
        "cp target/release/ratelimitd /out/usr/local/bin/ratelimitd",
        "cp examples/config/example.yaml /out/data/ratelimit/config/",
        "mkdir -p /out/usr/local/bin /out/data/ratelimit/config /state",
    ] {
        assert!(
            text.contains(step),
            "the build stage no longer runs `{step}`"
        );
    }
    let out = dir.join("build/out");
    let config = out.join("data/ratelimit/config");
    std::fs::create_dir_all(out.join("usr/local/bin")).unwrap();
    std::fs::create_dir_all(&config).unwrap();
    std::fs::create_dir_all(dir.join("build/state")).unwrap();
    let binary = env!("CARGO_BIN_EXE_ratelimitd");
    std::fs::copy(binary, out.join("usr/local/bin/ratelimitd")).unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config/example.yaml");
    std::fs::copy(example, config.join("example.yaml")).unwrap();
    // The base image's part: the libraries the binary needs, and bash (the health check).
    let rootfs = dir.join("rootfs");
    for exe in [Path::new(binary), Path::new("/bin/bash")] {
        for file in with_libraries(exe) {
            if file != Path::new(binary) {
                copy_into(&rootfs, &file);
            }
        }
    }
    std::fs::write(dir.join("Containerfile"), test_containerfile()).unwrap();
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
async fn the_image_runs_as_non_root_answers_and_reports_healthy() {
    require!(Podman);
    let tag = std::process::id();
    let guard = Cleanup {
        container: format!("ratelimitd-test-{tag}"),
        image: format!("localhost/ratelimitd-test:{tag}"),
    };
    let ctx = tempfile::tempdir().unwrap();
    build_context(ctx.path());
    let ctx_path = ctx.path().to_str().unwrap();
    let file = ctx.path().join("Containerfile");
    // Docker format: the OCI format has no HEALTHCHECK.
    let build = [
        "build",
        "--format",
        "docker",
        "--tag",
        &guard.image,
        "--file",
        file.to_str().unwrap(),
        ctx_path,
    ];
    let (ok, out, err) = podman(&build, Duration::from_secs(180));
    assert!(ok, "podman build:\n{out}\n{err}");

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
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1000:1000",
        // As the Kubernetes manifest runs it: read-only root, and an empty world-writable
        // directory (what an emptyDir volume is) for the data.
        "--read-only",
        "--volume",
        &data_volume,
    ];
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
    drop(guard);
}
