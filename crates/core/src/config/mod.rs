//! Rate limit configuration: YAML parsing, validation with Go's error texts, the compiled matching
//! tree, and the file loader.
//!
//! Flow: `loader` reads files (the only I/O) → `model` parses each YAML document, running Go's key
//! check (`keys`) and a typed walk → `validate` checks the result and builds the `compiled` tree,
//! collecting every error with its file and YAML path → `matching` answers `GetLimit`.

mod calendar;
pub(crate) mod compiled;
mod convert;
mod error;
mod extensions;
mod failure_mode;
mod keys;
mod limit;
pub mod loader;
mod matching;
mod model;
mod multi;
pub mod predicate;
mod regions;
pub mod shedding;
mod split;
mod stats_name;
mod suggest;
mod typed;
pub(crate) mod unit;
mod usage;
mod validate;
mod value_regex;
mod yaml_budget;

#[cfg(test)]
mod tests;

pub use calendar::nearest_zone;
pub use compiled::{
    Domain, EntryRef, FailureMode, Limit, Match, MatchKind, MatchedLevel, Node, RateLimitConfig,
    RequestLimitCap, ValueRegex,
};
pub use error::{ConfigError, ConfigErrors};
pub use extensions::MAX_LEASE;
pub use loader::{LoadError, LoadOptions, load_path, load_runtime};
pub use matching::Lookup;
pub use regions::valid_region;
pub use shedding::{Priorities, Shedding, Soft, effective_limit};
pub use split::{MAX_SPLIT, MIN_SPLIT};
pub use stats_name::sanitize;
pub use unit::Unit;
pub use validate::{CompileOptions, ConfigFile, compile};
pub use yaml_budget::DEFAULT_MAX_FILE_BYTES;
