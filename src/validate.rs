//! `ratelimitd validate PATH...`: checks config files and directories the way the server loads
//! them and prints every error, for CI pipelines and pre-deploy checks.

use std::io::Write;
use std::path::PathBuf;

use ratelimitd_core::config::{self, CompileOptions, ConfigFile, LoadOptions};

/// Validates every file under `paths` as one configuration (so duplicate domains across files are
/// caught), read under `load` (the size cap the server applies, `CONFIG_MAX_FILE_BYTES`). Writes
/// a summary to `out` and every error to `err`; returns the process exit code.
pub fn run(
    paths: &[PathBuf],
    merge_domains: bool,
    load: &LoadOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let mut files: Vec<ConfigFile> = Vec::new();
    let mut failed = false;
    for p in paths {
        match config::loader::load_path(p, load) {
            Ok(f) => files.extend(f),
            Err(e) => {
                let _ = writeln!(err, "{e}");
                failed = true;
            }
        }
    }
    // A default calendar zone (`CALENDAR_TIME_ZONE`) changes no file's validity: left out here.
    let options = CompileOptions {
        merge_domains,
        ..CompileOptions::default()
    };
    let config = match config::compile(&files, &options) {
        Ok(config) => config,
        Err(errors) => {
            for e in &errors.0 {
                let _ = writeln!(err, "{e}");
            }
            let _ = writeln!(
                err,
                "error loading rate limit configs: {} error(s)",
                errors.0.len()
            );
            return 1;
        }
    };
    // Warnings do not fail the check (the server loads such a config too), but they are shown.
    for w in config.warnings() {
        let _ = writeln!(err, "warning: {w}");
    }
    if failed {
        return 1;
    }
    let _ = writeln!(out, "all rate limit configs ok ({} file(s))", files.len());
    0
}
