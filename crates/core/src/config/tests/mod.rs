//! The configuration's unit tests, one file a topic: loading, compiling and validating files
//! ([`validate`] holds the helpers the others share), matching, predicates, and each feature's
//! settings.

mod calendar;
mod compile;
mod concurrency;
mod extension;
mod loader;
mod matching;
mod multi;
mod predicate;
mod quota_group;
mod region;
mod shedding;
mod split;
mod validate;
mod value_regex;
