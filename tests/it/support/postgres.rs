//! A real PostgreSQL for the policy tests: Debian's `postgresql` binaries
//! (`/usr/lib/postgresql/<version>/bin`), a fresh cluster in a temp dir on a free loopback port,
//! trust authentication, run as `nobody` when the tests run as root (PostgreSQL refuses root).
//! The server runs under the process guard, so it dies with the test. A test that neither stops
//! the server nor needs it down gets a database of its own on the run's shared server instead
//! ([`shared_database`]): one `initdb` per run rather than one per test.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use super::guard;

/// A running PostgreSQL server; killed and removed on drop.
pub(crate) struct Postgres {
    child: Option<Child>,
    port: u16,
    bin: PathBuf,
    root: bool,
    dir: tempfile::TempDir,
}

/// Whether PostgreSQL's server binaries are installed (what `require!(Postgres)` asks).
pub(crate) fn installed() -> bool {
    bin_dir().is_some()
}

/// The newest installed server's binaries, or `None` when the package is missing.
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("postgres").is_file())
        .collect();
    versions.sort();
    versions.pop()
}

/// `program` as the unprivileged user when we are root, else as ourselves; under the process
/// guard when it is the server (a run-to-completion tool such as initdb would be killed by it).
fn command(program: PathBuf, as_nobody: bool, server: bool) -> Command {
    let (program, args): (PathBuf, Vec<std::ffi::OsString>) = if as_nobody {
        let args = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"];
        let mut args: Vec<_> = args.iter().map(std::convert::Into::into).collect();
        args.push(program.into_os_string());
        ("setpriv".into(), args)
    } else {
        (program, Vec::new())
    };
    let mut cmd = if server {
        guard::guarded(program)
    } else {
        Command::new(program)
    };
    cmd.args(args);
    cmd
}

impl Postgres {
    /// Starts a server (panics with a clear message when PostgreSQL is not installed: run
    /// `tests/run.sh`, which installs it).
    pub(crate) fn start() -> Postgres {
        let mut pg = Postgres::prepare();
        pg.run();
        pg
    }

    /// A server initialised on its port but not running yet (start it with
    /// [`Postgres::restart`]): for a database that is down when ratelimitd starts.
    pub(crate) fn prepare() -> Postgres {
        let bin = bin_dir()
            .expect("PostgreSQL is installed (apt-get install postgresql; tests/run.sh does it)");
        let dir = tempfile::tempdir().unwrap();
        let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
        if root {
            let status = Command::new("chown")
                .arg("-R")
                .arg("nobody:nogroup")
                .arg(dir.path())
                .status();
            assert!(
                status.unwrap().success(),
                "chown of the PostgreSQL temp dir"
            );
        }
        let data = dir.path().join("data");
        let mut init = command(bin.join("initdb"), root, false);
        init.arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "--no-sync"]);
        let out = init
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Postgres {
            child: None,
            port,
            bin,
            root,
            dir,
        }
    }

    /// Starts the server on its data directory and port and waits until it accepts connections.
    /// A server that exits at once (after a kill, the old backends may still hold the shared
    /// memory for a moment) is started again, within the same 30 s.
    fn run(&mut self) {
        let watch = Stopwatch::start();
        loop {
            let exited = match self.child.as_mut() {
                None => true,
                Some(c) => c.try_wait().ok().flatten().is_some(),
            };
            if exited {
                self.spawn();
            }
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            assert!(
                watch.elapsed() < Duration::from_secs(30),
                "PostgreSQL did not start in 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn spawn(&mut self) {
        let mut server = command(self.bin.join("postgres"), self.root, true);
        server
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]);
        let child = server
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Kills the server as a crash would (SIGKILL); its backends exit when they notice.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            guard::stop(&mut child);
        }
    }

    /// Starts it again on the same data and port (after [`Postgres::kill`] or
    /// [`Postgres::prepare`]).
    pub(crate) fn restart(&mut self) {
        self.run();
    }

    /// The URL of its `postgres` database.
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

/// The URL of a new, empty database on the PostgreSQL shared by the tests of this run (started
/// on first use). Tables, rows and LISTEN/NOTIFY channels are per database, so tests sharing the
/// server do not see each other. Like the shared Redis (`stores.rs`), the server is a static that
/// is never dropped and dies with the test process under its guard; a sweeper removes its dir.
pub(crate) fn shared_database() -> String {
    static SHARED: OnceLock<(Postgres, Child)> = OnceLock::new();
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let (pg, _sweeper) = SHARED.get_or_init(|| {
        let pg = Postgres::start();
        let sweeper = guard::remove_at_exit(&[pg.dir.path()]);
        (pg, sweeper)
    });
    let name = format!("test_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let port = pg.port.to_string();
    let out = Command::new(pg.bin.join("createdb"))
        .args(["-h", "127.0.0.1", "-p", &port, "-U", "postgres", &name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "createdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("postgres://postgres@127.0.0.1:{port}/{name}")
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.kill();
    }
}
