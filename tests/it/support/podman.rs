//! podman (and the programs around it, such as debootstrap) run with a deadline, for the container
//! image test and the base images it builds on (`base_images.rs`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

/// podman's global flags here: runc instead of crun (crun cannot set the rlimits on this
/// kernel's hybrid cgroups), and cgroupfs (no systemd).
pub(crate) const GLOBAL_FLAGS: [&str; 4] = ["--runtime", "runc", "--cgroup-manager", "cgroupfs"];

/// `podman build` as the tests run it: local bases only (never pull), the host network (apt and
/// crates.io reached as on the host), no layer cache (it would keep an image per source change;
/// cache mounts keep a build incremental), Docker format (the OCI format has no HEALTHCHECK).
pub(crate) const BUILD: [&str; 7] = [
    "build",
    "--pull=never",
    "--network",
    "host",
    "--layers=false",
    "--format",
    "docker",
];

/// What a finished program left: whether it succeeded, its stdout and its stderr.
pub(crate) struct Outcome {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` (stdin closed, output kept in files so that a large build log cannot block it),
/// killed after `limit`; panics when it cannot start or runs over.
pub(crate) fn run(cmd: &mut Command, limit: Duration) -> Outcome {
    let out_dir = tempfile::tempdir().unwrap();
    let (out, err) = (out_dir.path().join("out"), out_dir.path().join("err"));
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} does not start ({e}): run `bash tests/run.sh`"));
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
    let status =
        status.unwrap_or_else(|| panic!("{what} took over {limit:?}:\n{stdout}\n{stderr}"));
    Outcome {
        ok: status.success(),
        stdout,
        stderr,
    }
}

/// Runs podman with `args`, killed after `limit`: (success, stdout, stderr).
pub(crate) fn podman(args: &[&str], limit: Duration) -> (bool, String, String) {
    let o = run(Command::new("podman").args(GLOBAL_FLAGS).args(args), limit);
    (o.ok, o.stdout, o.stderr)
}
