//! Where the configuration comes from: the `--config` path or the Go `RUNTIME_*` discovery
//! (`docs/design/contract.md#config-files`), what to read, how to compile it, and which paths to
//! watch for changes.
//!
//! The watch set is wider than the Go service's (which, with `RUNTIME_WATCH_ROOT`, reloads only when
//! the root itself is swapped): any change under the walk root counts, as does a swap of the root.

use std::path::PathBuf;

use ratelimitd_core::algorithm::Algorithm;
use ratelimitd_core::config::loader::{self, LoadError, LoadOptions};
use ratelimitd_core::config::{self, CompileOptions, ConfigFile, RateLimitConfig};

use super::watch::WatchTarget;

/// `CONFIG_TYPE`: where the rate limit configuration comes from, so which source startup runs:
/// the files (`reload::start`) or the xDS client (`xds::start`), both feeding this pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// `FILE` (default): files, watched for changes.
    File,
    /// `GRPC_XDS_SOTW`: pushed by an xDS management server over a state-of-the-world ADS stream.
    GrpcXdsSotw,
}

/// Where the configuration files are.
#[derive(Debug, Clone)]
pub enum Location {
    /// A file or directory (`--config`, `RATELIMITD_CONFIG`).
    Path(PathBuf),
    /// The Go service's discovery (`RUNTIME_*`).
    Runtime {
        /// `RUNTIME_ROOT`.
        root: PathBuf,
        /// `RUNTIME_SUBDIRECTORY`.
        subdirectory: String,
        /// `RUNTIME_APPDIRECTORY`.
        appdirectory: String,
        /// `RUNTIME_WATCH_ROOT`.
        watch_root: bool,
    },
}

/// The configuration files the settings point at.
#[derive(Debug, Clone)]
pub struct ConfigSource {
    location: Location,
    load: LoadOptions,
    options: CompileOptions,
    /// The algorithms the backend can run, when it cannot run them all: others are load errors.
    only: Option<Restriction>,
    /// What limits with `regions` are checked against (`REGION`).
    regions: crate::region::RegionCheck,
}

/// The algorithms a backend can run (memcached: fixed windows; the fleet mode: the window
/// algorithms), and what a refusal says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restriction {
    /// The algorithms allowed.
    pub allowed: &'static [Algorithm],
    /// The setting that restricts them, e.g. `BACKEND_TYPE=memcache`.
    pub by: &'static str,
    /// Why, and what to use instead.
    pub why: &'static str,
}

impl Restriction {
    /// memcached: it can only add to a counter atomically.
    pub const MEMCACHE: Restriction = Restriction {
        allowed: &[Algorithm::FixedWindow],
        by: "BACKEND_TYPE=memcache",
        why: "(memcached can only add to a counter atomically); use fixed_window or BACKEND_TYPE=redis",
    };
    /// DynamoDB: a sliding log's or a concurrency limit's state grows with the limit, and every
    /// request would rewrite it whole (an item holds at most 400 KB).
    pub const DYNAMODB: Restriction = Restriction {
        allowed: &[
            Algorithm::FixedWindow,
            Algorithm::TokenBucket,
            Algorithm::SlidingWindow,
            Algorithm::LeakyBucket,
        ],
        by: "BACKEND_TYPE=dynamodb",
        why: "(its state grows with the limit and every request would rewrite it whole); \
              use sliding_window, token_bucket or leaky_bucket, or BACKEND_TYPE=redis",
    };
    /// The fleet mode: instances exchange window counts only.
    pub const FLEET: Restriction = Restriction {
        allowed: &[Algorithm::FixedWindow, Algorithm::SlidingWindow],
        by: "the fleet mode (FLEET_BIND)",
        why: "(instances exchange window counts, which other algorithms cannot be summed from); \
              use fixed_window or sliding_window, or BACKEND_TYPE=redis",
    };
}

impl ConfigSource {
    /// The same source for a backend that runs only some algorithms: a limit with another
    /// algorithm is then a load error naming it.
    pub fn restricted(self, only: Option<Restriction>) -> ConfigSource {
        ConfigSource { only, ..self }
    }

    /// The same source for an instance of `regions.region`: a limit with `regions` it cannot
    /// enforce is then a load error naming it ([`crate::region::RegionCheck`]).
    pub fn regions(self, regions: crate::region::RegionCheck) -> ConfigSource {
        ConfigSource { regions, ..self }
    }

    /// The files at `location`, read under `load` and compiled with `options`.
    pub fn new(location: Location, load: LoadOptions, options: CompileOptions) -> ConfigSource {
        ConfigSource {
            location,
            load,
            options,
            only: None,
            regions: Default::default(),
        }
    }

    /// Reads every file of the configuration (I/O only; no parsing).
    pub fn read(&self) -> Result<Vec<ConfigFile>, LoadError> {
        match &self.location {
            Location::Path(p) => loader::load_path(p, &self.load),
            Location::Runtime {
                root,
                subdirectory,
                appdirectory,
                watch_root,
            } => loader::load_runtime(root, subdirectory, appdirectory, *watch_root, &self.load),
        }
    }

    /// Every place [`ConfigSource::read`] looks, with the variable that chose it and why nothing
    /// may have come of it, for the error (or warning) when no domain is loaded.
    pub fn describe_searched(&self) -> String {
        match &self.location {
            Location::Path(p) => {
                let why = match std::fs::metadata(p) {
                    Err(_) => "does not exist",
                    Ok(m) if m.is_dir() => "a directory; only *.yaml and *.yml files are read",
                    Ok(_) => "a file",
                };
                format!("RATELIMITD_CONFIG={} ({why})", p.display())
            }
            Location::Runtime {
                root,
                subdirectory,
                appdirectory,
                watch_root,
            } => {
                let unset = "RATELIMITD_CONFIG is not set, so the RUNTIME_* settings apply";
                if *watch_root && subdirectory.is_empty() {
                    format!(
                        "{unset}: RUNTIME_ROOT={} with RUNTIME_SUBDIRECTORY empty, which reads nothing",
                        root.display()
                    )
                } else if *watch_root {
                    format!(
                        "{unset}: {} (files named {appdirectory}.*; RUNTIME_WATCH_ROOT=true)",
                        root.join(subdirectory).display()
                    )
                } else {
                    format!(
                        "{unset}: {}",
                        root.join(subdirectory).join(appdirectory).display()
                    )
                }
            }
        }
    }

    /// True with `MERGE_DOMAIN_CONFIG`: documents of one domain merge instead of clashing.
    pub fn merges_domains(&self) -> bool {
        self.options.merge_domains
    }

    /// Parses, validates and compiles `files`; the error lists every problem, one per line.
    /// On a backend that runs only some algorithms ([`Restriction`]), a limit of another
    /// algorithm is an error naming it.
    pub fn compile(&self, files: &[ConfigFile]) -> Result<RateLimitConfig, String> {
        let config = config::compile(files, &self.options).map_err(|e| e.to_string())?;
        if let Some(only) = &self.only {
            refuse_others(&config, only)?;
        }
        self.regions.check(&config)?;
        Ok(config)
    }

    /// The paths whose changes may change what [`ConfigSource::read`] returns.
    pub fn watch_targets(&self) -> Vec<WatchTarget> {
        match &self.location {
            Location::Path(p) => vec![WatchTarget::tree(p.clone())],
            Location::Runtime {
                root,
                subdirectory,
                appdirectory,
                watch_root,
            } => {
                let mut walk_root = root.join(subdirectory);
                if !*watch_root {
                    walk_root.push(appdirectory);
                }
                // The root itself too (not its tree): a symlink swap of the root is how the Go
                // service expects updates to arrive.
                vec![
                    WatchTarget::tree(walk_root),
                    WatchTarget::entry(root.clone()),
                ]
            }
        }
    }
}

/// One line per limit whose algorithm the backend cannot run (memcached has no atomic
/// read-modify-write beyond `incr`, which is all a fixed window needs).
fn refuse_others(config: &RateLimitConfig, only: &Restriction) -> Result<(), String> {
    let errors: Vec<String> = config
        .limits()
        .into_iter()
        .filter(|l| !l.unlimited && !only.allowed.contains(&l.algorithm))
        .map(|l| {
            format!(
                "{}: limit {}: algorithm {} is not available with {} {}",
                l.file,
                l.full_key,
                l.algorithm.name(),
                only.by,
                only.why
            )
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}
