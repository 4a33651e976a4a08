//! Rate limit configuration: YAML model, validation with Go's error texts, compiled matching tree, loader.
//!
//! Flow: `loader` reads files (the only I/O) → `model` parses each YAML document into raw types →
//! `validate` checks them and builds the `compiled` form, collecting every error with file and YAML path.

pub mod compiled;
pub mod unit;

pub use compiled::{EntryRef, Limit, Match, MatchKind, MatchedLevel, Node, RateLimitConfig};
pub use unit::Unit;
