//! Tests across algorithms, one file a topic: the properties both buckets share ([`bucket`], whose
//! helpers the per-algorithm tests use too) and usage reports on every algorithm ([`report`]).

pub(super) mod bucket;
mod report;
