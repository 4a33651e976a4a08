//! Local stand-ins for the `Dockerfile`'s base images, for machines that cannot pull from Docker
//! Hub (only the package registries are reachable there): the image test builds the real
//! Dockerfile on them, both stages, under the names its `FROM` lines use.
//!
//! - `docker.io/library/debian:<suite>-slim`: a Debian root filesystem made by `debootstrap
//!   --variant=minbase` (what Debian's official images are made from) from the mirror this
//!   machine's apt uses, imported with the official image's `PATH` and `CMD`.
//! - `docker.io/library/rust:<version>-<suite>`: the official image is `buildpack-deps:<suite>`
//!   with rustup's minimal profile installed in `/usr/local/rustup` and `/usr/local/cargo`. The
//!   stand-in is the Debian stand-in plus `BUILD_PACKAGES` (a few of buildpack-deps' packages, so
//!   that a build needing anything else fails here rather than passing on a package the real
//!   image lacks), and this machine's toolchain of that version: the minimal profile's components
//!   (rustc, cargo, rust-std) under this machine's rustup, with the official image's environment
//!   (`RUSTUP_HOME`, `CARGO_HOME`, `PATH`, `RUST_VERSION`).
//!
//! A stand-in carries the label `STAND_IN_LABEL`, naming its recipe. It is made when its name is
//! missing from podman's storage (about 3 minutes for both) and kept there for later runs; an
//! image of that name without the label (a real one, pulled where Docker Hub is reachable) is
//! used as it is; a stand-in of another recipe (an older one, another toolchain) is made again.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::podman::{BUILD, podman, run};
use super::require::find_on_path;

/// The label a stand-in carries: its recipe.
pub(crate) const STAND_IN_LABEL: &str = "ratelimitd.test.stand-in";

/// Bumped when a recipe below changes, so that stand-ins made by the old one are made again.
const RECIPE_VERSION: u32 = 1;

/// The packages the Rust stand-in adds to Debian: all in `buildpack-deps:bookworm` (the base of
/// the official Rust image), and all the build stage needs (the C compiler and libc headers for
/// ring, SQLite, zstd and mimalloc; the CA certificates for crates.io).
const BUILD_PACKAGES: [&str; 3] = ["ca-certificates", "gcc", "libc6-dev"];

/// The rustup proxies the official image's `rustup-init` installs next to `rustup`.
const RUSTUP_PROXIES: [&str; 13] = [
    "cargo",
    "cargo-clippy",
    "cargo-fmt",
    "cargo-miri",
    "clippy-driver",
    "rls",
    "rust-analyzer",
    "rust-gdb",
    "rust-gdbgui",
    "rust-lldb",
    "rustc",
    "rustdoc",
    "rustfmt",
];

/// The components of rustup's minimal profile, which the official image installs.
const MINIMAL_PROFILE: [&str; 3] = ["rustc", "cargo", "rust-std"];

/// Debian's `PATH`, which its official images set.
const DEBIAN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A base image a stand-in can be made for.
enum Base {
    /// `debian:<suite>-slim`.
    Debian { suite: String },
    /// `rust:<version>-<suite>`.
    Rust { version: String, suite: String },
}

impl Base {
    fn parse(image: &str) -> Base {
        let name = image.strip_prefix("docker.io/library/").unwrap_or(image);
        if let Some(suite) = name
            .strip_prefix("debian:")
            .and_then(|t| t.strip_suffix("-slim"))
        {
            return Base::Debian {
                suite: suite.to_string(),
            };
        }
        if let Some((version, suite)) = name.strip_prefix("rust:").and_then(|t| t.split_once('-')) {
            return Base::Rust {
                version: version.to_string(),
                suite: suite.to_string(),
            };
        }
        panic!(
            "no stand-in for the base image {image}: the image test knows \
             docker.io/library/debian:<suite>-slim and docker.io/library/rust:<version>-<suite> \
             (tests/it/support/base_images.rs)"
        )
    }
}

/// Makes sure `image` (a `FROM` of the Dockerfile) is in podman's storage: the image already there
/// (a real one, or a stand-in of the current recipe), else a stand-in made now.
pub(crate) fn ensure(image: &str) {
    let base = Base::parse(image);
    let found = stand_in_recipe(image);
    if found == Some(None) {
        return; // A real image, pulled where Docker Hub is reachable.
    }
    let made = match base {
        Base::Debian { suite } => {
            let recipe = format!("debian-{suite}-minbase-{RECIPE_VERSION}");
            if found.as_ref() == Some(&Some(recipe.clone())) {
                return;
            }
            eprintln!("making a stand-in for {image} ({recipe})");
            make_debian(&suite, &recipe)
        }
        Base::Rust { version, suite } => {
            let toolchain = Toolchain::of_this_machine(&version, image);
            let recipe = format!(
                "rust-{}-{}-{}-{RECIPE_VERSION}",
                toolchain.release,
                toolchain.host,
                BUILD_PACKAGES.join("+")
            );
            if found.as_ref() == Some(&Some(recipe.clone())) {
                return;
            }
            eprintln!("making a stand-in for {image} ({recipe})");
            make_rust(&suite, &recipe, &toolchain)
        }
    };
    publish(&made, image);
}

/// `None` when `image` is not in podman's storage; else its stand-in label, `None` for an image
/// without one.
fn stand_in_recipe(image: &str) -> Option<Option<String>> {
    let limit = Duration::from_secs(60);
    let (exists, _, _) = podman(&["image", "exists", image], limit);
    if !exists {
        return None;
    }
    let format = format!("{{{{index .Labels \"{STAND_IN_LABEL}\"}}}}");
    let (ok, label, err) = podman(&["image", "inspect", "--format", &format, image], limit);
    assert!(ok, "podman image inspect {image}: {err}");
    let label = label.trim();
    Some((!label.is_empty() && label != "<no value>").then(|| label.to_string()))
}

/// Gives the image `made` (a temporary name) the name `image`, and removes the image that had
/// it, if any and no other image is built on it. Building under a temporary name first lets two
/// test runs that make the same stand-in at once both succeed.
fn publish(made: &str, image: &str) {
    let limit = Duration::from_secs(120);
    let (_, old, _) = podman(&["image", "inspect", "--format", "{{.Id}}", image], limit);
    let (ok, _, err) = podman(&["tag", made, image], limit);
    assert!(ok, "podman tag {made} {image}: {err}");
    let (ok, _, err) = podman(&["untag", made, made], limit);
    assert!(ok, "podman untag {made}: {err}");
    if !old.trim().is_empty() {
        // Fails, harmlessly, while another image (a stand-in built on it) still uses it.
        podman(&["rmi", old.trim()], limit);
    }
}

/// A temporary name for a stand-in being made, of this process alone.
fn temporary_name(kind: &str) -> String {
    static MADE: AtomicU32 = AtomicU32::new(0);
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    format!(
        "localhost/ratelimitd-stand-in-{kind}:{}-{n}",
        std::process::id()
    )
}

/// The last `n` lines of `text`, for failure messages about long logs.
pub(crate) fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// debootstrap's minbase `suite` from this machine's Debian mirror, imported into podman.
fn make_debian(suite: &str, recipe: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    let mirror = debian_mirror(suite);
    // In a mount namespace of its own: what debootstrap mounts inside the root filesystem
    // (/proc, /sys, /dev's nodes in a container) goes away with it, even when it is killed, so
    // removing the directory afterwards never reaches the host's /dev.
    let done = run(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "debootstrap"])
            .args(["--variant=minbase", "--components=main", suite])
            .arg(&rootfs)
            .arg(&mirror),
        Duration::from_secs(20 * 60),
    );
    assert!(
        done.ok,
        "debootstrap {suite} from {mirror}:\n{}\n{}",
        tail(&done.stdout, 40),
        tail(&done.stderr, 40)
    );
    // As Debian's images: no package lists, downloaded packages or device nodes.
    let tar = dir.path().join("rootfs.tar");
    let done = run(
        Command::new("tar")
            .args(["--numeric-owner", "--create", "--file"])
            .arg(&tar)
            .args([
                "--exclude=./dev/*",
                "--exclude=./proc/*",
                "--exclude=./sys/*",
                "--exclude=./var/lib/apt/lists/*_*",
                "--exclude=./var/cache/apt/*.bin",
                "--exclude=./var/cache/apt/archives/*.deb",
                "--directory",
            ])
            .arg(&rootfs)
            .arg("."),
        Duration::from_secs(5 * 60),
    );
    assert!(
        done.ok,
        "tar of the {suite} root filesystem: {}",
        done.stderr
    );
    let name = temporary_name("debian");
    let (ok, _, err) = podman(
        &[
            "import",
            "--change",
            &format!("ENV PATH={DEBIAN_PATH}"),
            "--change",
            r#"CMD ["bash"]"#,
            "--change",
            &format!("LABEL {STAND_IN_LABEL}={recipe}"),
            tar.to_str().unwrap(),
            &name,
        ],
        Duration::from_secs(5 * 60),
    );
    assert!(ok, "podman import of the {suite} root filesystem: {err}");
    name
}

/// The Debian mirror this machine's apt takes `suite` from (its sources lists), else
/// deb.debian.org.
fn debian_mirror(suite: &str) -> String {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = dir.filter_map(|e| Some(e.ok()?.path())).collect();
        more.sort();
        files.extend(more);
    }
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let found = match file.extension().and_then(|e| e.to_str()) {
            Some("sources") => mirror_in_deb822(&text, suite),
            Some("list") => mirror_in_one_line_list(&text, suite),
            _ => None,
        };
        if let Some(uri) = found {
            return uri.trim_end_matches('/').to_string();
        }
    }
    "http://deb.debian.org/debian".to_string()
}

fn is_http(uri: &str) -> bool {
    uri.starts_with("http://") || uri.starts_with("https://")
}

/// The first `deb URI suite …` line of a `.list` file (`deb [options] URI suite components`).
fn mirror_in_one_line_list(text: &str, suite: &str) -> Option<String> {
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut words: Vec<&str> = line.split_whitespace().collect();
        if words.first() != Some(&"deb") {
            continue;
        }
        words.remove(0);
        if words.first().is_some_and(|w| w.starts_with('[')) {
            let end = words.iter().position(|w| w.ends_with(']'))?;
            words.drain(..=end);
        }
        if let [uri, s, ..] = words[..]
            && s == suite
            && is_http(uri)
        {
            return Some(uri.to_string());
        }
    }
    None
}

/// The first enabled `deb` stanza of a deb822 `.sources` file whose `Suites` has `suite`.
fn mirror_in_deb822(text: &str, suite: &str) -> Option<String> {
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                let (key, value) = l.split_once(':')?;
                key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
            })
        };
        let has = |name: &str, word: &str| {
            field(name).is_some_and(|v| v.split_whitespace().any(|w| w == word))
        };
        if has("Types", "deb") && has("Suites", suite) && field("Enabled") != Some("no") {
            let uris = field("URIs").unwrap_or_default();
            if let Some(uri) = uris.split_whitespace().find(|u| is_http(u)) {
                return Some(uri.to_string());
            }
        }
    }
    None
}

/// This machine's Rust toolchain (the one `rustc` on `PATH` runs: under `cargo test`, the one
/// rustup picked for cargo), and its rustup.
struct Toolchain {
    sysroot: PathBuf,
    /// `1.95.0`.
    release: String,
    /// `x86_64-unknown-linux-gnu`.
    host: String,
    rustup: PathBuf,
}

impl Toolchain {
    /// The toolchain, which must be the `version` the base `image` names.
    fn of_this_machine(version: &str, image: &str) -> Toolchain {
        let rustc = |args: &[&str]| {
            let out = Command::new("rustc").args(args).output();
            let out = out.unwrap_or_else(|e| panic!("rustc {args:?} does not run: {e}"));
            assert!(out.status.success(), "rustc {args:?} fails");
            String::from_utf8(out.stdout).unwrap()
        };
        let info = rustc(&["-vV"]);
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("no `{name}` in rustc -vV: {info}"))
                .trim()
                .to_string()
        };
        let (release, host) = (field("release:"), field("host:"));
        assert!(
            release == version || release.starts_with(&format!("{version}.")),
            "the stand-in for {image} needs a Rust {version} toolchain and rustc here is \
             {release}: `rustup toolchain install {version}`, then run the test with \
             RUSTUP_TOOLCHAIN={version}"
        );
        let rustup = find_on_path("rustup")
            .and_then(|p| p.canonicalize().ok())
            .unwrap_or_else(|| {
                panic!("the stand-in for {image} copies this machine's rustup: none on PATH")
            });
        Toolchain {
            sysroot: PathBuf::from(rustc(&["--print", "sysroot"]).trim()),
            release,
            host,
            rustup,
        }
    }
}

/// The Debian stand-in of `suite` with `BUILD_PACKAGES`, this machine's toolchain and the official
/// Rust image's environment.
fn make_rust(suite: &str, recipe: &str, toolchain: &Toolchain) -> String {
    let debian = format!("docker.io/library/debian:{suite}-slim");
    ensure(&debian);
    let ctx = tempfile::tempdir().unwrap();
    let name = format!("{}-{}", toolchain.release, toolchain.host);
    let installed = ctx.path().join("rustup/toolchains").join(&name);
    let rustlib = installed.join("lib/rustlib");
    let mut components = String::new();
    for component in MINIMAL_PROFILE {
        let manifest = format!("lib/rustlib/manifest-{component}-{}", toolchain.host);
        let listed = std::fs::read_to_string(toolchain.sysroot.join(&manifest))
            .unwrap_or_else(|e| panic!("{manifest} of {}: {e}", toolchain.sysroot.display()));
        for entry in listed.lines() {
            // `file:bin/rustc` or `dir:share/doc/rust/html`.
            let (_, path) = entry.split_once(':').expect("kind:path");
            link_tree(&toolchain.sysroot.join(path), &installed.join(path));
        }
        link_tree(
            &toolchain.sysroot.join(&manifest),
            &installed.join(&manifest),
        );
        components.push_str(&format!("{component}-{}\n", toolchain.host));
    }
    std::fs::write(rustlib.join("components"), components).unwrap();
    let settings =
        format!("version = \"12\"\ndefault_toolchain = \"{name}\"\nprofile = \"minimal\"\n");
    std::fs::write(ctx.path().join("rustup/settings.toml"), settings).unwrap();
    link_tree(&toolchain.rustup, &ctx.path().join("cargo/bin/rustup"));

    let containerfile = [
        format!("FROM {debian}"),
        format!(
            "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
             --no-install-recommends {} && rm -rf /var/lib/apt/lists/*",
            BUILD_PACKAGES.join(" ")
        ),
        "COPY rustup/ /usr/local/rustup/".to_string(),
        "COPY cargo/ /usr/local/cargo/".to_string(),
        format!(
            "ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo \
             PATH=/usr/local/cargo/bin:$PATH RUST_VERSION={}",
            toolchain.release
        ),
        // As rustup-init leaves it: proxies linked to rustup, everything writable.
        format!(
            "RUN set -eux; cd /usr/local/cargo/bin; \
             for proxy in {}; do ln rustup \"$proxy\"; done; \
             chmod -R a+w \"$RUSTUP_HOME\" \"$CARGO_HOME\"; \
             rustup --version; cargo --version; rustc --version",
            RUSTUP_PROXIES.join(" ")
        ),
        format!("LABEL {STAND_IN_LABEL}={recipe}"),
    ]
    .join("\n")
        + "\n";
    std::fs::write(ctx.path().join("Containerfile"), containerfile).unwrap();
    let made = temporary_name("rust");
    let ctx_path = ctx.path().to_str().unwrap();
    // The host network: apt reaches the mirror as debootstrap did.
    let (ok, out, err) = podman(
        &[&BUILD[..], &["--tag", &made, ctx_path]].concat(),
        Duration::from_secs(20 * 60),
    );
    assert!(
        ok,
        "podman build of the Rust stand-in:\n{}\n{}",
        tail(&out, 40),
        tail(&err, 40)
    );
    made
}

/// Hard-links `from` (a file, or a directory recursively) to `to`, copying where a link cannot be
/// made (another filesystem): the toolchain is hundreds of megabytes.
fn link_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    if from.is_dir() {
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            link_tree(&entry.path(), &to.join(entry.file_name()));
        }
        return;
    }
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
}
