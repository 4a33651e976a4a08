//! Server processes that cannot outlive the test. A child is normally stopped by its owner's
//! `Drop`, but a test process that is killed (SIGKILL from a CI timeout, an abort) runs no
//! destructors, and Redis or Envoy would stay behind holding ports and CPU. So each server runs
//! under a small shell guard that holds the read end of a pipe from the test: when the test's
//! end closes, on [`stop`] or on the test process's death, the guard SIGKILLs the server.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The guard: runs "$0 $@" in the background, kills it when stdin reaches EOF, and exits with
/// its status; if the program exits first, the watcher is stopped so it can never signal a
/// reused pid. (A background job's stdin is /dev/null unless redirected, hence fd 3.)
const GUARD: &str = r#"exec 3<&0
"$0" "$@" </dev/null 3<&- & pid=$!
(cat <&3 >/dev/null; kill -KILL "$pid" 2>/dev/null) & watcher=$!
exec 3<&-
wait "$pid"; status=$?
kill "$watcher" 2>/dev/null
exit "$status""#;

/// A command for `program` under the guard; add arguments and output redirections as usual.
pub(crate) fn guarded(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(GUARD).arg(program).stdin(Stdio::piped());
    cmd
}

/// Kills a program started with [`guarded`] (SIGKILL, as a crash would) and waits for it.
pub(crate) fn stop(child: &mut Child) {
    drop(child.stdin.take());
    let _ = child.wait();
}

/// Removes `dirs` when the test process exits: its end of the sweeper's stdin closes with it.
/// For servers kept in statics, which are never dropped, so their temp dirs would stay behind
/// (the servers themselves die with their guards). Keep the returned child for as long as the
/// dirs are in use: dropping it closes the pipe, which removes them.
pub(crate) fn remove_at_exit(dirs: &[&Path]) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(r#"cat >/dev/null; rm -rf -- "$@""#)
        .arg("sh")
        .args(dirs)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh runs")
}
