//! What the core's unit tests share: a request entry for the matching tests, a configuration
//! compiled from one YAML text, and a limiter on a fresh memory store with a manual clock. Each
//! test module keeps its own YAML and asks; only the setup that was the same everywhere is here.

use std::sync::Arc;

use crate::clock::{ManualClock, Timestamp};
use crate::config::{CompileOptions, ConfigErrors, ConfigFile, EntryRef, RateLimitConfig, compile};
use crate::limiter::{LimiterOptions, RateLimiter, StatsSink};
use crate::store::memory::MemoryStore;

/// A request entry `(key, value)`.
pub(crate) struct E(pub &'static str, pub &'static str);

impl EntryRef for E {
    fn key(&self) -> &str {
        self.0
    }
    fn value(&self) -> &str {
        self.1
    }
}

/// `yaml` compiled as the only file of a configuration, with the default options.
pub(crate) fn compiled(yaml: &str) -> Result<RateLimitConfig, ConfigErrors> {
    let file = ConfigFile {
        name: "config.test.yaml".into(),
        contents: yaml.into(),
    };
    compile(&[file], &CompileOptions::default())
}

/// [`compiled`] for a text that must compile: the test fails with the errors otherwise.
pub(crate) fn config(yaml: &str) -> RateLimitConfig {
    compiled(yaml).unwrap_or_else(|e| panic!("does not compile:\n{e}"))
}

/// The YAML path and message (with its hint) of every error of a text that must be refused: the
/// test fails when it compiles.
pub(crate) fn errors(yaml: &str) -> Vec<(String, String)> {
    match compiled(yaml) {
        Ok(_) => panic!("compiled, but should have been refused"),
        Err(e) => {
            e.0.into_iter()
                .map(|e| (e.path.clone(), e.explained()))
                .collect()
        }
    }
}

/// A limiter with `options` on a fresh memory store, its clock a manual one at 1000 s (so a
/// minute window resets in 20 s), counting into `stats`.
pub(crate) fn memory_limiter(options: LimiterOptions, stats: Arc<dyn StatsSink>) -> RateLimiter {
    let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_000)));
    RateLimiter::with_stats(Arc::new(MemoryStore::new(100)), clock, options, stats)
}
