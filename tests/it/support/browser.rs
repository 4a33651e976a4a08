//! Headless Chromium for the console tests: the DOM it builds from a page, and a screenshot of
//! it. Each run is bounded (60 s; the guard kills it otherwise).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use ratelimitd_core::clock::Stopwatch;

use super::guard;

/// Runs Chromium headless with `args` and returns what it printed, within 60 s.
fn chromium(args: &[&str]) -> String {
    let mut cmd = guard::guarded("chromium");
    cmd.args(["--headless", "--no-sandbox", "--disable-gpu"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd
        .spawn()
        .expect("chromium runs (tests/run.sh installs it)");
    let out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    let watch = Stopwatch::start();
    while !reader.is_finished() && watch.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    guard::stop(&mut child);
    reader.join().unwrap_or_default()
}

/// The DOM Chromium builds from `url`.
pub(crate) fn dump_dom(url: &str) -> String {
    chromium(&["--dump-dom", url])
}

/// A 1280-pixel-wide screenshot of `url` into `png`; panics when none was written.
pub(crate) fn screenshot(url: &str, png: &Path) {
    let _ = std::fs::remove_file(png);
    let arg = format!("--screenshot={}", png.display());
    chromium(&["--window-size=1280,1400", "--hide-scrollbars", &arg, url]);
    let size = std::fs::metadata(png).map_or(0, |m| m.len());
    assert!(
        size > 1_000,
        "chromium wrote no screenshot of {url} to {}",
        png.display()
    );
}
