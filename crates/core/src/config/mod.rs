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
mod stats_name;
mod suggest;
mod typed;
pub(crate) mod unit;
mod usage;
mod validate;
mod value_regex;
mod yaml_budget;

#[cfg(test)]
mod calendar_tests;
#[cfg(test)]
mod compile_tests;
#[cfg(test)]
mod concurrency_tests;
#[cfg(test)]
mod extension_tests;
#[cfg(test)]
mod loader_tests;
#[cfg(test)]
mod matching_tests;
#[cfg(test)]
mod multi_tests;
#[cfg(test)]
mod predicate_tests;
#[cfg(test)]
mod quota_group_tests;
#[cfg(test)]
mod region_tests;
#[cfg(test)]
mod shedding_tests;
#[cfg(test)]
mod validate_tests;
#[cfg(test)]
mod value_regex_tests;

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
pub use stats_name::sanitize;
pub use unit::Unit;
pub use validate::{CompileOptions, ConfigFile, compile};
pub use yaml_budget::DEFAULT_MAX_FILE_BYTES;
